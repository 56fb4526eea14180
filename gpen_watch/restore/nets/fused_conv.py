"""A convolution and its activation in one oneDNN call, where this torch has the op.

In eager PyTorch an activation after a convolution is a second pass over its output. oneDNN applies
an activation to each block of output while it is still in cache, and torch exposes that as
``torch.ops.mkldnn._convolution_pointwise`` (the op its inductor compiler emits for CPU). The op is
private, so it is used only after a check on a small input that it exists, runs and matches the
two-step result; otherwise the two steps run.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

# The op's names for the activations ParseNet has, with their scalars.
PointwiseAttr = tuple[str, list[float]]


def pointwise_attr(activation: nn.Module) -> PointwiseAttr | None:
    """The op's name and scalars for ``activation``; None for one it has no name for."""
    if isinstance(activation, nn.Identity):
        return ("none", [])
    if type(activation) is nn.LeakyReLU:
        return ("leaky_relu", [float(activation.negative_slope)])
    if type(activation) is nn.ReLU:
        return ("relu", [])
    return None


def _op() -> Any:
    mkldnn = getattr(torch.ops, "mkldnn", None)
    return getattr(mkldnn, "_convolution_pointwise", None) if mkldnn is not None else None


def fused_conv_works() -> bool:
    """Does this torch have the fused op, and does it give what conv2d then leaky ReLU give, on a
    channels_last fp32 CPU input with zero padding and stride 2?"""
    op = _op()
    if op is None or not torch.backends.mkldnn.is_available():  # type: ignore[no-untyped-call]
        return False
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1, 8, 9, 10, generator=gen).contiguous(memory_format=torch.channels_last)
    w = torch.randn(16, 8, 3, 3, generator=gen).contiguous(memory_format=torch.channels_last)
    b = torch.randn(16, generator=gen)
    try:
        with torch.no_grad():
            got = op(x, w, b, [1, 1], [2, 2], [1, 1], 1, "leaky_relu", [0.2], "")
            want = F.leaky_relu(F.conv2d(x, w, b, 2, 1), 0.2)
    except (RuntimeError, TypeError, NotImplementedError):
        return False
    return (
        isinstance(got, torch.Tensor)
        and got.shape == want.shape
        and bool(torch.allclose(got, want, atol=1e-4))
    )


def conv_then(
    x: torch.Tensor, conv: nn.Conv2d, stride: int, fused: PointwiseAttr | None, activation: nn.Module
) -> torch.Tensor:
    """``activation(conv2d(x))`` with zero padding 1 at ``stride``: one fused call when ``fused``
    names the activation for the op (the caller checked ``fused_conv_works``) and ``x`` is an fp32
    CPU tensor, else two steps."""
    if fused is not None and x.dtype == torch.float32 and x.device.type == "cpu":
        name, scalars = fused
        out: torch.Tensor = _op()(
            x, conv.weight, conv.bias, [1, 1], [stride, stride], [1, 1], 1, name, scalars, ""
        )
        return out
    two_step: torch.Tensor = activation(F.conv2d(x, conv.weight, conv.bias, stride, 1))
    return two_step
