"""The GPEN face-restoration generator (Yang et al., CVPR 2021) in plain PyTorch.

One file on purpose, like rosinality's stylegan2-pytorch ``model.py``: the layers read top to bottom
in the order a face goes through them, and the checkpoints' key names follow their nesting.

GPEN = a conv encoder whose last feature becomes one latent, feeding a StyleGAN2 generator whose
noise inputs are replaced by the encoder's features, *concatenated* onto every styled conv's output.
Module and parameter names mirror upstream (yangxy/GPEN ``face_model/gpen_model.py``) so the official
GPEN-BFR-512 / GPEN-BFR-256 state dicts load unchanged; the code is an independent implementation.

Modulated convolution comes in two numerically equivalent forms (``ModulatedConv2d.mode``):

* ``"grouped"``: upstream's form.  Every sample gets its own modulated+demodulated weight and the batch
  runs as one conv with ``groups=N``.
* ``"input_scaling"``: scale the input by the style, convolve with the shared weight, then scale the
  output by the demodulation factor (StyleGAN2-ADA's ``fused_modconv=False``).  A plain conv, so
  batches run as ordinary dense convs.

``input_scaling`` is the default: never slower on CPU and 4-14 % faster in most cases measured
(docs/benchmarks.md, "The generator's forms").
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gpen_watch.catalog.gpen_config import GPENConfig
from gpen_watch.catalog.registry import GPEN_CONFIGS
from gpen_watch.config import Precision, ResolvedPrecision
from gpen_watch.modelstore.layout import compare_layout
from gpen_watch.restore.gpen_ops import (
    LRELU_GAIN,
    LRELU_SLOPE,
    fp32_matmul,
    fp32_upfirdn2d,
    fused_leaky_relu,
    make_fir_kernel,
    upfirdn2d,
)

ModulationMode = Literal["grouped", "input_scaling"]
MODULATION_MODES: tuple[str, ...] = ("grouped", "input_scaling")
DEFAULT_MODULATION: ModulationMode = "input_scaling"

# StyleGAN2's [1, 3, 3, 1] binomial filter; the checkpoints store it as `*.kernel` buffers.
BLUR_TAPS: tuple[float, ...] = (1.0, 3.0, 3.0, 1.0)
# Learning-rate multiplier of the mapping network; it also scales the stored weights (see EqualLinear).
MAPPING_LR_MUL = 0.01
DEMOD_EPS = 1e-8


# ---------------------------------------------------------------------------------------------------
# Configuration


# ---------------------------------------------------------------------------------------------------
# Equalised-learning-rate layers
#
# StyleGAN2 stores weights as N(0, 1) samples and multiplies by the He constant at run time, so the
# checkpoints hold unscaled weights: the scale must be applied in forward, never folded at load time.


class PixelNorm(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        # x: (N, D) -> (N, D) with unit mean square per sample.
        return x * torch.rsqrt(x.pow(2).mean(dim=1, keepdim=True) + 1e-8)


class EqualLinear(nn.Module):
    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        bias_init: float = 0.0,
        lr_mul: float = 1.0,
        activate: bool = False,
    ) -> None:
        super().__init__()
        # Stored weights are N(0, 1) / lr_mul, scaled back by lr_mul in forward (checkpoint layout).
        self.weight = nn.Parameter(torch.randn(out_dim, in_dim).div_(lr_mul))
        self.bias = nn.Parameter(torch.full((out_dim,), float(bias_init)))
        self.scale = lr_mul / math.sqrt(in_dim)
        self.lr_mul = lr_mul
        self.activate = activate

    def forward(self, x: Tensor) -> Tensor:
        # x: (N, in_dim) -> (N, out_dim)
        if self.activate:
            out = F.linear(x, self.weight * self.scale)
            return fused_leaky_relu(out, self.bias * self.lr_mul)
        return F.linear(x, self.weight * self.scale, self.bias * self.lr_mul)

    def extra_repr(self) -> str:
        return (
            f"{self.weight.shape[1]}, {self.weight.shape[0]}, lr_mul={self.lr_mul}, activate={self.activate}"
        )


class EqualConv2d(nn.Module):
    def __init__(
        self, in_ch: int, out_ch: int, kernel_size: int, stride: int = 1, padding: int = 0, bias: bool = True
    ) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_ch, in_ch, kernel_size, kernel_size))
        self.bias = nn.Parameter(torch.zeros(out_ch)) if bias else None
        self.scale = 1.0 / math.sqrt(in_ch * kernel_size**2)
        self.stride = stride
        self.padding = padding

    def forward(self, x: Tensor) -> Tensor:
        return F.conv2d(x, self.weight * self.scale, self.bias, stride=self.stride, padding=self.padding)

    def extra_repr(self) -> str:
        o, i, k, _ = self.weight.shape
        return f"{i}, {o}, {k}, stride={self.stride}, padding={self.padding}"


class FusedLeakyReLU(nn.Module):
    """Bias + leaky ReLU(0.2) + sqrt(2) gain; its bias is the layer's bias in every GPEN conv."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(channels))

    def forward(self, x: Tensor) -> Tensor:
        return fused_leaky_relu(x, self.bias, LRELU_SLOPE, LRELU_GAIN)


# ---------------------------------------------------------------------------------------------------
# FIR resampling


class Blur(nn.Module):
    """FIR low-pass (no rate change) with explicit padding; part of every up/down-sampling conv."""

    kernel: Tensor  # a buffer: part of the state dict (``*.kernel``)

    def __init__(self, taps: Sequence[float], pad: tuple[int, int], upsample_factor: int = 1) -> None:
        super().__init__()
        kernel = make_fir_kernel(taps)
        if upsample_factor > 1:
            # Zero insertion leaves 1/factor^2 of the energy; the kernel gain restores it.
            kernel = kernel * upsample_factor**2
        self.register_buffer("kernel", kernel)
        self.pad = pad

    def forward(self, x: Tensor) -> Tensor:
        return upfirdn2d(x, self.kernel, pad=self.pad)


class Upsample(nn.Module):
    """2x FIR upsampling of the RGB skip image; kept in fp32 because it carries the output image."""

    kernel: Tensor  # a buffer: part of the state dict (``*.kernel``)

    def __init__(self, taps: Sequence[float], factor: int = 2) -> None:
        super().__init__()
        self.register_buffer("kernel", make_fir_kernel(taps) * factor**2)
        self.factor = factor
        p = len(taps) - factor
        self.pad = ((p + 1) // 2 + factor - 1, p // 2)

    def forward(self, x: Tensor) -> Tensor:
        # x: (N, 3, H, W) -> (N, 3, 2H, 2W), float32
        return fp32_upfirdn2d(x, self.kernel, up=self.factor, pad=self.pad)


# ---------------------------------------------------------------------------------------------------
# Encoder


class ConvLayer(nn.Sequential):
    """[Blur] -> EqualConv2d (no bias) -> FusedLeakyReLU, as a Sequential so keys read `.0/.1/.2`."""

    def __init__(
        self,
        in_ch: int,
        out_ch: int,
        kernel_size: int,
        downsample: bool = False,
        taps: Sequence[float] = BLUR_TAPS,
    ) -> None:
        layers: list[nn.Module] = []
        if downsample:
            # Pad so that blur + stride-2 valid conv halves the size exactly.
            p = (len(taps) - 2) + (kernel_size - 1)
            layers.append(Blur(taps, pad=((p + 1) // 2, p // 2)))
            stride, padding = 2, 0
        else:
            stride, padding = 1, kernel_size // 2
        layers.append(EqualConv2d(in_ch, out_ch, kernel_size, stride=stride, padding=padding, bias=False))
        layers.append(FusedLeakyReLU(out_ch))
        super().__init__(*layers)

    def forward(self, x: Tensor) -> Tensor:
        # Same maths as running the Sequential, in one conv + one in-place activation: the bias goes
        # into the conv, and the sqrt(2) gain into weight and bias (leaky ReLU commutes with a
        # positive scale).  Saves two full passes over every encoder feature map.
        *blur, conv_module, act_module = self
        conv, act = cast(EqualConv2d, conv_module), cast(FusedLeakyReLU, act_module)
        if blur:
            x = blur[0](x)
        y = F.conv2d(
            x,
            conv.weight * (conv.scale * LRELU_GAIN),
            act.bias * LRELU_GAIN,
            stride=conv.stride,
            padding=conv.padding,
        )
        return F.leaky_relu(y, LRELU_SLOPE, inplace=True)


# ---------------------------------------------------------------------------------------------------
# Decoder (StyleGAN2 generator with concatenated encoder features)


class ModulatedConv2d(nn.Module):
    def __init__(
        self,
        in_ch: int,
        out_ch: int,
        kernel_size: int,
        style_dim: int,
        demodulate: bool = True,
        upsample: bool = False,
        taps: Sequence[float] = BLUR_TAPS,
        mode: ModulationMode = DEFAULT_MODULATION,
    ) -> None:
        super().__init__()
        self.in_ch, self.out_ch, self.kernel_size = in_ch, out_ch, kernel_size
        self.demodulate = demodulate
        self.upsample = upsample
        self.mode: ModulationMode = mode
        if upsample:
            # The stride-2 transposed conv grows the map to 2H+1; this blur brings it back to 2H.
            factor = 2
            p = (len(taps) - factor) - (kernel_size - 1)
            self.blur = Blur(taps, pad=((p + 1) // 2 + factor - 1, p // 2 + 1), upsample_factor=factor)
        self.scale = 1.0 / math.sqrt(in_ch * kernel_size**2)
        self.padding = kernel_size // 2
        # Leading 1 is upstream's batch axis for per-sample weights; kept for the checkpoint layout.
        self.weight = nn.Parameter(torch.randn(1, out_ch, in_ch, kernel_size, kernel_size))
        # bias_init=1 so an untrained style starts as the identity modulation.
        self.modulation = EqualLinear(style_dim, in_ch, bias_init=1.0)

    def extra_repr(self) -> str:
        return (
            f"{self.in_ch}, {self.out_ch}, {self.kernel_size}, upsample={self.upsample}, "
            f"demodulate={self.demodulate}, mode={self.mode}"
        )

    def forward(self, x: Tensor, w: Tensor) -> Tensor:
        # x: (N, Cin, H, W), w: (N, style_dim) -> (N, Cout, H', W') with H' = 2H if upsample else H.
        out, demod = self.forward_undemodulated(x, w)
        if demod is not None:
            out = out * demod.to(out.dtype)[:, :, None, None]
        return out

    def forward_undemodulated(self, x: Tensor, w: Tensor) -> tuple[Tensor, Tensor | None]:
        """The conv output and the (N, Cout) demodulation factor still to be multiplied in, or None.

        The input-scaling form demodulates after the conv; handing the factor back lets the caller
        fold it into its own per-channel epilogue instead of spending a pass over the output.
        """
        style = self.modulation(w)  # (N, Cin)
        weight = self.weight[0] * self.scale  # (Cout, Cin, k, k)
        demod = None
        if self.demodulate:
            # Demodulation is invariant to a per-sample rescaling of the style, so divide by its
            # largest entry: keeps x*style and the pre-demod activations in fp16 range under autocast.
            style = style / style.detach().abs().amax(dim=1, keepdim=True).clamp_min(1e-8)
            demod = self._demodulation(weight, style)  # (N, Cout), float32
        if self.mode == "grouped":
            return self._forward_grouped(x, weight, style, demod)
        if self.mode == "input_scaling":
            return self._forward_input_scaling(x, weight, style, demod)
        raise ValueError(f"unknown modulation mode {self.mode!r}; expected one of {MODULATION_MODES}")

    @staticmethod
    def _demodulation(weight: Tensor, style: Tensor) -> Tensor:
        # ||w * s||^2 over (Cin, k, k) for each output channel = s^2 @ (sum_k w^2)^T; the matmul form
        # never materialises per-sample weights.  fp32 even under autocast: a sum of squares followed
        # by rsqrt is where reduced precision hurts most.
        w_sq = weight.float().pow(2).sum(dim=(2, 3))  # (Cout, Cin)
        return torch.rsqrt(fp32_matmul(style.float().pow(2), w_sq.t()) + DEMOD_EPS)  # (N, Cout)

    def _forward_grouped(
        self, x: Tensor, weight: Tensor, style: Tensor, demod: Tensor | None
    ) -> tuple[Tensor, None]:
        n, c_in, h, w = x.shape
        k = self.kernel_size
        weight = weight[None] * style[:, None, :, None, None]  # (N, Cout, Cin, k, k)
        if demod is not None:
            weight = weight * demod[:, :, None, None, None]
        # The batch becomes groups of one big single-image conv.
        x = x.reshape(1, n * c_in, h, w)
        if self.upsample:
            # conv_transpose2d wants (in, out/groups, k, k) weights: (N*Cin, Cout, k, k).
            weight = weight.transpose(1, 2).reshape(n * c_in, self.out_ch, k, k)
            out = F.conv_transpose2d(x, weight.to(x.dtype), stride=2, groups=n)  # (1, N*Cout, 2H+1, 2W+1)
            out = out.reshape(n, self.out_ch, *out.shape[2:])
            return self.blur(out), None  # (N, Cout, 2H, 2W)
        weight = weight.reshape(n * self.out_ch, c_in, k, k)
        out = F.conv2d(x, weight.to(x.dtype), padding=self.padding, groups=n)  # (1, N*Cout, H, W)
        return out.reshape(n, self.out_ch, h, w), None

    def _forward_input_scaling(
        self, x: Tensor, weight: Tensor, style: Tensor, demod: Tensor | None
    ) -> tuple[Tensor, Tensor | None]:
        # conv(x * s, W) * d == conv(x, W * s * d) because s scales input channels and d output ones;
        # d also commutes with the (per-channel) blur, so it is left to the caller.
        x = x * style.to(x.dtype)[:, :, None, None]  # (N, Cin, H, W)
        if self.upsample:
            out = F.conv_transpose2d(x, weight.transpose(0, 1), stride=2)  # (N, Cout, 2H+1, 2W+1)
            return self.blur(out), demod  # (N, Cout, 2H, 2W)
        return F.conv2d(x, weight, padding=self.padding), demod  # (N, Cout, H, W)


class ConcatNoise(nn.Module):
    """GPEN's NoiseInjection: appends ``weight * feature`` as extra channels instead of adding noise.

    The "noise" is the encoder feature at this resolution, which is how the degraded face's
    structure reaches the generator.
    """

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1))

    def forward(self, x: Tensor, feat: Tensor) -> Tensor:
        # x: (N, C, H, W), feat: (N, C, H, W) -> (N, 2C, H, W)
        return torch.cat((x, self.weight.to(feat.dtype) * feat), dim=1)


class ConstantInput(nn.Module):
    def __init__(self, channels: int, size: int = 4) -> None:
        super().__init__()
        self.input = nn.Parameter(torch.randn(1, channels, size, size))

    def forward(self, batch: int) -> Tensor:
        return self.input.expand(batch, -1, -1, -1)  # (N, C, 4, 4)


class StyledConv(nn.Module):
    def __init__(
        self,
        in_ch: int,
        out_ch: int,
        kernel_size: int,
        style_dim: int,
        upsample: bool = False,
        taps: Sequence[float] = BLUR_TAPS,
    ) -> None:
        super().__init__()
        self.conv = ModulatedConv2d(in_ch, out_ch, kernel_size, style_dim, upsample=upsample, taps=taps)
        self.noise = ConcatNoise()
        # The activation's bias covers the concatenated feature channels too, hence 2x.
        self.activate = FusedLeakyReLU(out_ch * 2)

    def forward(self, x: Tensor, w: Tensor, feat: Tensor) -> Tensor:
        # x: (N, Cin, H, W), feat: (N, Cout, H', W') -> (N, 2*Cout, H', W')
        # Equal to activate(noise(conv(x, w), feat)) (see forward_reference), but demodulation, the
        # feature weight, bias and sqrt(2) gain become one per-channel scale and shift before an
        # in-place leaky ReLU (which commutes with the positive gain): 4 passes over the output
        # instead of 6, and 2 fewer full-size allocations.  The in-place ops only touch tensors
        # that autograd does not need, so training would still work.
        out, demod = self.conv.forward_undemodulated(x, w)  # (N, Cout, H', W'), (N, Cout) | None
        n, c = out.shape[:2]
        dtype = out.dtype
        conv_scale = demod.to(dtype) if demod is not None else out.new_ones(n, c)
        scale = torch.cat((conv_scale, self.noise.weight.to(dtype).expand(n, c)), dim=1) * LRELU_GAIN
        bias = self.activate.bias.to(dtype) * LRELU_GAIN  # (2*Cout,)
        y = torch.cat((out, feat.to(dtype)), dim=1) * scale[:, :, None, None]  # (N, 2*Cout, H', W')
        y.add_(bias[None, :, None, None])
        return F.leaky_relu(y, LRELU_SLOPE, inplace=True)

    def forward_reference(self, x: Tensor, w: Tensor, feat: Tensor) -> Tensor:
        """Upstream's op-by-op order; kept to test the fused forward against."""
        out: Tensor = self.activate(self.noise(self.conv(x, w), feat))
        return out


class ToRGB(nn.Module):
    def __init__(self, in_ch: int, style_dim: int, upsample: bool = True, taps: Sequence[float] = BLUR_TAPS):
        super().__init__()
        if upsample:
            self.upsample = Upsample(taps)
        self.conv = ModulatedConv2d(in_ch, 3, 1, style_dim, demodulate=False)
        self.bias = nn.Parameter(torch.zeros(1, 3, 1, 1))

    def forward(self, x: Tensor, w: Tensor, skip: Tensor | None = None) -> Tensor:
        # x: (N, Cin, H, W), skip: (N, 3, H/2, W/2) -> (N, 3, H, W); the fp32 bias keeps the
        # accumulated image in fp32 under autocast.
        out: Tensor = self.conv(x, w) + self.bias
        if skip is not None:
            out = out + self.upsample(skip)
        return out


class StyleGenerator(nn.Module):
    """StyleGAN2 synthesis network with GPEN's concatenated features (upstream ``Generator``)."""

    def __init__(self, cfg: GPENConfig, taps: Sequence[float] = BLUR_TAPS) -> None:
        super().__init__()
        ch = cfg.channels()
        self.size = cfg.size
        self.style = nn.Sequential(
            PixelNorm(),
            *(
                EqualLinear(cfg.style_dim, cfg.style_dim, lr_mul=MAPPING_LR_MUL, activate=True)
                for _ in range(cfg.n_mlp)
            ),
        )
        self.input = ConstantInput(ch[4])
        self.conv1 = StyledConv(ch[4], ch[4], 3, cfg.style_dim, taps=taps)
        self.to_rgb1 = ToRGB(ch[4] * 2, cfg.style_dim, upsample=False, taps=taps)
        self.convs = nn.ModuleList()
        self.to_rgbs = nn.ModuleList()
        in_ch = ch[4]
        for res in (2**i for i in range(3, cfg.log_size + 1)):
            out_ch = ch[res]
            # Inputs are 2x wide because every styled conv's output carries its concatenated feature.
            self.convs.append(StyledConv(in_ch * 2, out_ch, 3, cfg.style_dim, upsample=True, taps=taps))
            self.convs.append(StyledConv(out_ch * 2, out_ch, 3, cfg.style_dim, taps=taps))
            self.to_rgbs.append(ToRGB(out_ch * 2, cfg.style_dim, taps=taps))
            in_ch = out_ch

    def forward(self, latent: Tensor, feats: Sequence[Tensor]) -> Tensor:
        # latent: (N, style_dim); feats[i]: (N, ch[2^(i+2)], 2^(i+2), 2^(i+2)), i.e. 4x4 first.
        # GPEN feeds one latent to every layer (no style mixing, truncation 1), so all layers share w.
        w = self.style(latent)  # (N, style_dim)
        out = self.conv1(self.input(latent.shape[0]), w, feats[0])  # (N, 2*ch4, 4, 4)
        skip: Tensor = self.to_rgb1(out, w)  # (N, 3, 4, 4)
        for i, to_rgb in enumerate(self.to_rgbs):
            # Each resolution's encoder feature is used by both of its styled convs.
            feat = feats[i + 1]
            out = self.convs[2 * i](out, w, feat)
            out = self.convs[2 * i + 1](out, w, feat)
            skip = to_rgb(out, w, skip)
        return skip  # (N, 3, S, S)


def iter_modulated_convs(model: nn.Module) -> Iterator[ModulatedConv2d]:
    return (m for m in model.modules() if isinstance(m, ModulatedConv2d))


class GPEN(nn.Module):
    """Full GPEN generator (upstream ``FullGenerator``): face in [-1, 1] -> restored face in ~[-1, 1]."""

    def __init__(self, cfg: GPENConfig, modulation: ModulationMode = DEFAULT_MODULATION) -> None:
        super().__init__()
        self.config = cfg
        ch = cfg.channels()
        self.generator = StyleGenerator(cfg)
        # Stage i outputs resolution size / 2^i; the last one (4x4) becomes the latent.
        self.encoder_names = [f"ecd{i}" for i in range(cfg.log_size - 1)]
        self.ecd0 = nn.Sequential(ConvLayer(3, ch[cfg.size], 1))
        in_ch = ch[cfg.size]
        for i, name in enumerate(self.encoder_names[1:], start=1):
            out_ch = ch[cfg.size >> i]
            setattr(self, name, nn.Sequential(ConvLayer(in_ch, out_ch, 3, downsample=True)))
            in_ch = out_ch
        self.final_linear = nn.Sequential(EqualLinear(ch[4] * 4 * 4, cfg.style_dim, activate=True))
        self.set_modulation(modulation)

    @property
    def modulation(self) -> ModulationMode:
        return self.generator.conv1.conv.mode

    def set_modulation(self, mode: ModulationMode) -> None:
        """Switch every modulated conv between the "grouped" and "input_scaling" forms."""
        if mode not in MODULATION_MODES:
            raise ValueError(f"unknown modulation mode {mode!r}; expected one of {MODULATION_MODES}")
        for m in iter_modulated_convs(self):
            m.mode = mode

    def forward(self, x: Tensor) -> Tensor:
        # x: (N, 3, S, S) in [-1, 1] -> (N, 3, S, S)
        if x.shape[-2:] != (self.config.size, self.config.size):
            raise ValueError(
                f"GPEN-{self.config.size} expects {self.config.size}px faces, got {tuple(x.shape)}"
            )
        feats = []
        h = x
        for name in self.encoder_names:
            h = getattr(self, name)(h)
            feats.append(h)  # resolutions S, S/2, ..., 4
        latent = self.final_linear(h.flatten(1))  # (N, ch4*16) -> (N, style_dim)
        image: Tensor = self.generator(latent, feats[::-1])
        return image


# ---------------------------------------------------------------------------------------------------
# Construction and loading


def build_gpen(cfg: GPENConfig, modulation: ModulationMode = DEFAULT_MODULATION) -> GPEN:
    """A GPEN with random weights (use ``torch.device("meta")`` as a context to build it for free)."""
    return GPEN(cfg, modulation=modulation)


def infer_gpen_config(state_dict: Mapping[str, Tensor]) -> GPENConfig:
    """Recover the constructor arguments of a GPEN checkpoint from its keys and shapes.

    ``channel_multiplier`` only affects resolutions >= 64; below that it cannot be recovered and
    upstream's default (2) is returned.  Raises ValueError if the result does not reproduce every
    key and shape of ``state_dict``.
    """
    try:
        n_enc = sum(1 for k in state_dict if k.startswith("ecd") and k.endswith(".weight"))
        size = 2 ** (n_enc + 1)
        n_mlp = sum(1 for k in state_dict if k.startswith("generator.style.") and k.endswith(".weight"))
        style_dim = int(state_dict["final_linear.0.weight"].shape[0])
        ch4 = int(state_dict["generator.input.input"].shape[1])
        narrow = ch4 / 512
        channel_multiplier = 2
        if size >= 64:
            # ecd0 maps RGB to ch[size] = int(base * cm * narrow).
            base = {64: 256, 128: 128, 256: 64, 512: 32, 1024: 16, 2048: 8}[size]
            ch_size = int(state_dict["ecd0.0.0.weight"].shape[0])
            channel_multiplier = max(1, round(ch_size / (base * narrow)))
        cfg = GPENConfig(size, style_dim, n_mlp, channel_multiplier, narrow)
    except (KeyError, IndexError, ValueError) as e:
        raise ValueError(f"not a GPEN state dict: {e}") from e

    diff = compare_layout(gpen_state_dict_shapes(cfg), {k: tuple(v.shape) for k, v in state_dict.items()})
    if diff:
        raise ValueError(
            f"state dict does not match inferred {cfg}: missing {sorted(diff.missing)[:5]}, "
            f"unexpected {sorted(diff.unexpected)[:5]}, wrong shape {sorted(diff.wrong_shape)[:5]}"
        )
    return cfg


def gpen_state_dict_shapes(cfg: GPENConfig) -> dict[str, tuple[int, ...]]:
    """Key -> shape of a GPEN state dict for ``cfg``, computed on the meta device (no memory)."""
    with torch.device("meta"):
        model = build_gpen(cfg)
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


# ---------------------------------------------------------------------------------------------------
# Inference setup

_AUTOCAST_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def resolve_precision(device: torch.device | str, precision: Precision) -> ResolvedPrecision:
    """ "auto" -> fp32 on CPU (the measured-safe default); bf16 on CUDA when supported (fp32 range,
    unlike fp16), else fp32.  fp16 on CPU is rejected: CPU autocast fp16 is slow and untested here.

    On Apple's GPU (mps) "auto" is fp32 too: its half-precision autocast depends on the torch and
    macOS versions and has not been run on one here; fp16 and bf16 can be asked for."""
    dev = torch.device(device)
    if precision == "auto":
        if dev.type == "cuda" and torch.cuda.is_bf16_supported():
            return "bf16"
        return "fp32"
    if precision == "fp16" and dev.type not in ("cuda", "mps"):
        raise ValueError("fp16 is only supported on a GPU (CUDA or Apple's mps); use bf16 or fp32 on CPU")
    if precision in ("fp32", "fp16", "bf16"):
        return precision
    raise ValueError(f"unknown precision {precision!r}")


@dataclass
class GPENRunner:
    """A GPEN ready for inference: call it with (N, 3, S, S) faces in [-1, 1], get fp32 images back."""

    model: GPEN
    device: torch.device
    precision: ResolvedPrecision
    channels_last: bool

    def autocast(self) -> contextlib.AbstractContextManager[object]:
        if self.precision == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=_AUTOCAST_DTYPES[self.precision])

    def __call__(self, x: Tensor) -> Tensor:
        x = x.to(self.device, dtype=torch.float32, non_blocking=True)
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        with torch.inference_mode(), self.autocast():
            out: Tensor = self.model(x)
        return out.float()


def prepare_for_inference(
    model: GPEN,
    device: torch.device | str = "cpu",
    precision: Precision = "fp32",
    channels_last: bool = False,
) -> GPENRunner:
    """Move ``model`` to ``device`` in eval mode without gradients and wrap it in a runner.

    Weights stay fp32; reduced precision comes from autocast inside the runner, so the fp32-only
    parts (demodulation, RGB skip path) keep full precision.
    """
    dev = torch.device(device)
    prec = resolve_precision(dev, precision)
    model = model.to(dev).eval().requires_grad_(False)
    if channels_last:
        # Module.to(memory_format=...) rejects the 5-D modulated weights, so convert the 4-D ones
        # (encoder convs) directly; modulated weights are rebuilt as 4-D tensors on every call.
        for p in model.parameters():
            if p.ndim == 4:
                p.data = p.data.contiguous(memory_format=torch.channels_last)
    return GPENRunner(model=model, device=dev, precision=prec, channels_last=channels_last)


__all__: list[str] = [
    "DEFAULT_MODULATION",
    "GPEN",
    "GPEN_CONFIGS",
    "MODULATION_MODES",
    "GPENConfig",
    "GPENRunner",
    "ModulationMode",
    "build_gpen",
    "gpen_state_dict_shapes",
    "infer_gpen_config",
    "prepare_for_inference",
    "resolve_precision",
]
