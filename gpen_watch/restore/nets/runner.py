"""A face network ready for inference on its device and in its precision: what every torch face
family hands the enhancer (``restore.runtime.face_model.FaceModel``), whatever the network."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor, nn

from gpen_watch.config import Precision, ResolvedPrecision

_AUTOCAST_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


class SizedConfig(Protocol):
    @property
    def size(self) -> int: ...


def resolve_precision(device: torch.device | str, precision: Precision) -> ResolvedPrecision:
    """ "auto" -> fp32 on CPU (the measured-safe default); bf16 on CUDA when supported (fp32 range,
    unlike fp16), else fp32.  fp16 on CPU is rejected: CPU autocast fp16 is slow and untested here.

    On Apple's GPU (mps) "auto" is fp32 too: its half-precision autocast depends on the torch and
    macOS versions and has not been run on one here; fp16 and bf16 can be asked for."""
    dev = torch.device(device)
    if precision == "auto":
        if dev.type == "cuda" and torch.cuda.is_bf16_supported():
            return "bf16"
        return "fp32"
    if precision == "fp16" and dev.type not in ("cuda", "mps"):
        raise ValueError("fp16 is only supported on a GPU (CUDA or Apple's mps); use bf16 or fp32 on CPU")
    if precision in ("fp32", "fp16", "bf16"):
        return precision
    raise ValueError(f"unknown precision {precision!r}")


@dataclass
class FaceRunner:
    """A face network ready for inference: call it with (N, 3, S, S) faces in [-1, 1], get fp32
    images back. ``model.config.size`` is S. A network with a fidelity input (CodeFormer's w) is
    given the (N,) weights the enhancer passes; the others are never given any."""

    model: nn.Module
    device: torch.device
    precision: ResolvedPrecision
    channels_last: bool

    @property
    def size(self) -> int:
        config: SizedConfig = self.model.config  # type: ignore[assignment]
        return int(config.size)

    @property
    def network(self) -> nn.Module:
        return self.model

    def autocast(self) -> contextlib.AbstractContextManager[object]:
        if self.precision == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=_AUTOCAST_DTYPES[self.precision])

    def __call__(self, x: Tensor, /, fidelity: Tensor | None = None) -> Tensor:
        x = x.to(self.device, dtype=torch.float32, non_blocking=True)
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        with torch.inference_mode(), self.autocast():
            if fidelity is None:
                out: Tensor = self.model(x)
            else:
                out = self.model(x, fidelity.to(self.device, dtype=torch.float32))
        return out.float()


def prepare_for_inference(
    model: nn.Module,
    device: torch.device | str = "cpu",
    precision: Precision = "fp32",
    channels_last: bool = False,
) -> FaceRunner:
    """Move ``model`` to ``device`` in eval mode without gradients and wrap it in a runner.

    Weights stay fp32; reduced precision comes from autocast inside the runner, so the fp32-only
    parts (demodulation, RGB skip path) keep full precision.
    """
    dev = torch.device(device)
    prec = resolve_precision(dev, precision)
    model = model.to(dev).eval().requires_grad_(False)
    if channels_last:
        # Module.to(memory_format=...) rejects the 5-D modulated weights, so convert the 4-D ones
        # (encoder convs) directly; modulated weights are rebuilt as 4-D tensors on every call.
        for p in model.parameters():
            if p.ndim == 4:
                p.data = p.data.contiguous(memory_format=torch.channels_last)
    return FaceRunner(model=model, device=dev, precision=prec, channels_last=channels_last)
