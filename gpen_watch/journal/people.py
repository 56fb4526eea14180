"""A batch's faces grouped by person (docs/identity.md, "People"): the original faces'
descriptors, two faces joined where they are closer than restore.identity_threshold, and the
groups found by Chinese whispers (Biemann, 2006; what dlib's face clustering uses): every face
starts as a group of its own and, over the faces in turn, takes the group most of its neighbours
are in, until no face changes. Unlike joining every connected pair, one chance likeness between
two people does not merge their groups when each has more faces of its own.

numpy is imported when a batch is grouped, not when the journal is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpen_watch.journal.faces import FaceQueries, FaceRow

if TYPE_CHECKING:
    import numpy as np

# Sweeps over every face at most; a batch settles in a few.
_MAX_SWEEPS = 100
# Rows of the distance matrix computed at once (a 6,000-face batch: 6 blocks of 1,024 x 6,000).
_BLOCK = 1024


@dataclass(frozen=True)
class Person:
    """One group of faces: each as (run, face number), the clearest first (the highest detail
    measure; its tile on the People page)."""

    faces: tuple[tuple[int, int], ...]

    @property
    def clearest(self) -> tuple[int, int]:
        return self.faces[0]


def group_faces(descriptors: np.ndarray, threshold: float, seed: int = 0) -> list[int]:
    """A group number for each of N descriptors (N, 128): Chinese whispers over the graph of
    pairs closer than ``threshold``. The same input gives the same groups (the order faces are
    visited in is drawn from ``seed``); groups are numbered from 0, the largest first."""
    import numpy as np

    points = np.asarray(descriptors, dtype=np.float64)
    n = len(points)
    if n == 0:
        return []
    neighbours = _neighbours(points, threshold)
    labels = np.arange(n)
    order = np.random.default_rng(seed).permutation(n)
    for _ in range(_MAX_SWEEPS):
        changed = False
        for i in order:
            near = neighbours[i]
            if len(near) == 0:
                continue
            counts = np.bincount(labels[near])
            best = int(np.argmax(counts))  # the lowest group number among equally common ones
            if counts[best] > (counts[labels[i]] if labels[i] < len(counts) else 0) and best != labels[i]:
                labels[i] = best
                changed = True
        if not changed:
            break
    return _renumbered(labels)


def _neighbours(points: np.ndarray, threshold: float) -> list[np.ndarray]:
    """For each point, the others closer than ``threshold``."""
    import numpy as np

    squares = (points * points).sum(axis=1)
    limit = threshold * threshold
    out: list[np.ndarray] = []
    for start in range(0, len(points), _BLOCK):
        block = points[start : start + _BLOCK]
        d2 = squares[start : start + _BLOCK, None] + squares[None, :] - 2.0 * block @ points.T
        for row, i in enumerate(range(start, start + len(block))):
            near = np.flatnonzero(d2[row] < limit)
            out.append(near[near != i])
    return out


def _renumbered(labels: np.ndarray) -> list[int]:
    """Groups numbered 0, 1, ... by size, largest first (then by their first face)."""
    import numpy as np

    groups, first, sizes = np.unique(labels, return_index=True, return_counts=True)
    ranked = sorted(range(len(groups)), key=lambda g: (-int(sizes[g]), int(first[g])))
    number = {int(groups[g]): rank for rank, g in enumerate(ranked)}
    return [number[int(label)] for label in labels]


def people_of(faces: Sequence[FaceRow], threshold: float) -> list[Person]:
    """``faces`` (described) grouped by person, the largest group first."""
    import numpy as np

    if not faces:
        return []
    descriptors = np.stack([np.frombuffer(f.descriptor, dtype="<f4") for f in faces])
    groups: dict[int, list[FaceRow]] = {}
    for face, group in zip(faces, group_faces(descriptors, threshold)):
        groups.setdefault(group, []).append(face)
    return [
        Person(tuple((f.job_id, f.index) for f in sorted(members, key=_clearest_first)))
        for _, members in sorted(groups.items())
    ]


def _clearest_first(face: FaceRow) -> tuple[float, int, int]:
    return (-(face.detail if face.detail is not None else -1.0), face.job_id, face.index)


class PeopleQueries(FaceQueries):
    """The People view's read: a batch's faces grouped by person."""

    def people(self, first_id: int, threshold: float, last_id: int | None = None) -> list[Person]:
        """The photos Results lists among runs ``first_id`` to ``last_id`` (a batch), their
        described faces grouped by person (``threshold``: restore.identity_threshold)."""
        return people_of(self.described_faces(first_id, last_id), threshold)
