"""The VQGAN autoencoder CodeFormer is built on (Esser et al., 2021, in the form of CodeFormer's
release): a convolutional encoder from a 512 px face to a 16x16 grid of 256-d features, a learned
codebook of 1024 such features, and a generator back to 512 px.

Its layers, in the order of the checkpoints' ``encoder.blocks.N`` and ``generator.blocks.N``
lists: residual blocks of GroupNorm(32), swish and 3x3 convs; single-head self-attention over the
16x16 grid; strided-conv downsampling padded on the right and bottom; nearest-neighbour
upsampling followed by a conv. ``codeformer_model`` adds the transformer and the fusion.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

GROUPS = 32
NORM_EPS = 1e-6


def group_norm(channels: int) -> nn.GroupNorm:
    return nn.GroupNorm(GROUPS, channels, eps=NORM_EPS)


class ResBlock(nn.Module):
    """norm, swish, conv, norm, swish, conv, plus the input (through a 1x1 conv when the width
    changes)."""

    def __init__(self, in_ch: int, out_ch: int) -> None:
        super().__init__()
        self.norm1 = group_norm(in_ch)
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, padding=1)
        self.norm2 = group_norm(out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, padding=1)
        self.conv_out = nn.Conv2d(in_ch, out_ch, 1) if in_ch != out_ch else None

    def forward(self, x: Tensor) -> Tensor:
        h: Tensor = self.conv1(F.silu(self.norm1(x)))
        h = self.conv2(F.silu(self.norm2(h)))
        skip: Tensor = x if self.conv_out is None else self.conv_out(x)
        return h + skip


class AttnBlock(nn.Module):
    """One-head self-attention over all positions of a feature map, 1x1 convs for q, k, v and the
    output, added to the input."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.norm = group_norm(channels)
        self.q = nn.Conv2d(channels, channels, 1)
        self.k = nn.Conv2d(channels, channels, 1)
        self.v = nn.Conv2d(channels, channels, 1)
        self.proj_out = nn.Conv2d(channels, channels, 1)

    def forward(self, x: Tensor) -> Tensor:
        n, c, h, w = x.shape
        t = self.norm(x)
        q = self.q(t).flatten(2).transpose(1, 2)  # (N, HW, C)
        k = self.k(t).flatten(2)  # (N, C, HW)
        v = self.v(t).flatten(2)  # (N, C, HW)
        attn = torch.softmax(torch.bmm(q, k) * c**-0.5, dim=2)  # (N, HW query, HW key)
        out = torch.bmm(v, attn.transpose(1, 2)).view(n, c, h, w)
        projected: Tensor = self.proj_out(out)
        return x + projected


class Downsample(nn.Module):
    """Halves the side: a stride-2 3x3 conv over the map padded by one on the right and bottom."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, stride=2)

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = self.conv(F.pad(x, (0, 1, 0, 1)))
        return out


class Upsample(nn.Module):
    """Doubles the side: nearest-neighbour, then a 3x3 conv."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest"))
        return out


def encoder_blocks(
    size: int, nf: int, ch_mult: Sequence[int], res_blocks: int, attn_at: Sequence[int], emb_dim: int
) -> nn.ModuleList:
    """conv in; per resolution ``res_blocks`` residual blocks (each followed by attention at the
    sides in ``attn_at``) and a downsampling but the last; residual, attention, residual; norm;
    conv to ``emb_dim``."""
    blocks: list[nn.Module] = [nn.Conv2d(3, nf, 3, padding=1)]
    in_ch, res = nf, size
    for level, mult in enumerate(ch_mult):
        for _ in range(res_blocks):
            blocks.append(ResBlock(in_ch, nf * mult))
            in_ch = nf * mult
            if res in attn_at:
                blocks.append(AttnBlock(in_ch))
        if level != len(ch_mult) - 1:
            blocks.append(Downsample(in_ch))
            res //= 2
    blocks += [ResBlock(in_ch, in_ch), AttnBlock(in_ch), ResBlock(in_ch, in_ch)]
    blocks += [group_norm(in_ch), nn.Conv2d(in_ch, emb_dim, 3, padding=1)]
    return nn.ModuleList(blocks)


def generator_blocks(
    size: int, nf: int, ch_mult: Sequence[int], res_blocks: int, attn_at: Sequence[int], emb_dim: int
) -> nn.ModuleList:
    """The encoder's mirror: conv in; residual, attention, residual; per resolution from the
    smallest ``res_blocks`` residual blocks (attention after each at ``attn_at``) and an
    upsampling but the last; norm; conv to RGB."""
    in_ch = nf * ch_mult[-1]
    res = size // 2 ** (len(ch_mult) - 1)
    blocks: list[nn.Module] = [nn.Conv2d(emb_dim, in_ch, 3, padding=1)]
    blocks += [ResBlock(in_ch, in_ch), AttnBlock(in_ch), ResBlock(in_ch, in_ch)]
    for level in reversed(range(len(ch_mult))):
        for _ in range(res_blocks):
            blocks.append(ResBlock(in_ch, nf * ch_mult[level]))
            in_ch = nf * ch_mult[level]
            if res in attn_at:
                blocks.append(AttnBlock(in_ch))
        if level != 0:
            blocks.append(Upsample(in_ch))
            res *= 2
    blocks += [group_norm(in_ch), nn.Conv2d(in_ch, 3, 3, padding=1)]
    return nn.ModuleList(blocks)


class BlockStack(nn.Module):
    """A list of blocks run in turn (``blocks``, as the checkpoints name them)."""

    def __init__(self, blocks: nn.ModuleList) -> None:
        super().__init__()
        self.blocks = blocks


class Codebook(nn.Module):
    """The learned code vectors (``quantize.embedding.weight``, codebook_size x emb_dim)."""

    def __init__(self, codebook_size: int, emb_dim: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(codebook_size, emb_dim)

    def lookup(self, codes: Tensor, side: int) -> Tensor:
        """(N, side*side) code indices, row by row -> (N, emb_dim, side, side) features. Picking
        rows is exactly the reference's one-hot product: one term of 1.0 times the vector."""
        feat: Tensor = self.embedding(codes)  # (N, side*side, emb_dim)
        return feat.transpose(1, 2).reshape(codes.shape[0], -1, side, side)
