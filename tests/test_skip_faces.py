"""StagedPhoto skipped honestly: duplicate detections of one face and faces too small in the result."""

from __future__ import annotations

import numpy as np

from gpen_watch.config import RestoreConfig
from gpen_watch.restore.stages.detect import Face
from gpen_watch.restore.stages.faces import select


def _face(x: float, y: float, side: float, score: float = 0.99) -> Face:
    box = np.array([x, y, x + side, y + side], np.float32)
    # Five points inside the box, as a detector gives them: eyes, nose, mouth corners.
    rel = np.array([[0.3, 0.4], [0.7, 0.4], [0.5, 0.55], [0.35, 0.75], [0.65, 0.75]], np.float32)
    return Face(box, score, rel * side + np.array([x, y], np.float32))


HW = (1000, 1000)


def _which(chosen: list[Face], faces: list[Face]) -> list[int]:
    """Indices of the chosen faces among ``faces`` (Face compares arrays, so by identity)."""
    return [next(i for i, f in enumerate(faces) if f is c) for c in chosen]


def test_overlapping_boxes_are_one_face_restored_once() -> None:
    a, b = _face(100, 100, 200), _face(104, 102, 200, score=0.95)  # IoU ~0.94
    c = _face(400, 100, 200)  # a neighbour, no overlap
    notes: list[str] = []
    chosen = select([a, b, c], HW, RestoreConfig(), notes)
    assert _which(chosen, [a, b, c]) == [0, 2]  # the better-scored (first) of the pair
    assert notes == [
        "3 faces found, 2 restored (1 duplicate detection of a face restored once (boxes overlap by IoU > 0.8))"
    ]


def test_boxes_that_overlap_less_are_two_faces() -> None:
    a, b = _face(100, 100, 200), _face(150, 100, 200)  # IoU 0.6: two faces cheek to cheek
    notes: list[str] = []
    assert _which(select([a, b], HW, RestoreConfig(), notes), [a, b]) == [0, 1]
    assert notes == []


def test_faces_under_8_px_in_the_result_are_left_alone_and_upscaling_counts() -> None:
    small, tiny, big = _face(10, 10, 8), _face(50, 50, 7), _face(200, 200, 120)
    notes: list[str] = []
    faces = [small, tiny, big]
    assert _which(select(faces, HW, RestoreConfig(), notes), faces) == [0, 2]
    assert notes == [
        "3 faces found, 2 restored (1 under 8 px in the result, too small for restoring to change)"
    ]
    # restore.upscale = 2: the 7 px face is 14 px in the result, worth restoring.
    notes = []
    assert _which(select(faces, HW, RestoreConfig(upscale=2), notes), faces) == [0, 1, 2]
    assert notes == []
