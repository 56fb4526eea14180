"""3x3 convolutions with reflection padding, without the padded copy (load-time graph work).

ParseNet's ``ConvLayer`` pads its input by reflection into a new tensor before every convolution: in
ParseNet that is a full copy of each activation, a measurable share of its CPU time
(docs/benchmarks.md). Only the outermost ring of output pixels reads the padding. So the convolution
runs with the library's own zero padding (no copy), and then that ring is computed again from thin
reflection-padded strips of the input, and written over. The numbers are the same up to float
rounding. Small activations keep the plain path: there the strips' extra calls cost more than the
copy they save.

The convolution and its activation run as one oneDNN call where torch has it (``fused_conv``).

``reflect_pad_convs`` swaps the layers in place; the int8 path leaves them as they are (torch.ao's
FX tracing cannot follow the ring's writes).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from gpen_watch.restore.nets import convlayer
from gpen_watch.restore.nets.convlayer import replace_children
from gpen_watch.restore.nets.fused_conv import PointwiseAttr, conv_then, fused_conv_works, pointwise_attr

# Below this many pixels an activation's padded copy is cheaper than four strip convolutions.
_MIN_PIXELS = 96 * 96


class RingFixedConv(nn.Module):
    """ParseNet's ``ConvLayer`` (3x3, reflection padding 1, stride 1 or 2, no norm left, an
    optional activation) computed with zero padding and its border ring redone.

    Input (N, C_in, H, W) -> (N, C_out, H', W'), as the layer it replaces.
    """

    def __init__(self, conv: nn.Conv2d, activation: nn.Module, fused: PointwiseAttr | None = None) -> None:
        super().__init__()
        self.conv = conv
        self.activation = activation
        self.stride = int(conv.stride[0])
        # The fused op's name for the activation, when the convolution and it run as one call.
        self.fused_attr = fused

    @property
    def fused(self) -> bool:
        return self.fused_attr is not None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, w = int(x.shape[-2]), int(x.shape[-1])
        weight, bias, s = self.conv.weight, self.conv.bias, self.stride
        if h * w < _MIN_PIXELS or h < 3 or w < 3:
            plain: torch.Tensor = self.activation(
                F.conv2d(F.pad(x, (1, 1, 1, 1), mode="reflect"), weight, bias, s)
            )
            return plain
        out = conv_then(x, self.conv, s, self.fused_attr, self.activation)
        out_h, out_w = int(out.shape[-2]), int(out.shape[-1])
        act = self.activation
        # The first output row and column always read the padding; the last ones do when the
        # stride lands on it (always at stride 1, for an odd side at stride 2).
        out[:, :, :1, :] = act(
            F.conv2d(F.pad(x[:, :, :2], (1, 1, 1, 0), mode="reflect"), weight, bias, (1, s))
        )
        if (out_h - 1) * s == h - 1:
            out[:, :, -1:, :] = act(
                F.conv2d(F.pad(x[:, :, -2:], (1, 1, 0, 1), mode="reflect"), weight, bias, (1, s))
            )
        out[:, :, :, :1] = act(
            F.conv2d(F.pad(x[:, :, :, :2], (1, 0, 1, 1), mode="reflect"), weight, bias, (s, 1))
        )
        if (out_w - 1) * s == w - 1:
            out[:, :, :, -1:] = act(
                F.conv2d(F.pad(x[:, :, :, -2:], (0, 1, 1, 1), mode="reflect"), weight, bias, (s, 1))
            )
        return out


def reflect_pad_convs(model: nn.Module) -> int:
    """Replace each of ParseNet's plain (not upsampling) ``ConvLayer``s in ``model`` (after
    ``fold.fold_batchnorm``) with a ``RingFixedConv``, in place.
    Returns how many were replaced; a layer that is not exactly that shape is left alone."""
    fused = fused_conv_works()
    return replace_children(model, lambda layer: _as_ring_fixed(layer, fused))


def _as_ring_fixed(layer: nn.Module, fused: bool) -> RingFixedConv | None:
    conv, act = convlayer.padded_conv(layer), convlayer.activation(layer)
    # The upsampling layers are ``upconv``'s business.
    if conv is None or act is None or conv.stride not in ((1, 1), (2, 2)) or convlayer.scale(layer) != "same":
        return None
    return RingFixedConv(conv, act, pointwise_attr(act) if fused else None)
