"""A batch's faces grouped by person (docs/identity.md, "People"): the original faces'
descriptors, two faces joined where they are closer than restore.identity_threshold, and the
groups found by Chinese whispers (Biemann, 2006; what dlib's face clustering uses): every face
starts as a group of its own and, over the faces in turn, takes the group most of its neighbours
are in, until no face changes. Unlike joining every connected pair, one chance likeness between
two people does not merge their groups when each has more faces of its own.

A batch of 20,000 faces has 200 million pairs: they are measured in blocks of a few MB, and
after the first sweep only faces beside a change are visited again (docs/benchmarks.md,
"Grouping faces by person"). numpy is imported when a batch is grouped, not when the journal is.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpen_watch.journal.faces import FaceQueries, FaceRow

if TYPE_CHECKING:
    import numpy as np

# Sweeps over every face at most; a batch settles in a few.
_MAX_SWEEPS = 100
# Pairs of faces compared at once (a block of rows against the faces after them): 4 Mi pairs hold
# 16 MB of float32 however large the batch.
_BLOCK_PAIRS = 1 << 22
# Candidate pairs checked in float64 at once (two 8 MB gathers).
_CHECK_PAIRS = 1 << 13
# A face with more neighbours than this is counted by np.bincount, fewer by a Counter.
_FEW = 64


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
    starts, near = _neighbours(points, threshold)
    order = np.random.default_rng(seed).permutation(n)
    return _renumbered(_whispers(starts, near, order))


def _whispers(starts: np.ndarray, near: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Chinese whispers: each face in ``order`` takes the group most of its neighbours
    (``near[starts[i]:starts[i + 1]]``) are in, the lowest numbered of equally common ones, if
    more of them are in it than in its own; sweeps until one changes nothing. A face none of
    whose neighbours changed group since it was last visited would decide as it did then (stay),
    so only faces beside a change are visited again: the same groups as visiting every face."""
    import numpy as np

    labels = np.arange(len(order))
    pending = np.diff(starts) > 0  # faces whose neighbours changed since their last visit
    visits = order.tolist()
    for _ in range(_MAX_SWEEPS):
        changed = False
        for i in visits:
            if not pending[i]:
                continue
            pending[i] = False
            around = near[starts[i] : starts[i + 1]]
            own = int(labels[i])
            if len(around) > _FEW:
                counts = np.bincount(labels[around])
                best = int(np.argmax(counts))
                most = int(counts[best])
                mine = int(counts[own]) if own < len(counts) else 0
            else:
                tally = Counter(labels[around].tolist())
                most = max(tally.values())
                best = min(label for label, count in tally.items() if count == most)
                mine = tally.get(own, 0)
            if most > mine:
                labels[i] = best
                pending[around] = True
                changed = True
        if not changed:
            break
    return labels


def _neighbours(points: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """Each point's neighbours, the others closer than ``threshold``, as ``near[starts[i]:
    starts[i + 1]]`` (ascending). Each pair is measured once, in blocks of rows against the
    points after them: a float32 pass keeps the pairs that may be close (its margin is far
    wider than float32's rounding on these sums), which are then measured in float64, as
    |a|^2 + |b|^2 - 2 a.b against threshold^2. Points that are not finite have none."""
    import numpy as np

    n, width = points.shape
    finite = np.isfinite(points).all(axis=1)
    squares = (points * points).sum(axis=1)
    squares[~finite] = 0.0
    limit = threshold * threshold
    margin = 1e-3 * (2.0 * float(squares.max()) + limit) + 1e-6
    # a.b' with a = (2x, -1) and b' = (y, |y|^2) is 2 x.y - |y|^2: one product and a compare
    # with |x|^2 - threshold^2 per row finds |x - y|^2 < threshold^2 (+ margin).
    rows = np.empty((n, width + 1), dtype=np.float32)
    rows[:, :width] = points
    rows[:, :width] *= 2.0
    rows[:, width] = -1.0
    cols = np.empty((n, width + 1), dtype=np.float32)
    cols[:, :width] = points
    cols[:, width] = squares
    rows[~finite] = 0.0
    cols[~finite] = 0.0
    bar = (squares - limit - margin).astype(np.float32)
    firsts: list[np.ndarray] = []
    seconds: list[np.ndarray] = []
    start = 0
    while start < n:
        stop = min(n, start + max(1, _BLOCK_PAIRS // (n - start)))
        products = rows[start:stop] @ cols[start:].T
        hits = np.flatnonzero(products > bar[start:stop, None])
        a = hits // (n - start) + start
        b = hits % (n - start) + start
        keep = (b > a) & finite[a] & finite[b]
        firsts.append(a[keep])
        seconds.append(b[keep])
        start = stop
    a = np.concatenate(firsts)
    b = np.concatenate(seconds)
    close = np.zeros(len(a), dtype=bool)
    for lo in range(0, len(a), _CHECK_PAIRS):
        x, y = points[a[lo : lo + _CHECK_PAIRS]], points[b[lo : lo + _CHECK_PAIRS]]
        d2 = squares[a[lo : lo + _CHECK_PAIRS]] + squares[b[lo : lo + _CHECK_PAIRS]]
        close[lo : lo + _CHECK_PAIRS] = d2 - 2.0 * np.einsum("ij,ij->i", x, y) < limit
    a, b = a[close], b[close]
    source = np.concatenate([a, b])
    target = np.concatenate([b, a])
    by_source = np.lexsort((target, source))
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(source, minlength=n), out=starts[1:])
    return starts, target[by_source]


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
    descriptors = np.frombuffer(b"".join(f.descriptor for f in faces), dtype="<f4").reshape(len(faces), -1)
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
