"""Which of the detector's faces get restored: those that can be faces of the photo at all, and
that the restore settings ask for. Plain numpy; no torch."""

from __future__ import annotations

from gpen_watch.restore import align
from gpen_watch.restore.detect import Face


def plausible(faces: list[Face], hw: tuple[int, int], notes: list[str]) -> list[Face]:
    """The faces that can be in a photo of ``hw`` (height, width); the others are dropped with a
    note (appended to ``notes``) saying why."""
    kept: list[Face] = []
    problems: list[str] = []
    for face in faces:
        problem = align.face_problem(face.box, face.landmarks, hw)
        if problem is None:
            kept.append(face)
        else:
            problems.append(problem)
    if problems:
        n = len(problems)
        notes.append(
            f"ignored {n} detection{'' if n == 1 else 's'} that cannot be a face in this photo "
            f"({problems[0]}{'; ...' if n > 1 else ''}): is the detector checkpoint broken "
            "or meant for another model? (restore.detector)"
        )
    return kept
