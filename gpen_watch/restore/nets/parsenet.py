"""ParseNet, the face-parsing network of PSFR-GAN (Chen et al., CVPR 2021), in plain PyTorch.

An encoder of residual blocks halves a face down to 32 px, ten residual blocks work there, and a
decoder of upsampling residual blocks brings it back; two 3x3 heads then give the 19-class parsing
map (skin, brows, eyes, nose, lips, hair, ...) that shapes the paste-back mask, and a picture the
engine never reads (``fold.drop_image_head`` skips it). Fully convolutional: a 256 px face gives a
256 px map.

Module and parameter names follow the published ``parsing_parsenet.pth`` (facexlib's release,
GPEN's ``ParseNet-latest.pth``), so it loads unchanged; the code is an independent implementation.
Every convolution is a ``ConvLayer`` whose parts the load-time rewrites (``fold``, ``upconv``,
``reflect_conv``) recognise by type.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

Scale = Literal["same", "up", "down"]

# The network as published: 64 channels at full size, doubling per halving within 32..256.
_BASE_CHANNELS = 64
_MIN_CHANNELS, _MAX_CHANNELS = 32, 256
_SMALLEST_SIDE = 32
_BODY_BLOCKS = 10
PARSING_CLASSES = 19


class BatchNormSlot(nn.Module):
    """A BatchNorm one level down, where the published file keeps it (``norm.norm.*``)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.norm = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.norm(x)
        return out


class ConvLayer(nn.Module):
    """A 3x3 convolution over the reflection-padded input: after a nearest x2 upsample for "up",
    at stride 2 for "down"; then a BatchNorm and a leaky ReLU (slope 0.2) where asked.

    ``norm`` and ``relu`` are ``nn.Identity`` when absent, so the layer's parts are always modules:
    ``fold`` replaces a folded BatchNorm by one too.
    """

    def __init__(
        self, cin: int, cout: int, scale: Scale = "same", norm: bool = False, activate: bool = False
    ) -> None:
        super().__init__()
        self.upsample = scale == "up"
        self.reflection_pad = nn.ReflectionPad2d(1)
        # With a BatchNorm after it a bias would be redundant; the published file has none there.
        self.conv2d = nn.Conv2d(cin, cout, 3, 2 if scale == "down" else 1, bias=not norm)
        self.relu: nn.Module = nn.LeakyReLU(0.2, inplace=True) if activate else nn.Identity()
        self.norm: nn.Module = BatchNormSlot(cout) if norm else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.upsample:
            x = F.interpolate(x, scale_factor=2, mode="nearest")
        out: torch.Tensor = self.relu(self.norm(self.conv2d(self.reflection_pad(x))))
        return out


class ResidualBlock(nn.Module):
    """Two ``ConvLayer``s (BatchNorm on both, the activation on the first) plus a shortcut, which
    is the input itself unless the block changes the size or the channels (then a plain
    ``ConvLayer`` with the same scale step). A "down" block strides its second convolution, an
    "up" block upsamples before its first."""

    def __init__(self, cin: int, cout: int, scale: Scale = "same") -> None:
        super().__init__()
        self.shortcut_func: nn.Module = (
            nn.Identity() if scale == "same" and cin == cout else ConvLayer(cin, cout, scale)
        )
        self.conv1 = ConvLayer(cin, cout, "up" if scale == "up" else "same", norm=True, activate=True)
        self.conv2 = ConvLayer(cout, cout, "down" if scale == "down" else "same", norm=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.shortcut_func(x) + self.conv2(self.conv1(x))
        return out


def _clip(channels: int) -> int:
    return max(_MIN_CHANNELS, min(channels, _MAX_CHANNELS))


class ParseNet(nn.Module):
    """(N, 3, H, W) in [-1, 1] -> (parsing logits (N, 19, H, W), picture (N, 3, H, W)).

    ``in_size`` and ``out_size`` only decide how many halvings and doublings the network has (the
    published one: 512 and 512, four each).
    """

    def __init__(self, in_size: int = 512, out_size: int = 512, parsing_ch: int = PARSING_CLASSES) -> None:
        super().__init__()
        smallest = min(in_size, _SMALLEST_SIDE)
        downs = (in_size // smallest).bit_length() - 1
        ups = (out_size // smallest).bit_length() - 1
        ch = _BASE_CHANNELS
        encoder: list[nn.Module] = [ConvLayer(3, ch)]
        for _ in range(downs):
            encoder.append(ResidualBlock(_clip(ch), _clip(ch * 2), "down"))
            ch *= 2
        self.encoder = nn.Sequential(*encoder)
        self.body = nn.Sequential(*(ResidualBlock(_clip(ch), _clip(ch)) for _ in range(_BODY_BLOCKS)))
        decoder: list[nn.Module] = []
        for _ in range(ups):
            decoder.append(ResidualBlock(_clip(ch), _clip(ch // 2), "up"))
            ch //= 2
        self.decoder = nn.Sequential(*decoder)
        self.out_img_conv: nn.Module = ConvLayer(_clip(ch), 3)
        self.out_mask_conv = ConvLayer(_clip(ch), parsing_ch)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.encoder(x)
        x = self.decoder(features + self.body(features))
        return self.out_mask_conv(x), self.out_img_conv(x)
