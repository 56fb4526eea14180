"""The "clean" StyleGAN2 decoder GFPGAN restores through, with its spatial feature transforms.

StyleGAN2 once more, as GPEN's decoder (``gpen_blocks``) is, but another variant of it, and the
maths differs where it matters:

* its linear layers are plain ``nn.Linear`` and its modulated weights are stored already scaled
  by 1/sqrt(fan-in) (GPEN's equalised layers scale at run time);
* it resamples bilinearly (``F.interpolate``) where GPEN's convolutions blur with a FIR filter;
* its noise is *added* (one map per layer, times a learned strength) and its activation is a plain
  leaky ReLU after a sqrt(2) gain on the conv's output, where GPEN concatenates encoder features
  and folds the gain into the activation.

What is the same maths is shared: the style normalisation (``PixelNorm``), and the demodulation
factor and its bounded style (``gpen_blocks.demodulation``, ``gpen_blocks.bounded_style``).
Module names follow the released checkpoints' keys (``stylegan_decoder.style_convs.0.modulated_conv
.weight``); the noise maps are buffers in the state dict (``noises.noise0`` ...).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gpen_watch.restore.nets.gpen_blocks import PixelNorm, bounded_style, demodulation

LRELU_SLOPE = 0.2
# The gain StyleConv applies to the modulated conv's output before noise and bias.
CONV_GAIN = math.sqrt(2.0)


def decoder_channels(channel_multiplier: int, narrow: float) -> dict[int, int]:
    """Feature channels per resolution, truncated with int() as the released networks were built."""
    cm, nw = channel_multiplier, narrow
    return {
        4: int(512 * nw),
        8: int(512 * nw),
        16: int(512 * nw),
        32: int(512 * nw),
        64: int(256 * cm * nw),
        128: int(128 * cm * nw),
        256: int(64 * cm * nw),
        512: int(32 * cm * nw),
        1024: int(16 * cm * nw),
    }


def upsample2x(x: Tensor) -> Tensor:
    """2x bilinear upsampling, half-pixel centres: the clean decoder's only resampling."""
    return F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False)


class ModulatedConv(nn.Module):
    """Modulated convolution without equalised learning rate, optionally after a 2x bilinear
    upsampling. Computed as conv(x * s, W) * d (the "input scaling" form of ``gpen_blocks``):
    the same numbers as a per-sample weight, as one dense convolution for the whole batch."""

    def __init__(
        self, in_ch: int, out_ch: int, kernel_size: int, style_dim: int, demodulate: bool, upsample: bool
    ) -> None:
        super().__init__()
        self.in_ch, self.out_ch, self.kernel_size = in_ch, out_ch, kernel_size
        self.demodulate = demodulate
        self.upsample = upsample
        self.modulation = nn.Linear(style_dim, in_ch)
        # (1, Cout, Cin, k, k): the leading 1 is the checkpoint's layout.
        self.weight = nn.Parameter(torch.randn(1, out_ch, in_ch, kernel_size, kernel_size))

    def extra_repr(self) -> str:
        return (
            f"{self.in_ch}, {self.out_ch}, {self.kernel_size}, demodulate={self.demodulate}, "
            f"upsample={self.upsample}"
        )

    def forward_undemodulated(self, x: Tensor, w: Tensor) -> tuple[Tensor, Tensor | None]:
        """The conv output and the (N, Cout) demodulation factor still to be multiplied in (None
        without demodulation), so the caller can fold it into its own per-channel epilogue."""
        style = self.modulation(w)  # (N, Cin)
        weight = self.weight[0]  # (Cout, Cin, k, k)
        demod = None
        if self.demodulate:
            style = bounded_style(style)
            demod = demodulation(weight, style)
        # The style scales input channels and bilinear resampling is per channel: scaling first
        # touches a quarter of the values.
        x = x * style.to(x.dtype)[:, :, None, None]
        if self.upsample:
            x = upsample2x(x)
        return F.conv2d(x, weight.to(x.dtype), padding=self.kernel_size // 2), demod

    def forward(self, x: Tensor, w: Tensor) -> Tensor:
        out, demod = self.forward_undemodulated(x, w)
        if demod is not None:
            out = out * demod.to(out.dtype)[:, :, None, None]
        return out


class StyleConv(nn.Module):
    """Modulated conv, sqrt(2) gain, added noise map times ``weight``, ``bias``, leaky ReLU."""

    def __init__(self, in_ch: int, out_ch: int, style_dim: int, upsample: bool = False) -> None:
        super().__init__()
        self.modulated_conv = ModulatedConv(in_ch, out_ch, 3, style_dim, demodulate=True, upsample=upsample)
        self.weight = nn.Parameter(torch.zeros(1))  # the noise's strength
        self.bias = nn.Parameter(torch.zeros(1, out_ch, 1, 1))

    def forward(self, x: Tensor, w: Tensor, noise: Tensor) -> Tensor:
        # x: (N, Cin, H, W), noise: (1 or N, 1, H', W') -> (N, Cout, H', W')
        out, demod = self.modulated_conv.forward_undemodulated(x, w)
        assert demod is not None  # a StyleConv always demodulates
        # Demodulation and gain are one per-channel scale; noise and bias one added map.
        scale = (demod * CONV_GAIN).to(out.dtype)[:, :, None, None]
        shift = (self.weight * noise + self.bias).to(out.dtype)
        return F.leaky_relu(torch.addcmul(shift, out, scale), LRELU_SLOPE, inplace=True)


class ToRGB(nn.Module):
    """1x1 modulated conv (no demodulation) to RGB plus bias, added to the upsampled skip image."""

    def __init__(self, in_ch: int, style_dim: int, upsample: bool = True) -> None:
        super().__init__()
        self.upsample = upsample
        self.modulated_conv = ModulatedConv(in_ch, 3, 1, style_dim, demodulate=False, upsample=False)
        self.bias = nn.Parameter(torch.zeros(1, 3, 1, 1))

    def forward(self, x: Tensor, w: Tensor, skip: Tensor | None = None) -> Tensor:
        out: Tensor = self.modulated_conv(x, w) + self.bias
        if skip is not None:
            out = out + (upsample2x(skip) if self.upsample else skip)
        return out


class ConstantInput(nn.Module):
    def __init__(self, channels: int, size: int = 4) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(1, channels, size, size))

    def forward(self, batch: int) -> Tensor:
        return self.weight.expand(batch, -1, -1, -1)


class NoiseMaps(nn.Module):
    """The decoder's fixed noise, one (1, 1, r, r) buffer per styled conv, saved with the weights."""

    def __init__(self, resolutions: Sequence[int]) -> None:
        super().__init__()
        self.count = len(resolutions)
        for i, res in enumerate(resolutions):
            self.register_buffer(f"noise{i}", torch.randn(1, 1, res, res))

    def maps(self) -> list[Tensor]:
        return [getattr(self, f"noise{i}") for i in range(self.count)]


class SFTDecoder(nn.Module):
    """The clean StyleGAN2 generator with spatial feature transforms (upstream
    ``StyleGAN2GeneratorCSFT``), as GFPGAN runs it: one latent per layer given directly
    (input_is_latent), SFT on the second half of the channels after each resolution's first conv
    (sft_half), and the stored noise maps.

    ``style_mlp`` (the mapping network) is in the checkpoints but takes no part: GFPGAN's encoder
    gives the latents themselves."""

    def __init__(
        self,
        size: int,
        style_dim: int = 512,
        n_mlp: int = 8,
        channel_multiplier: int = 2,
        narrow: float = 1.0,
    ) -> None:
        super().__init__()
        ch = decoder_channels(channel_multiplier, narrow)
        log_size = int(math.log2(size))
        layers: list[nn.Module] = [PixelNorm()]
        for _ in range(n_mlp):
            layers += [nn.Linear(style_dim, style_dim), nn.LeakyReLU(LRELU_SLOPE)]
        self.style_mlp = nn.Sequential(*layers)
        self.constant_input = ConstantInput(ch[4])
        self.style_conv1 = StyleConv(ch[4], ch[4], style_dim)
        self.to_rgb1 = ToRGB(ch[4], style_dim, upsample=False)
        self.style_convs = nn.ModuleList()
        self.to_rgbs = nn.ModuleList()
        in_ch = ch[4]
        for res in (2**i for i in range(3, log_size + 1)):
            self.style_convs.append(StyleConv(in_ch, ch[res], style_dim, upsample=True))
            self.style_convs.append(StyleConv(ch[res], ch[res], style_dim))
            self.to_rgbs.append(ToRGB(ch[res], style_dim))
            in_ch = ch[res]
        # Layer i's noise has side 2^((i + 5) // 2): 4, 8, 8, 16, 16, ...
        self.noises = NoiseMaps([2 ** ((i + 5) // 2) for i in range(2 * (log_size - 2) + 1)])
        # Latents per image: 2 at 4 px, then 2 convs and a ToRGB per resolution sharing one.
        self.num_latent = 2 * log_size - 2

    def forward(self, latents: Tensor, conditions: Sequence[tuple[Tensor, Tensor]]) -> Tensor:
        # latents: (N, num_latent, style_dim); conditions[j]: (scale, shift) for the resolution
        # 8 * 2^j, each (N, C/2, r, r) -> (N, 3, size, size)
        noise = self.noises.maps()
        out = self.style_conv1(self.constant_input(latents.shape[0]), latents[:, 0], noise[0])
        skip: Tensor = self.to_rgb1(out, latents[:, 1])
        for j, to_rgb in enumerate(self.to_rgbs):
            i = 2 * j + 1
            out = self.style_convs[2 * j](out, latents[:, i], noise[i])
            if j < len(conditions):
                scale, shift = conditions[j]
                kept, changed = out.split(out.shape[1] // 2, dim=1)
                out = torch.cat((kept, torch.addcmul(shift, changed, scale)), dim=1)
            out = self.style_convs[2 * j + 1](out, latents[:, i + 1], noise[i + 1])
            skip = to_rgb(out, latents[:, i + 2], skip)
        return skip
