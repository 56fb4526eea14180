"""GFPGAN (Wang et al., CVPR 2021), the "clean" architecture of its v1.2-v1.4 releases, in plain
PyTorch.

A U-Net over the degraded face: its bottleneck becomes one latent per decoder layer, and each
resolution of its upward path gives a scale and a shift that modulate half the channels of the
StyleGAN2 decoder there (spatial feature transforms). The decoder is ``stylegan2_clean``.

Module and parameter names mirror upstream's ``GFPGANv1Clean`` so the released ``params_ema``
state dicts load strictly; the code is an independent implementation. The released networks are
built with sft_half=True, different_w=True and input_is_latent=True, which this module fixes;
the U-Net's own RGB heads (``toRGB``, used in training only) are kept for the checkpoint's keys
and never run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gpen_watch.restore.nets.stylegan2_clean import LRELU_SLOPE, SFTDecoder, decoder_channels


@dataclass(frozen=True)
class GFPGANConfig:
    """Constructor arguments of an upstream ``GFPGANv1Clean`` that vary between builds; the
    released v1.3 and v1.4 networks are ``GFPGANConfig()``."""

    size: int = 512
    style_dim: int = 512
    n_mlp: int = 8
    channel_multiplier: int = 2
    narrow: float = 1.0

    def __post_init__(self) -> None:
        if self.size not in (16, 32, 64, 128, 256, 512, 1024):
            raise ValueError(f"GFPGAN size must be a power of two in 16..1024, got {self.size}")
        if self.style_dim < 1 or self.n_mlp < 0 or self.channel_multiplier < 1 or self.narrow <= 0:
            raise ValueError(f"invalid GFPGAN config {self}")

    @property
    def log_size(self) -> int:
        return int(math.log2(self.size))


class ResBlock(nn.Module):
    """Conv, leaky ReLU, 2x bilinear resampling, conv, leaky ReLU; plus a resampled 1x1 skip."""

    def __init__(self, in_ch: int, out_ch: int, factor: float) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, in_ch, 3, padding=1)
        self.conv2 = nn.Conv2d(in_ch, out_ch, 3, padding=1)
        self.skip = nn.Conv2d(in_ch, out_ch, 1, bias=False)
        self.factor = factor

    def forward(self, x: Tensor) -> Tensor:
        out = F.leaky_relu(self.conv1(x), LRELU_SLOPE, inplace=True)
        out = F.leaky_relu(self.conv2(self._resample(out)), LRELU_SLOPE, inplace=True)
        skip: Tensor = self.skip(self._resample(x))
        return out + skip

    def _resample(self, x: Tensor) -> Tensor:
        return F.interpolate(x, scale_factor=self.factor, mode="bilinear", align_corners=False)


def _sft_branch(ch: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(ch, ch, 3, padding=1),
        nn.LeakyReLU(LRELU_SLOPE, inplace=True),
        nn.Conv2d(ch, ch, 3, padding=1),
    )


class GFPGAN(nn.Module):
    """Face in [-1, 1] -> restored face in about [-1, 1], (N, 3, S, S) both."""

    def __init__(self, cfg: GFPGANConfig) -> None:
        super().__init__()
        self.config = cfg
        # The U-Net runs at half the decoder's width.
        ch = decoder_channels(cfg.channel_multiplier, cfg.narrow * 0.5)
        levels = [2**i for i in range(3, cfg.log_size + 1)]  # 8 .. size
        self.conv_body_first = nn.Conv2d(3, ch[cfg.size], 1)
        self.conv_body_down = nn.ModuleList()
        in_ch = ch[cfg.size]
        for res in reversed(levels):  # size -> 4
            self.conv_body_down.append(ResBlock(in_ch, ch[res // 2], 0.5))
            in_ch = ch[res // 2]
        self.final_conv = nn.Conv2d(in_ch, ch[4], 3, padding=1)
        self.conv_body_up = nn.ModuleList()
        in_ch = ch[4]
        for res in levels:
            self.conv_body_up.append(ResBlock(in_ch, ch[res], 2.0))
            in_ch = ch[res]
        self.toRGB = nn.ModuleList(nn.Conv2d(ch[res], 3, 1) for res in levels)
        self.num_latent = 2 * cfg.log_size - 2
        self.final_linear = nn.Linear(ch[4] * 4 * 4, self.num_latent * cfg.style_dim)
        self.stylegan_decoder = SFTDecoder(
            cfg.size, cfg.style_dim, cfg.n_mlp, cfg.channel_multiplier, cfg.narrow
        )
        # sft_half: each transform covers half the decoder's channels, which is the U-Net's width.
        self.condition_scale = nn.ModuleList(_sft_branch(ch[res]) for res in levels)
        self.condition_shift = nn.ModuleList(_sft_branch(ch[res]) for res in levels)

    def forward(self, x: Tensor) -> Tensor:
        size = self.config.size
        if x.shape[-2:] != (size, size):
            raise ValueError(f"GFPGAN-{size} expects {size}px faces, got {tuple(x.shape)}")
        feat = F.leaky_relu(self.conv_body_first(x), LRELU_SLOPE)
        skips = []
        for down in self.conv_body_down:
            feat = down(feat)
            skips.append(feat)  # size/2, ..., 4
        feat = F.leaky_relu(self.final_conv(feat), LRELU_SLOPE, inplace=True)
        latents = self.final_linear(feat.flatten(1)).view(x.shape[0], self.num_latent, -1)
        conditions = []
        for up, scale, shift, skip in zip(
            self.conv_body_up, self.condition_scale, self.condition_shift, reversed(skips), strict=True
        ):
            feat = up(feat + skip)
            conditions.append((scale(feat), shift(feat)))
        image: Tensor = self.stylegan_decoder(latents, conditions)
        return image


def build_gfpgan(cfg: GFPGANConfig | None = None) -> GFPGAN:
    """A GFPGAN with random weights (use ``torch.device("meta")`` as a context to build it for free)."""
    return GFPGAN(cfg or GFPGANConfig())


def gfpgan_state_dict_shapes(cfg: GFPGANConfig) -> dict[str, tuple[int, ...]]:
    """Key -> shape of a GFPGAN state dict for ``cfg``, computed on the meta device (no memory)."""
    with torch.device("meta"):
        model = build_gfpgan(cfg)
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}
