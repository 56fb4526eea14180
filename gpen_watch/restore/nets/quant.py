"""ParseNet in int8 on a CPU: post-training static quantization with torch.ao (FX graph mode).

Activations are calibrated at load time on a fixed synthetic input made here, so nothing is
downloaded or stored and two loads give the same network. Real face crops would calibrate the
activation ranges better; a user has none at load time, and the ranges chosen from a smooth
random image in the parser's input range [-1, 1] are what the measured error figures in
docs/benchmarks.md ("int8 and smaller ParseNet passes on CPU") are for.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch import nn

# Side of the calibration images: the statistics per channel do not depend on the side for a
# fully convolutional net, and a 256 px pass costs a quarter of a 512 px one at load.
_CALIBRATION_SIDE = 256
_CALIBRATION_IMAGES = 2


def int8_backend() -> str | None:
    """The quantized engine for this CPU (x86 and ARM have one), or None where torch has none."""
    engines = torch.backends.quantized.supported_engines
    for name in ("x86", "fbgemm", "qnnpack"):
        if name in engines:
            return name
    return None


def calibration_images(side: int = _CALIBRATION_SIDE, count: int = _CALIBRATION_IMAGES) -> torch.Tensor:
    """(count, 3, side, side) in [-1, 1]: smooth blobs at a few scales plus fine grain, the same
    on every call (a fixed generator seed), so the quantized net is the same on every load."""
    gen = torch.Generator().manual_seed(0)
    out = torch.zeros(count, 3, side, side)
    for cells, weight in ((4, 0.6), (16, 0.3), (side, 0.1)):
        coarse = torch.rand(count, 3, cells, cells, generator=gen) * 2 - 1
        out += weight * F.interpolate(coarse, size=(side, side), mode="bilinear", align_corners=False)
    return out.clamp_(-1, 1)


def quantize_parser(model: nn.Module) -> nn.Module:
    """An int8 copy of ``model`` (ParseNet after ``fold.prepare_conv_net``, in eval mode on the
    CPU), calibrated on ``calibration_images``. It takes and returns float tensors like the
    original.

    Raises RuntimeError when this torch has no quantized engine for the CPU.
    """
    return quantize_static(model, calibration_images())


def quantize_static(model: nn.Module, calibration: torch.Tensor) -> nn.Module:
    """``model`` (eval mode, CPU, BatchNorm folded) with per-channel int8 weights and per-tensor
    uint8 activations whose ranges are the min/max seen on ``calibration`` (N, C, H, W), one
    image a pass. Float in, float out."""
    from torch.ao.quantization import (
        MinMaxObserver,
        PerChannelMinMaxObserver,
        QConfig,
        QConfigMapping,
    )
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    backend = int8_backend()
    if backend is None:
        raise RuntimeError("this build of torch has no int8 engine for this CPU")
    # The quantized engine is torch's process-wide choice; the worker runs one parser.
    torch.backends.quantized.engine = backend
    for module in model.modules():
        # The quantized leaky ReLU has no in-place form (it warns on every call otherwise).
        if isinstance(module, (nn.LeakyReLU, nn.ReLU)):
            module.inplace = False
    # Min/max ranges, not torch's default histogram search: that took ~40 s of a 2-core CPU at
    # load for ParseNet. 8-bit activations unless the engine is fbgemm/x86 without VNNI,
    # where torch's own default keeps them to 7 bits against overflow in its kernels.
    reduce = backend in ("x86", "fbgemm") and not _has_vnni()
    qconfig = QConfig(  # type: ignore[no-untyped-call]
        activation=MinMaxObserver.with_args(dtype=torch.quint8, reduce_range=reduce),
        weight=PerChannelMinMaxObserver.with_args(dtype=torch.qint8, qscheme=torch.per_channel_symmetric),
    )
    mapping = QConfigMapping().set_global(qconfig)
    calib = calibration.contiguous(memory_format=torch.channels_last)
    with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings():
        # torch 2.10+ marks torch.ao's FX quantization and its quantized tensors deprecated (in
        # favour of torchao's pt2e flow, whose CPU kernels need inductor and so a C++ compiler);
        # they still work, and the warning would fill every worker's log at each load.
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", message=".*quantiz.*deprecated.*")
        observed = prepare_fx(model, mapping, example_inputs=(calib[:1],))
        for i in range(len(calib)):
            observed(calib[i : i + 1])
        return convert_fx(observed)


def _has_vnni() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            flags = f.read(200_000)
    except OSError:
        return False
    return "avx512_vnni" in flags or "avx_vnni" in flags
