"""Which of the detector's faces get restored: those that can be faces of the photo at all, and
that the restore settings ask for. Plain numpy; no torch."""

from __future__ import annotations

from gpen_watch.config import RestoreConfig
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


def _area(face: Face) -> float:
    x1, y1, x2, y2 = (float(v) for v in face.box[:4])
    return max(0.0, x2 - x1) * max(0.0, y2 - y1)


def _off_centre(face: Face, hw: tuple[int, int]) -> float:
    x1, y1, x2, y2 = (float(v) for v in face.box[:4])
    return ((x1 + x2) / 2 - hw[1] / 2) ** 2 + ((y1 + y2) / 2 - hw[0] / 2) ** 2


def select(faces: list[Face], hw: tuple[int, int], cfg: RestoreConfig, notes: list[str]) -> list[Face]:
    """The faces to restore, in detection order, by restore.min_face, .faces, .max_faces and
    .strength; when that leaves some out, a note (appended to ``notes``) says how many were found,
    how many are restored and which settings left the others alone."""
    kept = [f for f in faces if f.size >= cfg.min_face]
    why: list[str] = []
    if len(kept) < len(faces):
        why.append(f"{len(faces) - len(kept)} smaller than restore.min_face = {cfg.min_face}")
    chosen = kept
    if cfg.faces == "largest" and len(chosen) > 1:
        chosen = [max(chosen, key=_area)]
    elif cfg.faces == "center" and len(chosen) > 1:
        chosen = [min(chosen, key=lambda f: _off_centre(f, hw))]
    if len(chosen) < len(kept):
        why.append(f"restore.faces = {cfg.faces}")
    if cfg.max_faces and len(chosen) > cfg.max_faces:
        largest = sorted(chosen, key=_area, reverse=True)[: cfg.max_faces]
        chosen = [f for f in chosen if any(f is g for g in largest)]
        why.append(f"restore.max_faces = {cfg.max_faces}")
    if cfg.strength == 0 and chosen:
        chosen = []
        why.append("restore.strength = 0")
    if why:
        n = len(faces)
        notes.append(f"{n} face{'' if n == 1 else 's'} found, {len(chosen)} restored ({'; '.join(why)})")
    return chosen
