"""Load-time graph work on the inference networks: BatchNorm folded into the convolution before it.

In eval mode a BatchNorm after a convolution is a per-channel scale and shift, which the
convolution's weights and bias can absorb: the network then computes the same function with one
pass less over every activation. Only places where the forward pass is known to feed the
convolution's output straight into the BatchNorm are folded: consecutive children of a
``nn.Sequential`` (every stage of RetinaFace), the ``convN``/``bnN`` pairs of the ResNet-50 stem and
bottlenecks, and ParseNet's ``ConvLayer``, whose forward is conv -> norm -> activation.
"""

from __future__ import annotations

import itertools

import torch
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

from gpen_watch.restore.nets.parsenet import BatchNormSlot, ConvLayer
from gpen_watch.restore.nets.reflect_conv import reflect_pad_convs
from gpen_watch.restore.nets.resnet import Bottleneck, ResNet50Body
from gpen_watch.restore.nets.retinaface import RetinaFace
from gpen_watch.restore.nets.upconv import polyphase_upsample_blocks

# The ResNet-50 stem and its bottlenecks: forward applies bnN right after convN.
_PAIRS = (("conv1", "bn1"), ("conv2", "bn2"), ("conv3", "bn3"))


def fold_batchnorm(model: nn.Module) -> int:
    """Fold every eval-mode BatchNorm2d that directly follows a Conv2d into it, in place.

    The model must be in eval mode (running statistics are what gets folded). Returns the number
    of BatchNorms folded.
    """
    if model.training:
        raise ValueError("fold_batchnorm needs a model in eval mode")
    folded = 0
    for module in list(model.modules()):
        if type(module) is nn.Sequential:
            names = list(module._modules)
            for first, second in itertools.pairwise(names):
                if _fold(module, first, module, second):
                    folded += 1
        elif isinstance(module, (Bottleneck, ResNet50Body)):
            folded += sum(_fold(module, c, module, b) for c, b in _PAIRS)
        elif (
            isinstance(module, ConvLayer)
            and isinstance(module.norm, BatchNormSlot)
            and _fold(module, "conv2d", module.norm, "norm")
        ):
            module.norm = nn.Identity()
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
    """ParseNet made ready for inference: on ``device``, eval mode, BatchNorm folded, weights in
    channels_last, and with ``rewrite`` its upsampling blocks computed at
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
    if rewrite:
        polyphase_upsample_blocks(model)
        if device.type == "cpu":
            # On a GPU the copy is cheap and the ring's four extra launches a layer are not.
            reflect_pad_convs(model)
    return model.to(memory_format=torch.channels_last)


def prepare_detector(model: RetinaFace, device: torch.device) -> RetinaFace:
    """RetinaFace made ready for inference: on ``device``, eval mode, BatchNorm folded, weights in
    channels_last, which the engine's input already is (it is a permuted view of the uint8 photo).
    Only both together measured faster (docs/benchmarks.md, "Load-time graph work")."""
    model = model.to(device).eval()
    fold_batchnorm(model)
    return model.to(memory_format=torch.channels_last)


def as_channels_last(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous(memory_format=torch.channels_last)
