"""Grouping faces by person (``journal.people.group_faces``) finds the same groups as Chinese
whispers done the plain way: every pair's distance in float64, every face visited in every sweep
(``_plain_groups``, the way the journal grouped before it was made fast). Made-up descriptors:
planted clusters, chains of faces each near the next, pairs exactly at the threshold, faces that
are not finite, and batches split into the smallest blocks and checks.
"""

from __future__ import annotations

import numpy as np
import pytest

from gpen_watch.journal import people
from gpen_watch.journal.people import group_faces

THRESHOLD = 0.32


def _plain_groups(descriptors: np.ndarray, threshold: float, seed: int = 0) -> list[int]:
    points = np.asarray(descriptors, dtype=np.float64)
    n = len(points)
    if n == 0:
        return []
    squares = (points * points).sum(axis=1)
    with np.errstate(invalid="ignore"):  # a face that is not finite is near no one
        d2 = squares[:, None] + squares[None, :] - 2.0 * points @ points.T
    neighbours = [np.flatnonzero((d2[i] < threshold * threshold) & (np.arange(n) != i)) for i in range(n)]
    labels = np.arange(n)
    order = np.random.default_rng(seed).permutation(n)
    for _ in range(100):
        changed = False
        for i in order:
            if len(neighbours[i]) == 0:
                continue
            counts = np.bincount(labels[neighbours[i]])
            best = int(np.argmax(counts))
            mine = counts[labels[i]] if labels[i] < len(counts) else 0
            if counts[best] > mine:
                labels[i] = best
                changed = True
        if not changed:
            break
    groups, first, sizes = np.unique(labels, return_index=True, return_counts=True)
    ranked = sorted(range(len(groups)), key=lambda g: (-int(sizes[g]), int(first[g])))
    number = {int(groups[g]): rank for rank, g in enumerate(ranked)}
    return [number[int(label)] for label in labels]


def _planted(rng: np.random.Generator, people_count: int, each: int, spread: float) -> np.ndarray:
    """``each`` faces within ``spread`` of each of ``people_count`` centres 0.6 from the origin
    (people about 0.85 apart), shuffled; with a spread near the threshold, people touch."""
    centres = rng.normal(size=(people_count, 128))
    centres *= 0.6 / np.linalg.norm(centres, axis=1, keepdims=True)
    steps = rng.normal(size=(people_count * each, 128))
    steps *= (spread * rng.random(len(steps)) / np.linalg.norm(steps, axis=1))[:, None]
    return rng.permutation(np.repeat(centres, each, axis=0) + steps)


@pytest.mark.parametrize("seed", range(6))
def test_planted_people_are_grouped_as_the_plain_way_groups_them(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for spread in (0.05, 0.2, 0.35, 0.5):
        points = _planted(rng, int(rng.integers(1, 30)), int(rng.integers(1, 15)), spread)
        for threshold in (0.2, THRESHOLD, 0.45):
            assert group_faces(points, threshold, seed) == _plain_groups(points, threshold, seed)


def test_float32_descriptors_as_the_journal_keeps_them() -> None:
    points = _planted(np.random.default_rng(7), 40, 8, 0.3).astype("<f4")
    assert group_faces(points, THRESHOLD) == _plain_groups(points, THRESHOLD)


def test_chains_of_faces_each_near_the_next() -> None:
    """Faces 0.3 apart in a row, so the ends are far apart, a branch off the middle, and two
    chains touching at one face: whatever whispers make of them, it is the same."""
    rng = np.random.default_rng(11)
    axis, branch = np.eye(128)[0], np.eye(128)[1]
    row = [k * 0.3 * axis for k in range(12)]
    side = [row[6] + k * 0.3 * branch for k in range(1, 6)]
    other = [row[11] + 0.31 * axis + k * 0.29 * np.eye(128)[2] for k in range(8)]
    points = np.array(row + side + other) + rng.normal(size=(25, 128)) * 1e-4
    for seed in range(5):
        assert group_faces(points, THRESHOLD, seed) == _plain_groups(points, THRESHOLD, seed)
    assert len(set(group_faces(points, THRESHOLD))) > 1  # a chain is not one person


def test_a_crowd_in_a_plane_where_whispers_keep_moving() -> None:
    """Faces strewn over a plane, each near a few others and no clear people: groups shift for
    several sweeps, and a face whose neighbour moved earlier in a sweep is visited again in it
    (visiting it only in the next sweep gives other groups in 4 of these 1,350 batches)."""
    for batch in range(450):
        rng = np.random.default_rng(batch)
        n = int(rng.integers(6, 40))
        points = np.zeros((n, 128))
        points[:, :2] = rng.random((n, 2)) * float(rng.choice([0.6, 1.0, 1.5]))
        for seed in range(3):
            assert group_faces(points, THRESHOLD, seed) == _plain_groups(points, THRESHOLD, seed)


def test_a_pair_exactly_at_the_threshold_is_not_joined() -> None:
    """Coordinates of a few binary digits, so every sum is exact: 0.5 apart with a threshold
    of 0.5 is not closer than it, 0.4375 apart is."""
    axis = np.eye(128)[0]
    assert group_faces(np.array([0 * axis, 0.5 * axis]), 0.5) == [0, 1]
    assert group_faces(np.array([0 * axis, 0.4375 * axis]), 0.5) == [0, 0]
    grid = np.array([[x, y] + [0.0] * 126 for x in np.arange(0, 3, 0.5) for y in np.arange(0, 2, 0.25)])
    for threshold in (0.25, 0.5, 0.75):
        for seed in range(4):
            assert group_faces(grid, threshold, seed) == _plain_groups(grid, threshold, seed)


def test_empty_one_and_faces_that_are_not_finite() -> None:
    assert group_faces(np.zeros((0, 128)), THRESHOLD) == []
    assert group_faces(np.zeros((1, 128)), THRESHOLD) == [0]
    points = _planted(np.random.default_rng(3), 5, 4, 0.1)
    points[2, 7] = np.nan
    points[9, 0] = np.inf
    groups = group_faces(points, THRESHOLD)
    assert groups == _plain_groups(points, THRESHOLD)
    assert groups.count(groups[2]) == 1 and groups.count(groups[9]) == 1


def test_the_smallest_blocks_and_checks_and_each_way_of_counting(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch measured a row at a time, its close pairs checked three at a time, and neighbours
    counted by np.bincount or by a Counter alike."""
    rng = np.random.default_rng(5)
    points = np.vstack([_planted(rng, 12, 6, 0.35), _planted(rng, 1, 90, 0.2)])  # one person, 90 faces
    plain = _plain_groups(points, THRESHOLD)
    assert group_faces(points, THRESHOLD) == plain
    monkeypatch.setattr(people, "_BLOCK_PAIRS", 1)
    monkeypatch.setattr(people, "_CHECK_PAIRS", 3)
    assert group_faces(points, THRESHOLD) == plain
    for few in (0, 10_000):
        monkeypatch.setattr(people, "_FEW", few)
        assert group_faces(points, THRESHOLD) == plain


def test_the_benchmark_times_two_groupings_and_finds_the_same_people(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from benchmarks.people_grouping import main

    assert main(["--faces", "300", "--rounds", "1", "--against", people.__file__]) == 0
    out = capsys.readouterr().out
    assert "300 faces, round 1, against:" in out and "best round: against" in out
