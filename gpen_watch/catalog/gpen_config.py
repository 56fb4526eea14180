"""The shape of a GPEN generator, torch-free: the model registry names each released checkpoint's
shape, and the generator (``gpen_model``) is built from it."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class GPENConfig:
    """Constructor arguments of an upstream ``FullGenerator`` (isconcat=True, lr_mlp=0.01)."""

    size: int
    style_dim: int = 512
    n_mlp: int = 8
    channel_multiplier: int = 2
    narrow: float = 1.0

    def __post_init__(self) -> None:
        if self.size not in (8, 16, 32, 64, 128, 256, 512, 1024, 2048):
            raise ValueError(f"GPEN size must be a power of two in 8..2048, got {self.size}")
        if self.style_dim < 1 or self.n_mlp < 0 or self.channel_multiplier < 1 or self.narrow <= 0:
            raise ValueError(f"invalid GPEN config {self}")

    @property
    def log_size(self) -> int:
        return int(math.log2(self.size))

    def channels(self) -> dict[int, int]:
        """Feature channels per resolution, truncated with int() exactly as upstream does."""
        cm, nw = self.channel_multiplier, self.narrow
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
            2048: int(8 * cm * nw),
        }
