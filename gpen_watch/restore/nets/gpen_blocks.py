"""The layers GPEN is built of: StyleGAN2's equalised-learning-rate layers, FIR resampling, the
encoder's conv layers and the decoder's modulated convolutions, each as upstream names them so
the checkpoints' keys follow their nesting. ``gpen_model`` assembles them into the generator.

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

import math
from collections.abc import Iterator, Sequence
from typing import Literal, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gpen_watch.restore.nets.gpen_ops import (
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


def bounded_style(style: Tensor) -> Tensor:
    """(N, Cin) styles divided by each sample's largest entry. Demodulation is invariant to a
    per-sample rescaling of the style, so this changes nothing but the range: x*style and the
    pre-demodulation activations stay in fp16 range under autocast."""
    return style / style.detach().abs().amax(dim=1, keepdim=True).clamp_min(1e-8)


def demodulation(weight: Tensor, style: Tensor) -> Tensor:
    """StyleGAN2's demodulation factor rsqrt(||W * s||^2 + eps) per sample and output channel:
    weight (Cout, Cin, k, k) as the conv uses it, style (N, Cin) -> (N, Cout), float32.

    ||w * s||^2 over (Cin, k, k) for each output channel = s^2 @ (sum_k w^2)^T; the matmul form
    never materialises per-sample weights.  fp32 even under autocast: a sum of squares followed by
    rsqrt is where reduced precision hurts most."""
    w_sq = weight.float().pow(2).sum(dim=(2, 3))  # (Cout, Cin)
    return torch.rsqrt(fp32_matmul(style.float().pow(2), w_sq.t()) + DEMOD_EPS)  # (N, Cout)


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
            style = bounded_style(style)
            demod = demodulation(weight, style)  # (N, Cout), float32
        if self.mode == "grouped":
            return self._forward_grouped(x, weight, style, demod)
        if self.mode == "input_scaling":
            return self._forward_input_scaling(x, weight, style, demod)
        raise ValueError(f"unknown modulation mode {self.mode!r}; expected one of {MODULATION_MODES}")

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


def iter_modulated_convs(model: nn.Module) -> Iterator[ModulatedConv2d]:
    return (m for m in model.modules() if isinstance(m, ModulatedConv2d))
