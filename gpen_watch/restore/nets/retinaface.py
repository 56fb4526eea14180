"""The RetinaFace face detector (Deng et al., CVPR 2020) in plain PyTorch, for inference.

A backbone gives three feature maps at strides 8, 16 and 32; a feature pyramid mixes each with the
coarser one above it; an SSH context module widens each one's receptive field; and three 1x1 heads
per level score every anchor as face or not, regress its box, and place five landmarks. Anchors,
their decoding and the suppression of overlapping boxes are in ``anchors``.

Module and parameter names follow the published checkpoints (``detection_mobilenet0.25_Final.pth``,
``detection_Resnet50_Final.pth``: the Pytorch_Retinaface release, also shipped by facexlib and
GPEN), so they load unchanged; the code is an independent implementation that needs neither
torchvision nor facexlib (docs/architecture.md, "Why the networks are the project's own").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from gpen_watch.restore.nets.resnet import ResNet50Body

Backbone = Literal["mobile0.25", "resnet50"]


@dataclass(frozen=True)
class RetinaFaceConfig:
    """One published RetinaFace: its backbone, widths and anchor settings."""

    backbone: Backbone
    stage_channels: tuple[int, int, int]  # the backbone's three outputs, fine to coarse
    width: int  # the pyramid's and the heads' channels
    steps: tuple[int, ...] = (8, 16, 32)
    # Anchor sides in pixels per level, smallest first: two square anchors per feature pixel.
    min_sizes: tuple[tuple[int, ...], ...] = ((16, 32), (64, 128), (256, 512))
    # The box encoding's scales for centres and for sizes (the training's "variance").
    variance: tuple[float, float] = (0.1, 0.2)
    clip: bool = False

    @property
    def anchors_per_pixel(self) -> int:
        return len(self.min_sizes[0])

    @property
    def leaky(self) -> float:
        """The slope of the pyramid's and SSH's activations: the narrow network was trained with a
        leaky ReLU there, the wide one with a plain ReLU."""
        return 0.1 if self.width <= 64 else 0.0


CONFIGS: dict[Backbone, RetinaFaceConfig] = {
    "mobile0.25": RetinaFaceConfig("mobile0.25", stage_channels=(64, 128, 256), width=64),
    "resnet50": RetinaFaceConfig("resnet50", stage_channels=(512, 1024, 2048), width=256),
}


def config_for(arch: str) -> RetinaFaceConfig:
    """The configuration of a registry ``arch`` ("mobile0.25" or "resnet50")."""
    for name, cfg in CONFIGS.items():
        if name == arch:
            return cfg
    raise ValueError(f"unknown RetinaFace backbone {arch!r}; known: {', '.join(CONFIGS)}")


# ---------------------------------------------------------------------------------------------------
# Layers


def conv_bn(
    cin: int, cout: int, kernel: int = 3, stride: int = 1, leaky: float | None = None, groups: int = 1
) -> list[nn.Module]:
    """A convolution without bias, its BatchNorm, and a leaky ReLU unless ``leaky`` is None: the
    three children each stage of these networks is made of (``fold`` merges the first two)."""
    layers: list[nn.Module] = [
        nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]
    if leaky is not None:
        layers.append(nn.LeakyReLU(leaky, inplace=True))
    return layers


def _depthwise_separable(cin: int, cout: int, stride: int) -> nn.Sequential:
    """MobileNet's block: a 3x3 convolution per channel, then a 1x1 across channels."""
    return nn.Sequential(
        *conv_bn(cin, cin, 3, stride, leaky=0.1, groups=cin), *conv_bn(cin, cout, 1, 1, leaky=0.1)
    )


class MobileNetBody(nn.Module):
    """MobileNet-V1 at width 0.25, cut after its three stages (strides 8, 16, 32)."""

    def __init__(self) -> None:
        super().__init__()
        self.stage1 = nn.Sequential(
            nn.Sequential(*conv_bn(3, 8, 3, 2, leaky=0.1)),
            _depthwise_separable(8, 16, 1),
            _depthwise_separable(16, 32, 2),
            _depthwise_separable(32, 32, 1),
            _depthwise_separable(32, 64, 2),
            _depthwise_separable(64, 64, 1),
        )
        self.stage2 = nn.Sequential(
            _depthwise_separable(64, 128, 2), *(_depthwise_separable(128, 128, 1) for _ in range(5))
        )
        self.stage3 = nn.Sequential(_depthwise_separable(128, 256, 2), _depthwise_separable(256, 256, 1))

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        c3 = self.stage1(x)
        c4 = self.stage2(c3)
        return [c3, c4, self.stage3(c4)]


class FeaturePyramid(nn.Module):
    """Each level projected to ``width`` channels, the coarser level's nearest upsampling added,
    and the sum smoothed by a 3x3 convolution (the coarsest level is left as projected)."""

    def __init__(self, stage_channels: tuple[int, int, int], width: int, leaky: float) -> None:
        super().__init__()
        self.output1 = nn.Sequential(*conv_bn(stage_channels[0], width, 1, leaky=leaky))
        self.output2 = nn.Sequential(*conv_bn(stage_channels[1], width, 1, leaky=leaky))
        self.output3 = nn.Sequential(*conv_bn(stage_channels[2], width, 1, leaky=leaky))
        self.merge1 = nn.Sequential(*conv_bn(width, width, 3, leaky=leaky))
        self.merge2 = nn.Sequential(*conv_bn(width, width, 3, leaky=leaky))

    def forward(self, stages: list[torch.Tensor]) -> list[torch.Tensor]:
        fine, middle, coarse = self.output1(stages[0]), self.output2(stages[1]), self.output3(stages[2])
        middle = self.merge2(middle + F.interpolate(coarse, size=middle.shape[-2:], mode="nearest"))
        fine = self.merge1(fine + F.interpolate(middle, size=fine.shape[-2:], mode="nearest"))
        return [fine, middle, coarse]


class SSH(nn.Module):
    """The single-stage headless context module: 3x3, 5x5 and 7x7 receptive fields (the larger two
    as stacked 3x3 convolutions sharing their first), concatenated to ``width`` channels."""

    def __init__(self, width: int, leaky: float) -> None:
        super().__init__()
        half, quarter = width // 2, width // 4
        self.conv3X3 = nn.Sequential(*conv_bn(width, half))
        self.conv5X5_1 = nn.Sequential(*conv_bn(width, quarter, leaky=leaky))
        self.conv5X5_2 = nn.Sequential(*conv_bn(quarter, quarter))
        self.conv7X7_2 = nn.Sequential(*conv_bn(quarter, quarter, leaky=leaky))
        self.conv7x7_3 = nn.Sequential(*conv_bn(quarter, quarter))  # the published name's lower-case x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shared = self.conv5X5_1(x)
        five = self.conv5X5_2(shared)
        seven = self.conv7x7_3(self.conv7X7_2(shared))
        return F.relu(torch.cat([self.conv3X3(x), five, seven], dim=1))


class Head(nn.Module):
    """A 1x1 convolution giving ``values`` numbers per anchor, as (N, anchors, values) in the order
    rows, columns, anchors of one pixel: the order ``anchors.anchor_priors`` lists them in."""

    def __init__(self, width: int, anchors: int, values: int) -> None:
        super().__init__()
        self.values = values
        self.conv1x1 = nn.Conv2d(width, anchors * values, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.conv1x1(x).permute(0, 2, 3, 1)
        return out.reshape(out.shape[0], -1, self.values)


def _heads(width: int, anchors: int, values: int) -> nn.ModuleList:
    return nn.ModuleList(Head(width, anchors, values) for _ in range(3))


# ---------------------------------------------------------------------------------------------------
# The network


class RetinaFace(nn.Module):
    """RetinaFace on a (N, 3, H, W) float batch of BGR pixels less ``anchors.BGR_MEAN`` (H and W
    multiples of 32 keep every anchor on the image). Returns per anchor: box offsets (N, P, 4),
    face probabilities (N, P, 2) with the face in column 1, landmark offsets (N, P, 10)."""

    def __init__(self, cfg: RetinaFaceConfig) -> None:
        super().__init__()
        self.config = cfg
        self.body: nn.Module = MobileNetBody() if cfg.backbone == "mobile0.25" else ResNet50Body()
        self.fpn = FeaturePyramid(cfg.stage_channels, cfg.width, cfg.leaky)
        self.ssh1 = SSH(cfg.width, cfg.leaky)
        self.ssh2 = SSH(cfg.width, cfg.leaky)
        self.ssh3 = SSH(cfg.width, cfg.leaky)
        n = cfg.anchors_per_pixel
        self.ClassHead = _heads(cfg.width, n, 2)
        self.BboxHead = _heads(cfg.width, n, 4)
        self.LandmarkHead = _heads(cfg.width, n, 10)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        levels = self.fpn(self.body(x))
        features = [ssh(level) for ssh, level in zip((self.ssh1, self.ssh2, self.ssh3), levels)]
        boxes = torch.cat([head(f) for head, f in zip(self.BboxHead, features)], dim=1)
        classes = torch.cat([head(f) for head, f in zip(self.ClassHead, features)], dim=1)
        landmarks = torch.cat([head(f) for head, f in zip(self.LandmarkHead, features)], dim=1)
        return boxes, F.softmax(classes, dim=-1), landmarks


def build_retinaface(arch: str) -> RetinaFace:
    """The RetinaFace of a registry ``arch`` with random weights, in eval mode."""
    return RetinaFace(config_for(arch)).eval()
