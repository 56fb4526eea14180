"""ParseNet's upsampling blocks computed at their input's resolution (load-time graph work).

Every decoder block of ParseNet doubles the picture with a nearest-neighbour upsample,
then runs two 3x3 convolutions on the doubled picture (its main branch and its shortcut), each after
reflection padding: much of ParseNet's arithmetic (docs/benchmarks.md). Each output pixel of a 3x3
convolution over a nearest-upsampled picture sees only 2x2 distinct input pixels, so each of the
four output phases (even or odd row, even or odd column) is a 2x2 convolution over the input at its
own resolution, with taps that are sums of the 3x3 kernel's. Reflection padding of the doubled
picture is replicate padding of the input. So one 2x2 convolution over the replicate-padded input,
with both branches' four phases as its output channels, gives the same numbers up to float rounding
with 4/9 of the multiplications, and no doubled copy or padded copy is made of the input. The phases
are then interleaved into the doubled picture.

The interleaving is done one of two ways (``Interleave``): "writes" stores each phase through a
strided view of the output, the fastest in PyTorch eager; "reshape" stacks the phases and reorders
them with one transpose, for an ONNX export, where each strided write becomes a ScatterND that
ONNX Runtime's CPU provider runs four times slower than the whole network otherwise takes and
OpenVINO refuses on dynamic shapes (docs/benchmarks.md).

``polyphase_upsample_blocks`` swaps those blocks in place; the int8 path leaves them as they are
(torch.ao's FX tracing cannot follow the interleaving writes).
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from gpen_watch.restore.nets import convlayer
from gpen_watch.restore.nets.convlayer import replace_children
from gpen_watch.restore.nets.parsenet import ResidualBlock

# Which low-resolution input row (offset -1, 0 or +1 from the output pixel's own) each 3x3 tap
# row reads, for an even (phase 0) and an odd (phase 1) output row; the same holds for columns.
# Row r of the phase's 2x2 kernel is the sum of the 3x3 rows its matrix row selects.
_TAPS = (
    torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]]),  # phase 0 reads input rows -1 and 0
    torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]]),  # phase 1 reads input rows 0 and +1
)
_PHASES = ((0, 0), (0, 1), (1, 0), (1, 1))
Interleave = Literal["writes", "reshape"]


def phase_kernels(weight: torch.Tensor) -> torch.Tensor:
    """(4*C_out, C_in, 2, 2) from a (C_out, C_in, 3, 3) kernel: its four output phases over a
    nearest x2 upsample, in ``_PHASES`` order, summed in float64 so the taps round once."""
    w = weight.detach().double()
    return torch.cat(
        [torch.einsum("ik,ockl,jl->ocij", _TAPS[a].double(), w, _TAPS[b].double()) for a, b in _PHASES]
    ).to(weight.dtype)


class PolyphaseUpBlock(nn.Module):
    """ParseNet's ``ResidualBlock(scale="up")``, BatchNorm already folded: the upsampled main
    convolution (then its activation) and the upsampled shortcut as one 2x2 convolution at the
    input's resolution, then the block's second convolution as it was, plus the shortcut.

    Input (N, C_in, H, W) -> output (N, C_out, 2H, 2W), as the block it replaces.
    """

    def __init__(
        self,
        main: nn.Conv2d,
        activation: nn.Module,
        shortcut: nn.Conv2d,
        second: nn.Module,
        interleave: Interleave = "writes",
    ) -> None:
        super().__init__()
        self.out_channels = main.out_channels
        self.interleave = interleave
        weight = torch.cat([phase_kernels(main.weight), phase_kernels(shortcut.weight)])
        self.phases = nn.Conv2d(
            main.in_channels,
            8 * main.out_channels,
            2,
            bias=True,
            device=main.weight.device,
            dtype=main.weight.dtype,
        )
        assert self.phases.bias is not None
        with torch.no_grad():
            self.phases.weight.copy_(weight)
            self.phases.bias.copy_(torch.cat([_bias(main).repeat(4), _bias(shortcut).repeat(4)]))
        self.activation = activation
        self.second = second

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, _, h, w = x.shape
        c = self.out_channels
        # (N, 8*C_out, H+1, W+1): phase (a, b) of output pixel (2r+a, 2c+b) sits at (r+a, c+b).
        y = self.phases(F.pad(x, (1, 1, 1, 1), mode="replicate"))
        if self.interleave == "reshape":
            second: torch.Tensor = self.second(self.activation(_interleaved(y, 0, c, h, w)))
            return second + _interleaved(y, 4, c, h, w)
        res = _empty_like_layout(x, (n, c, 2 * h, 2 * w), y.dtype)
        for k, (a, b) in enumerate(_PHASES):
            res[:, :, a::2, b::2] = y[:, k * c : (k + 1) * c, a : a + h, b : b + w]
        out: torch.Tensor = self.second(self.activation(res))
        for k, (a, b) in enumerate(_PHASES):
            out[:, :, a::2, b::2] += y[:, (4 + k) * c : (5 + k) * c, a : a + h, b : b + w]
        return out


def _interleaved(y: torch.Tensor, first: int, c: int, h: int, w: int) -> torch.Tensor:
    """Phases ``first``..``first + 3`` of ``y`` (each C channels) as one (N, C, 2H, 2W) picture."""
    parts = [
        y[:, (first + k) * c : (first + k + 1) * c, a : a + h, b : b + w] for k, (a, b) in enumerate(_PHASES)
    ]
    n = y.shape[0]
    # (N, C, row phase, column phase, H, W) -> (N, C, H, row phase, W, column phase).
    stacked = torch.stack(parts, 2).reshape(n, c, 2, 2, h, w)
    return stacked.permute(0, 1, 4, 2, 5, 3).reshape(n, c, 2 * h, 2 * w)


def _empty_like_layout(x: torch.Tensor, shape: tuple[int, int, int, int], dtype: torch.dtype) -> torch.Tensor:
    """An empty tensor of ``shape`` in ``x``'s memory layout (channels_last when ``x`` is)."""
    fmt = (
        torch.channels_last if x.is_contiguous(memory_format=torch.channels_last) else torch.contiguous_format
    )
    return torch.empty(shape, dtype=dtype, device=x.device, memory_format=fmt)


def _bias(conv: nn.Conv2d) -> torch.Tensor:
    if conv.bias is None:
        return torch.zeros(conv.out_channels, dtype=conv.weight.dtype, device=conv.weight.device)
    return conv.bias.detach()


def polyphase_upsample_blocks(model: nn.Module, interleave: Interleave = "writes") -> int:
    """Replace each of ParseNet's upsampling ``ResidualBlock``s in ``model`` (after
    ``fold.fold_batchnorm``) with a ``PolyphaseUpBlock`` interleaving its phases as ``interleave``
    says, in place. Returns how many were replaced; a block that is not exactly that shape is left
    alone."""
    return replace_children(model, lambda block: _as_polyphase(block, interleave))


def _as_polyphase(block: nn.Module, interleave: Interleave) -> PolyphaseUpBlock | None:
    if not isinstance(block, ResidualBlock):
        return None
    main, shortcut, second = block.conv1, block.shortcut_func, block.conv2
    main_conv, shortcut_conv = _stride_one(main, "up"), _stride_one(shortcut, "up")
    if main_conv is None or shortcut_conv is None or _stride_one(second, "same") is None:
        return None
    act = convlayer.activation(main)
    if act is None or not isinstance(convlayer.activation(shortcut), nn.Identity):
        return None
    return PolyphaseUpBlock(main_conv, act, shortcut_conv, second, interleave)


def _stride_one(layer: object, want: convlayer.Scale) -> nn.Conv2d | None:
    """The stride-1 convolution of a ``ConvLayer`` whose scale step is ``want``."""
    conv = convlayer.padded_conv(layer)
    if conv is None or conv.stride != (1, 1) or convlayer.scale(layer) != want:
        return None
    return conv
