"""How a checkpoint's layout differs from a model's: the keys it lacks, the keys it has that the model
does not, and the keys whose shapes differ. Torch-free (shapes are plain tuples), so the loaders
of every architecture and the checked loading in gpen_watch.restore.engines.verify compare layouts the same way and only
word the difference their own way."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

Shapes = Mapping[str, tuple[int, ...]]


@dataclass(frozen=True)
class LayoutDiff:
    """Keys in the order the model (missing, wrong_shape) or the file (unexpected) lists them."""

    missing: list[str]
    unexpected: list[str]
    wrong_shape: list[str]

    def __bool__(self) -> bool:
        return bool(self.missing or self.unexpected or self.wrong_shape)


def compare_layout(expected: Shapes, got: Shapes) -> LayoutDiff:
    return LayoutDiff(
        missing=[k for k in expected if k not in got],
        unexpected=[k for k in got if k not in expected],
        wrong_shape=[k for k in expected if k in got and tuple(got[k]) != tuple(expected[k])],
    )
