"""Load-time graph work on the inference networks: BatchNorm folded into the convolution before it,
no-op copies dropped.

In eval mode a BatchNorm after a convolution is a per-channel scale and shift, which the
convolution's weights and bias can absorb: the network then computes the same function with one
pass less over every activation. Only places where the forward pass is known to feed the
convolution's output straight into the BatchNorm are folded: consecutive children of a
``nn.Sequential`` (and torchvision's ``IntermediateLayerGetter``, which runs its children in order),
the ``convN``/``bnN`` pairs of torchvision's ResNet blocks, and facexlib's ``ConvLayer``
(ParseNet), whose forward is conv -> norm -> activation.
"""

from __future__ import annotations

import itertools

import torch
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

from gpen_watch.restore.reflect_conv import reflect_pad_convs
from gpen_watch.restore.upconv import polyphase_upsample_blocks

# torchvision's ResNet, its BasicBlock and Bottleneck: forward applies bnN right after convN.
_PAIRS = (("conv1", "bn1"), ("conv2", "bn2"), ("conv3", "bn3"))
_IN_ORDER = ("Sequential", "IntermediateLayerGetter")


def fold_batchnorm(model: nn.Module) -> int:
    """Fold every eval-mode BatchNorm2d that directly follows a Conv2d into it, in place.

    The model must be in eval mode (running statistics are what gets folded). Returns the number
    of BatchNorms folded.
    """
    if model.training:
        raise ValueError("fold_batchnorm needs a model in eval mode")
    folded = 0
    for module in list(model.modules()):
        kind = type(module).__name__
        if kind in _IN_ORDER:
            names = list(module._modules)
            for first, second in itertools.pairwise(names):
                if _fold(module, first, module, second):
                    folded += 1
        elif kind in ("BasicBlock", "Bottleneck", "ResNet"):
            folded += sum(_fold(module, c, module, b) for c, b in _PAIRS)
        elif kind == "ConvLayer" and getattr(module, "norm_type", None) == "bn":
            norm = getattr(module, "norm", None)
            if norm is not None and _fold(module, "conv2d", norm, "norm"):
                folded += 1
    return folded


def _fold(conv_owner: nn.Module, conv_name: str, bn_owner: nn.Module, bn_name: str) -> bool:
    conv = conv_owner._modules.get(conv_name)
    bn = bn_owner._modules.get(bn_name)
    if not (type(conv) is nn.Conv2d and type(bn) is nn.BatchNorm2d):
        return False
    if bn.running_mean is None or bn.running_var is None or conv.out_channels != bn.num_features:
        return False
    conv_owner._modules[conv_name] = fuse_conv_bn_eval(conv, bn)
    bn_owner._modules[bn_name] = nn.Identity()
    return True


def drop_copy_ops(model: nn.Module) -> int:
    """Replace facexlib's "none" norm and activation layers (``x * 1.0``, a full copy of the
    activation each) with identities, in place; returns how many were replaced.

    In ParseNet these copies are 40 multiplications a pass, about an eighth of its CPU time
    (docs/benchmarks.md, "Load-time graph work"). The values are unchanged: multiplying by 1.0 is
    exact.
    """
    dropped = 0
    for module in model.modules():
        kind = type(module).__name__
        if kind == "NormLayer" and getattr(module, "norm_type", None) == "none":
            module.norm = nn.Identity()
            dropped += 1
        elif kind == "ReluLayer" and not isinstance(getattr(module, "func", None), nn.Module):
            # Every real activation there is a module; the "none" one is the x * 1.0 function.
            module.func = nn.Identity()
            dropped += 1
    return dropped


class _NoImage(nn.Module):
    """Stands in for ParseNet's image head: a (N, 0, H, W) view, no arithmetic."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, :0]


def drop_image_head(model: nn.Module) -> bool:
    """Skip ParseNet's second output, in place: besides the 19-class map it computes a restored
    picture (a 3x3 convolution over the decoder's full-size output) that the
    engine never reads; it then returns an empty (N, 0, H, W) tensor there. False when ``model``
    has no such head."""
    if not isinstance(getattr(model, "out_img_conv", None), nn.Module):
        return False
    model.out_img_conv = _NoImage()
    return True


def prepare_conv_net(model: nn.Module, device: torch.device, rewrite: bool = True) -> nn.Module:
    """ParseNet made ready for inference: on ``device``, eval mode, BatchNorm folded, no-op copies
    dropped, weights in channels_last, and with ``rewrite`` its upsampling blocks computed at
    their input's resolution (``upconv``) and, on a CPU, its convolutions without the padded
    copy (``reflect_conv``): the same function with less arithmetic and fewer passes.

    channels_last on a CPU too: ParseNet's convolutions then run in oneDNN's native layout without
    a reorder of every activation around each one (docs/benchmarks.md, "Load-time graph work").
    Inputs should be made channels_last with ``as_channels_last``. The detector has its own
    ``prepare_detector``. ``rewrite`` is off for the int8 path, whose FX tracing
    cannot follow the rewritten blocks' writes into slices.
    """
    model = model.to(device).eval()
    fold_batchnorm(model)
    drop_copy_ops(model)
    if rewrite:
        polyphase_upsample_blocks(model)
        if device.type == "cpu":
            # On a GPU the copy is cheap and the ring's four extra launches a layer are not.
            reflect_pad_convs(model)
    return model.to(memory_format=torch.channels_last)


def prepare_detector(model: nn.Module, device: torch.device) -> nn.Module:
    """RetinaFace made ready for inference: on ``device``, eval mode, BatchNorm folded, weights in
    channels_last, which the engine's input already is (it is a permuted view of the uint8 photo).
    Only both together measured faster (docs/benchmarks.md, "Load-time graph work")."""
    model = model.to(device).eval()
    fold_batchnorm(model)
    return model.to(memory_format=torch.channels_last)


def as_channels_last(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous(memory_format=torch.channels_last)
