"""ParseNet's ``ConvLayer`` taken apart for the load-time rewrites (``upconv``, ``reflect_conv``),
and the in-place swap of the modules they replace.

A layer qualifies by what it holds, not by its class alone: a 3x3 convolution without padding of
its own after a reflection padding of 1, and no BatchNorm left (``fold`` folds them first).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from torch import nn

from gpen_watch.restore.nets.parsenet import ConvLayer

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
    """The convolution of a ``ConvLayer`` that is 3x3 (stride any), reflection-padded by 1 and has
    no norm left; None for anything else."""
    if not isinstance(layer, ConvLayer) or not isinstance(layer.norm, nn.Identity):
        return None
    conv, pad = layer.conv2d, layer.reflection_pad
    if not (type(conv) is nn.Conv2d and isinstance(pad, nn.ReflectionPad2d)):
        return None
    if conv.kernel_size != (3, 3) or conv.padding != (0, 0) or conv.dilation != (1, 1) or conv.groups != 1:
        return None
    return conv if tuple(pad.padding) == (1, 1, 1, 1) else None


def activation(layer: object) -> nn.Module | None:
    """A ``ConvLayer``'s activation (``nn.Identity`` where it has none); None for anything else."""
    return layer.relu if isinstance(layer, ConvLayer) else None


def scale(layer: object) -> Scale | None:
    """Whether a ``ConvLayer`` upsamples its input ("up") or not ("same"; a stride-2 layer is
    "same" here, its stride is on its convolution); None for anything else."""
    if not isinstance(layer, ConvLayer):
        return None
    return "up" if layer.upsample else "same"
