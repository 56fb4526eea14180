"""A detector for benchmarks: the real network runs on every photo, the faces come from a table.

Random detector weights find nonsense (or nothing), so the faces reported are the photo set's
known ones, scaled to whatever size the photo was decoded at. The network's result is thrown away,
but it runs on exactly the input the engine would give it, so detection costs what it really costs.
Without a table (``--detect-real``: the MobileNet detector with its real weights) the network's
own faces are reported.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from benchmarks.photos import FaceMarks
from benchmarks.stages import StageClock
from gpen_watch.restore.stages.detect import Face, Prepared


class _Detector(Protocol):
    def detect(self, images: Sequence[np.ndarray | Prepared]) -> list[list[Face]]: ...

    def prepare(self, image: np.ndarray) -> Prepared: ...


class FaceTable:
    """Known faces per photo source, looked up by aspect ratio (sources are chosen to differ)."""

    def __init__(self, faces: FaceMarks) -> None:
        self._entries = [(aspect, np.asarray(lm, np.float32)) for aspect, lm in faces.values()]

    def faces_for(self, height: int, width: int) -> list[Face]:
        aspect = width / height
        best = min(self._entries, key=lambda e: abs(e[0] - aspect), default=None)
        # Pre-scaling rounds each side to whole pixels; anything further off is another photo.
        if best is None or abs(best[0] - aspect) > 0.01 * best[0]:
            return []
        points = best[1] * np.array([width, height], np.float32)
        faces = []
        for lm in points:
            lo, hi = lm.min(axis=0), lm.max(axis=0)
            pad = (hi - lo).max() * 0.6
            box = np.concatenate([lo - pad, hi + pad]).astype(np.float32)
            faces.append(Face(box, 1.0, lm.copy()))
        return faces


class KnownFaces:
    """Runs ``network`` (when given) for its cost, reports the table's faces, or without a table
    the faces the network found.

    With ``clock``, the network's wall time is summed into it as "detector".
    """

    def __init__(
        self, network: _Detector | None, table: FaceTable | None, clock: StageClock | None = None
    ) -> None:
        self.network = network
        self.table = table
        self.clock = clock

    def detect(self, images: Sequence[np.ndarray | Prepared]) -> list[list[Face]]:
        found: list[list[Face]] = []
        if self.network is not None:
            with self.clock.time("detector") if self.clock is not None else contextlib.nullcontext():
                found = self.network.detect(images)
        if self.table is None:
            return found
        table = self.table
        return [table.faces_for(*img.shape[:2]) for img in images]

    def prepare(self, image: np.ndarray) -> Prepared:
        """The network's own preparation (the engine runs it on its decode threads)."""
        if self.network is not None:
            return self.network.prepare(image)
        return Prepared(image[:1, :1], 1.0, (int(image.shape[0]), int(image.shape[1])))
