"""CodeFormer (Zhou et al., NeurIPS 2022) in plain PyTorch: a face restored by looking its 16x16
grid of features up in a learned codebook, with a fidelity weight w that blends the degraded
face's own features back in.

A face goes through it in four steps, each a method below:

1. ``encode``: the VQGAN encoder (``vqgan``) turns the 512 px face into a 16x16 grid of 256-d
   features, keeping its features at 32, 64, 128 and 256 px for step 4.
2. ``predict_codes``: a 9-layer transformer over the 256 grid positions predicts, for each, which
   of the 1024 code vectors it is (logits; the code is their argmax).
3. The codes are looked up, and their features take the encoder's per-channel mean and spread
   (adaptive instance normalisation, as the released inference runs: adain=True).
4. ``decode``: the VQGAN generator makes the face from them; after its blocks at 32, 64, 128 and
   256 px a controllable feature transform adds w * (feature * scale + shift), scale and shift
   computed from the encoder's feature of that size and the generator's own. w = 0 gives the
   codebook's face alone (the most restored), w = 1 the most faithful to the input.

Module and parameter names mirror upstream's ``CodeFormer`` (sczhou/CodeFormer) so the released
``params_ema`` state dict loads strictly; the code is an independent implementation. w is an
input, one value per face: a (N,) tensor, so a batch may mix faces restored at different weights,
and an export keeps it as an input.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gpen_watch.restore.nets.vqgan import BlockStack, Codebook, ResBlock, encoder_blocks, generator_blocks

# The released network's fixed shape (upstream's VQAutoEncoder(512, 64, [1, 2, 2, 4, 4, 8], "nearest",
# 2, [16], 1024) under CodeFormer(dim_embd=512, n_head=8, n_layers=9, connect_list=[32 .. 256])).
_NF = 64
_CH_MULT = (1, 2, 2, 4, 4, 8)
_RES_BLOCKS = 2
_ATTN_AT = (16,)
_EMB_DIM = 256
# Encoder block after which each fused feature is taken, and generator block after which it is fused.
_ENCODER_TAP = {512: 2, 256: 5, 128: 8, 64: 11, 32: 14, 16: 18}
_GENERATOR_TAP = {16: 6, 32: 9, 64: 12, 128: 15, 256: 18, 512: 21}
ADAIN_EPS = 1e-5
# What upstream's inference script uses when no weight is given (--fidelity_weight).
DEFAULT_FIDELITY = 0.5


@dataclass(frozen=True)
class CodeFormerConfig:
    """The released CodeFormer; only what a checkpoint's shapes show varies."""

    size: int = 512
    dim_embd: int = 512
    n_head: int = 8
    n_layers: int = 9
    codebook_size: int = 1024
    connect: tuple[int, ...] = (32, 64, 128, 256)

    @property
    def grid(self) -> int:
        """The side of the code grid (16 at 512 px)."""
        return int(self.size // 2 ** (len(_CH_MULT) - 1))


class SelfAttention(nn.Module):
    """Multi-head self-attention with one packed q/k/v projection (``in_proj_weight``, as
    ``nn.MultiheadAttention`` stores it). Inputs are sequence-first, (L, N, E)."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * dim, dim))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * dim))
        self.out_proj = nn.Linear(dim, dim)
        nn.init.xavier_uniform_(self.in_proj_weight)

    def forward(self, query_key: Tensor, value: Tensor) -> Tensor:
        length, n, dim = value.shape
        wq, wk, wv = self.in_proj_weight.chunk(3)
        bq, bk, bv = self.in_proj_bias.chunk(3)
        head_dim = dim // self.heads

        def split(t: Tensor) -> Tensor:  # (L, N, E) -> (N, heads, L, head_dim)
            return (
                t.reshape(length, n * self.heads, head_dim).transpose(0, 1).reshape(n, self.heads, length, -1)
            )

        q = split(F.linear(query_key, wq, bq)) * head_dim**-0.5
        k = split(F.linear(query_key, wk, bk))
        v = split(F.linear(value, wv, bv))
        attn = torch.softmax(q @ k.transpose(-2, -1), dim=-1)  # (N, heads, L, L)
        out = (attn @ v).reshape(n * self.heads, length, head_dim).transpose(0, 1).reshape(length, n, dim)
        projected: Tensor = self.out_proj(out)
        return projected


class TransformerLayer(nn.Module):
    """Pre-norm transformer layer: self-attention whose queries and keys carry the position
    embedding, then a GELU MLP; each added to its input."""

    def __init__(self, dim: int, heads: int, dim_mlp: int) -> None:
        super().__init__()
        self.self_attn = SelfAttention(dim, heads)
        self.linear1 = nn.Linear(dim, dim_mlp)
        self.linear2 = nn.Linear(dim_mlp, dim)
        self.norm1 = nn.LayerNorm(dim)
        self.norm2 = nn.LayerNorm(dim)

    def forward(self, x: Tensor, pos: Tensor) -> Tensor:
        t = self.norm1(x)
        x = x + self.self_attn(t + pos, t)
        mlp: Tensor = self.linear2(F.gelu(self.linear1(self.norm2(x))))
        return x + mlp


def _conv_pair(ch: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(ch, ch, 3, padding=1), nn.LeakyReLU(0.2, inplace=True), nn.Conv2d(ch, ch, 3, padding=1)
    )


class FuseBlock(nn.Module):
    """Controllable feature transform: the encoder's and generator's features of one size give a
    per-pixel scale and shift; the generator's feature gets w times the transform added."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.encode_enc = ResBlock(2 * channels, channels)
        self.scale = _conv_pair(channels)
        self.shift = _conv_pair(channels)

    def forward(self, enc: Tensor, dec: Tensor, w: Tensor) -> Tensor:
        # w: (N,) -> one weight per face. w = 0 adds exactly zero (the reference skips the block).
        feat = self.encode_enc(torch.cat((enc, dec), dim=1))
        residual: Tensor = dec * self.scale(feat) + self.shift(feat)
        return dec + w.to(dec.dtype).view(-1, 1, 1, 1) * residual


def adaptive_instance_norm(content: Tensor, style: Tensor) -> Tensor:
    """``content`` given ``style``'s per-channel mean and standard deviation (unbiased variance
    plus ``ADAIN_EPS``, as the reference computes them)."""

    def mean_std(t: Tensor) -> tuple[Tensor, Tensor]:
        flat = t.flatten(2)
        return flat.mean(2)[:, :, None, None], (flat.var(2) + ADAIN_EPS).sqrt()[:, :, None, None]

    c_mean, c_std = mean_std(content)
    s_mean, s_std = mean_std(style)
    return (content - c_mean) / c_std * s_std + s_mean


class CodeFormer(nn.Module):
    """Face in [-1, 1] and a fidelity weight per face in [0, 1] -> restored face, (N, 3, 512, 512)."""

    def __init__(self, cfg: CodeFormerConfig | None = None) -> None:
        super().__init__()
        cfg = cfg or CodeFormerConfig()
        self.config = cfg
        self.encoder = BlockStack(encoder_blocks(cfg.size, _NF, _CH_MULT, _RES_BLOCKS, _ATTN_AT, _EMB_DIM))
        self.quantize = Codebook(cfg.codebook_size, _EMB_DIM)
        self.generator = BlockStack(
            generator_blocks(cfg.size, _NF, _CH_MULT, _RES_BLOCKS, _ATTN_AT, _EMB_DIM)
        )
        self.position_emb = nn.Parameter(torch.zeros(cfg.grid * cfg.grid, cfg.dim_embd))
        self.feat_emb = nn.Linear(_EMB_DIM, cfg.dim_embd)
        self.ft_layers = nn.Sequential(
            *(TransformerLayer(cfg.dim_embd, cfg.n_head, 2 * cfg.dim_embd) for _ in range(cfg.n_layers))
        )
        self.idx_pred_layer = nn.Sequential(
            nn.LayerNorm(cfg.dim_embd), nn.Linear(cfg.dim_embd, cfg.codebook_size, bias=False)
        )
        # Channels of the generator's feature at each fused size.
        widths = {16: 512, 32: 256, 64: 256, 128: 128, 256: 128, 512: 64}
        self.fuse_convs_dict = nn.ModuleDict({str(s): FuseBlock(widths[s]) for s in cfg.connect})

    def encode(self, x: Tensor) -> tuple[Tensor, dict[int, Tensor]]:
        """(N, 3, 512, 512) -> the (N, 256, 16, 16) features and the encoder's features to fuse, by side."""
        taps = {_ENCODER_TAP[s]: s for s in self.config.connect}
        kept: dict[int, Tensor] = {}
        for i, block in enumerate(self.encoder.blocks):
            x = block(x)
            if i in taps:
                kept[taps[i]] = x
        return x, kept

    def predict_codes(self, lq_feat: Tensor) -> Tensor:
        """(N, 256, 16, 16) features -> (N, 256, codebook_size) logits, positions row by row."""
        n = lq_feat.shape[0]
        pos = self.position_emb.unsqueeze(1).expand(-1, n, -1)  # (L, N, E)
        x = self.feat_emb(lq_feat.flatten(2).permute(2, 0, 1))  # (L, N, E)
        for layer in self.ft_layers:
            x = layer(x, pos)
        logits: Tensor = self.idx_pred_layer(x)
        return logits.permute(1, 0, 2)

    def decode(self, codes: Tensor, lq_feat: Tensor, kept: dict[int, Tensor], fidelity: Tensor) -> Tensor:
        """(N, 256) codes -> (N, 3, 512, 512), fused with ``kept`` at weight ``fidelity`` (N,)."""
        x = adaptive_instance_norm(self.quantize.lookup(codes, self.config.grid), lq_feat)
        taps = {_GENERATOR_TAP[s]: s for s in self.config.connect}
        for i, block in enumerate(self.generator.blocks):
            x = block(x)
            if i in taps:
                x = self.fuse_convs_dict[str(taps[i])](kept[taps[i]], x, fidelity)
        return x

    def forward(self, x: Tensor, fidelity: Tensor | None = None) -> Tensor:
        size = self.config.size
        if x.shape[-2:] != (size, size):
            raise ValueError(f"CodeFormer expects {size}px faces, got {tuple(x.shape)}")
        if fidelity is None:
            fidelity = x.new_full((x.shape[0],), DEFAULT_FIDELITY)
        lq_feat, kept = self.encode(x)
        codes = self.predict_codes(lq_feat).argmax(dim=2)
        return self.decode(codes, lq_feat, kept, fidelity)


def build_codeformer(cfg: CodeFormerConfig | None = None) -> CodeFormer:
    """A CodeFormer with random weights (use ``torch.device("meta")`` as a context to build it for free)."""
    return CodeFormer(cfg)


def codeformer_state_dict_shapes(cfg: CodeFormerConfig | None = None) -> dict[str, tuple[int, ...]]:
    with torch.device("meta"):
        model = build_codeformer(cfg)
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}
