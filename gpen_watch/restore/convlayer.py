"""facexlib's ``ConvLayer`` recognised by its parts, for the load-time rewrites of ParseNet
(``upconv``, ``reflect_conv``), and the in-place swap of the modules they replace.

A layer is recognised by what it holds, not trusted by its class name alone: a 3x3 convolution
without padding of its own after a reflection padding of 1, no norm left (folded, or the "none"
one dropped), and a scale step that is checked by calling it, since facexlib's are lambdas.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import torch
from torch import nn

Scale = Literal["same", "up"]


def replace_children(model: nn.Module, make: Callable[[nn.Module], nn.Module | None]) -> int:
    """Swap, in place, every submodule of ``model`` for which ``make`` returns a module; returns
    how many were swapped."""
    replaced = 0
    for module in list(model.modules()):
        for name, child in list(module._modules.items()):
            new = make(child) if child is not None else None
            if new is not None:
                module._modules[name] = new
                replaced += 1
    return replaced


def padded_conv(layer: object) -> nn.Conv2d | None:
    """The convolution of a facexlib ``ConvLayer`` that is 3x3 (stride any), reflection-padded by
    1 and has no norm left; None for anything else."""
    if type(layer).__name__ != "ConvLayer" or not getattr(layer, "use_pad", False):
        return None
    conv, pad = getattr(layer, "conv2d", None), getattr(layer, "reflection_pad", None)
    if not (type(conv) is nn.Conv2d and isinstance(pad, nn.ReflectionPad2d)):
        return None
    if not isinstance(getattr(getattr(layer, "norm", None), "norm", None), nn.Identity):
        return None
    if conv.kernel_size != (3, 3) or conv.padding != (0, 0) or conv.dilation != (1, 1) or conv.groups != 1:
        return None
    return conv if tuple(pad.padding) == (1, 1, 1, 1) else None


def activation(layer: object) -> nn.Module | None:
    """A ``ConvLayer``'s activation module (``nn.Identity`` for "none" once ``fold.drop_copy_ops``
    ran); None when it is not a module."""
    func = getattr(getattr(layer, "relu", None), "func", None)
    return func if isinstance(func, nn.Module) else None


def scale(layer: object) -> Scale | None:
    """What a ``ConvLayer``'s scale step does, found by calling it on a probe: "same" (the
    identity), "up" (a nearest x2 upsample), or None (something else)."""
    func = getattr(layer, "scale_func", None)
    if not callable(func):
        return None
    probe = torch.arange(6.0).view(1, 1, 2, 3)
    with torch.no_grad():
        out = func(probe)
    if not isinstance(out, torch.Tensor):
        return None
    if torch.equal(out, probe):
        return "same"
    doubled = probe.repeat_interleave(2, dim=2).repeat_interleave(2, dim=3)
    if out.shape == doubled.shape and torch.equal(out, doubled):
        return "up"
    return None
