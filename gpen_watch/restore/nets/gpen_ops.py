"""Native PyTorch versions of the StyleGAN2 primitives GPEN was written against.

Upstream GPEN compiles two CUDA extensions at import time (``fused_bias_act`` and ``upfirdn2d``).
gpen-watch must not compile anything, so these are plain ``torch.nn.functional`` equivalents that give
the same numbers on any device.

FIR filtering is done as one depthwise convolution (``groups=C``) over the whole batch instead of the
upstream "reference" form that reshapes (N, C, H, W) to (N*C, 1, H, W) single-channel images: it is
the faster of the two on CPU and batches better (docs/benchmarks.md, "The generator's forms").
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

# StyleGAN2's activation gain: keeps the activations' second moment ~1 after a leaky ReLU.
LRELU_GAIN = math.sqrt(2.0)
LRELU_SLOPE = 0.2

# Device types on which torch.autocast exists; elsewhere (e.g. "meta") there is nothing to switch off.
_AUTOCAST_DEVICES = ("cpu", "cuda", "xpu", "mps")


def make_fir_kernel(taps: Sequence[float]) -> Tensor:
    """Separable 2-D FIR kernel from 1-D taps, normalised to sum 1.  Returns (K, K) float32."""
    k = torch.tensor(taps, dtype=torch.float32)
    if k.ndim == 1:
        k = k[None, :] * k[:, None]
    return k / k.sum()


def fused_leaky_relu(
    x: Tensor, bias: Tensor, negative_slope: float = LRELU_SLOPE, gain: float = LRELU_GAIN
) -> Tensor:
    """leaky_relu(x + bias) * gain, with a per-channel bias on dim 1 (what ``fused_bias_act`` computes)."""
    # bias: (C,) -> broadcast over (N, C, ...) whatever the input's rank.
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return F.leaky_relu(x + bias.view(shape), negative_slope=negative_slope) * gain


def _depthwise(kernel: Tensor, channels: int, dtype: torch.dtype) -> Tensor:
    # (K, K) -> (C, 1, K, K): the same filter for every channel, one group each.
    return kernel.to(dtype).expand(channels, 1, *kernel.shape).contiguous()


def upfirdn2d(x: Tensor, kernel: Tensor, up: int = 1, down: int = 1, pad: tuple[int, int] = (0, 0)) -> Tensor:
    """Upsample by zero insertion, pad, FIR-filter (true convolution), downsample; same on both axes.

    Semantics match StyleGAN2's ``upfirdn2d(input, kernel, up, down, pad)``: ``pad=(p0, p1)`` pads
    (or crops, if negative) p0 before and p1 after, on the zero-inserted signal.
    x: (N, C, H, W) -> (N, C, (H*up + p0 + p1 - K) // down + 1, same for W).
    """
    channels = x.shape[1]
    kh, kw = kernel.shape
    if kh != kw:
        raise ValueError(f"upfirdn2d expects a square kernel, got {tuple(kernel.shape)}")
    p0, p1 = pad

    if up == 1:
        # conv2d is a cross-correlation; flip so the filter is applied as a convolution like upstream.
        weight = _depthwise(kernel.flip((0, 1)), channels, x.dtype)
        if p0 == p1 and p0 >= 0:
            # Every blur in GPEN pads symmetrically: let the conv pad instead of copying the input.
            return F.conv2d(x, weight, stride=down, padding=p0, groups=channels)
        x = F.pad(x, [p0, p1, p0, p1])  # negative entries crop
        return F.conv2d(x, weight, stride=down, groups=channels)

    # Zero insertion + FIR in one op: a stride-`up` transposed conv is exactly "insert up-1 zeros after
    # every sample, then convolve with the (unflipped) kernel".  Its full output starts K-1 samples
    # before the zero-inserted signal, so shift by K-1-p0 and pad/crop the end to the requested size.
    weight = _depthwise(kernel, channels, x.dtype)
    full = F.conv_transpose2d(x, weight, stride=up, groups=channels)
    start = kh - 1 - p0
    end = up + p1 - kh
    out = F.pad(full, [-start, end, -start, end])
    if down > 1:
        out = out[:, :, ::down, ::down]
    return out


def fp32_matmul(a: Tensor, b: Tensor) -> Tensor:
    """``a @ b`` in float32 even inside an autocast region, which would otherwise run it in fp16/bf16."""
    if a.device.type in _AUTOCAST_DEVICES:
        with torch.autocast(device_type=a.device.type, enabled=False):
            return a.float() @ b.float()
    return a.float() @ b.float()


def fp32_upfirdn2d(
    x: Tensor, kernel: Tensor, up: int = 1, down: int = 1, pad: tuple[int, int] = (0, 0)
) -> Tensor:
    """``upfirdn2d`` forced to float32; for the cheap 3-channel RGB skip path, so the image keeps full
    precision while it accumulates across resolutions under autocast."""
    if x.device.type in _AUTOCAST_DEVICES:
        with torch.autocast(device_type=x.device.type, enabled=False):
            return upfirdn2d(x.float(), kernel.float(), up=up, down=down, pad=pad)
    return upfirdn2d(x.float(), kernel.float(), up=up, down=down, pad=pad)
