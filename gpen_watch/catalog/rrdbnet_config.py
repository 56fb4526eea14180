"""The shape of an RRDBNet upscaler (ESRGAN / Real-ESRGAN), torch-free: the model registry names each
released checkpoint's shape, and the network (``rrdbnet``) is built from it."""

from __future__ import annotations

from dataclasses import dataclass

# Factors the official checkpoints come in: x4 runs the trunk at the input's resolution, x2 first
# folds 2x2 pixel blocks into channels (pixel-unshuffle) and runs it at half.
SCALES = (2, 4)
# 3x3 convolutions one RRDB block stacks: 3 residual dense blocks of 5 convs.
_CONVS_PER_BLOCK = 15


@dataclass(frozen=True)
class RRDBConfig:
    """Constructor arguments of BasicSR's ``RRDBNet(3, 3, scale, num_feat, num_block, num_grow_ch)``."""

    scale: int
    num_feat: int = 64
    num_block: int = 23
    num_grow_ch: int = 32

    def __post_init__(self) -> None:
        if self.scale not in SCALES:
            raise ValueError(f"RRDBNet scale must be one of {SCALES}, got {self.scale}")
        if min(self.num_feat, self.num_block, self.num_grow_ch) < 1:
            raise ValueError(f"invalid RRDBNet config {self}")

    @property
    def unshuffle(self) -> int:
        """Input pixels per trunk pixel along each axis (pixel-unshuffle factor; 1: none)."""
        return 4 // self.scale

    @property
    def in_channels(self) -> int:
        return 3 * self.unshuffle**2

    @property
    def receptive_radius(self) -> int:
        """Input pixels on each side that can change one output pixel, rounded up (conservative).

        Every 3x3 conv at the trunk's resolution reaches one trunk pixel further: conv_first, the
        blocks' convs and conv_body. The four convs after the nearest-neighbour upsamplings reach at
        most one input pixel each (less at x4), which also covers the unshuffle's 2x2 grouping.
        """
        trunk_convs = 1 + self.num_block * _CONVS_PER_BLOCK + 1
        return trunk_convs * self.unshuffle + 4
