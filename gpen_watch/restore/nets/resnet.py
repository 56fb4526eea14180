"""ResNet-50 (He et al., 2016) cut after its fourth stage: RetinaFace-R50's backbone.

The stride-2 step of each downsampling block is on its 3x3 convolution (the "v1.5" variant the
published detector was trained with), and the names follow that checkpoint's ``body.*`` keys.
"""

from __future__ import annotations

import torch
from torch import nn

# Output channels of each bottleneck: four times its inner width.
EXPANSION = 4


class Bottleneck(nn.Module):
    """1x1 down to ``width``, 3x3 at ``stride``, 1x1 up to 4 x ``width``, plus the input (projected
    by a strided 1x1 convolution when its shape changes). ``fold`` folds each convN/bnN pair."""

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * EXPANSION
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module | None = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        # In place: a fresh sum would be one more full-size activation per block.
        out += x if self.downsample is None else self.downsample(x)
        result: torch.Tensor = self.relu(out)
        return result


def _stage(cin: int, width: int, blocks: int, stride: int) -> nn.Sequential:
    first = Bottleneck(cin, width, stride)
    return nn.Sequential(first, *(Bottleneck(width * EXPANSION, width, 1) for _ in range(blocks - 1)))


class ResNet50Body(nn.Module):
    """The stem (7x7 stride 2, max pool) and four stages of 3, 4, 6 and 3 bottlenecks; returns the
    last three stages' outputs (512, 1024 and 2048 channels at strides 8, 16 and 32)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = _stage(64, 64, 3, 1)
        self.layer2 = _stage(256, 128, 4, 2)
        self.layer3 = _stage(512, 256, 6, 2)
        self.layer4 = _stage(1024, 512, 3, 2)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        c3 = self.layer2(self.layer1(x))
        c4 = self.layer3(c3)
        return [c3, c4, self.layer4(c4)]
