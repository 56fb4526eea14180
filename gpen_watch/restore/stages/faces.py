"""Which of the detector's faces get restored: those that can be faces of the photo at all, and
that the restore settings ask for. Plain numpy; no torch."""

from __future__ import annotations

from gpen_watch.config import RestoreConfig
from gpen_watch.restore.stages import align
from gpen_watch.restore.stages.detect import Face

# A face whose box is under this many pixels on its longer side in the result is left as it is:
# its eyes are then ~3 px apart, and pasting a 256-1024 px crop back into it averages some 100+
# crop pixels into each photo pixel, which keeps the face's colours (GPEN keeps those of its input)
# and averages away the detail restoring would add.
TINY_BOX_PX = 8
# Two detections whose boxes overlap this much are one face (tiled or repeated detector passes, a
# stand-in detector); NMS inside one pass already removes overlaps over its 0.4.
DUPLICATE_IOU = 0.8


# A face left out of the restoration, and why, in words for the user (the photo's views).
LeftOut = tuple[Face, str]


def plausible(
    faces: list[Face], hw: tuple[int, int], notes: list[str], left_out: list[LeftOut] | None = None
) -> list[Face]:
    """The faces that can be in a photo of ``hw`` (height, width); the others are dropped with a
    note (appended to ``notes``) saying why, and each with its reason appended to ``left_out``."""
    kept: list[Face] = []
    problems: list[str] = []
    for face in faces:
        problem = align.face_problem(face.box, face.landmarks, hw)
        if problem is None:
            kept.append(face)
        else:
            problems.append(problem)
            if left_out is not None:
                left_out.append((face, f"cannot be a face in this photo ({problem})"))
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


def _iou(a: Face, b: Face) -> float:
    ax1, ay1, ax2, ay2 = (float(v) for v in a.box[:4])
    bx1, by1, bx2, by2 = (float(v) for v in b.box[:4])
    inter = max(0.0, min(ax2, bx2) - max(ax1, bx1)) * max(0.0, min(ay2, by2) - max(ay1, by1))
    union = _area(a) + _area(b) - inter
    return inter / union if union > 0 else 0.0


def _distinct(faces: list[Face], left_out: list[LeftOut]) -> list[Face]:
    """The faces less any that repeats one before it (detection order: the better score first)."""
    kept: list[Face] = []
    for face in faces:
        if all(_iou(face, k) <= DUPLICATE_IOU for k in kept):
            kept.append(face)
        else:
            left_out.append((face, "a second detection of a face restored once"))
    return kept


def _leave_out(faces: list[Face], kept: list[Face], reason: str, left_out: list[LeftOut]) -> None:
    left_out.extend((f, reason) for f in faces if not any(f is k for k in kept))


def _box_side(face: Face) -> float:
    x1, y1, x2, y2 = (float(v) for v in face.box[:4])
    return max(x2 - x1, y2 - y1)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def select(
    faces: list[Face],
    hw: tuple[int, int],
    cfg: RestoreConfig,
    notes: list[str],
    left_out: list[LeftOut] | None = None,
) -> list[Face]:
    """The faces to restore, in detection order: one of each set of duplicate detections, none
    under TINY_BOX_PX in the result, then by restore.min_face, .faces, .max_faces and .strength;
    when that leaves some out, a note (appended to ``notes``) says how many were found, how many
    are restored and why the others were left alone, and each face left out is appended to
    ``left_out`` with its own reason."""
    why: list[str] = []
    out: list[LeftOut] = left_out if left_out is not None else []
    distinct = _distinct(faces, out)
    if len(distinct) < len(faces):
        n = len(faces) - len(distinct)
        why.append(
            f"{_plural(n, 'duplicate detection')} of a face restored once (boxes overlap by IoU > {DUPLICATE_IOU})"
        )
    # The result is the photo as detected (pre-scaled) times restore.upscale.
    big = [f for f in distinct if _box_side(f) * cfg.upscale >= TINY_BOX_PX]
    if len(big) < len(distinct):
        n = len(distinct) - len(big)
        why.append(f"{n} under {TINY_BOX_PX} px in the result, too small for restoring to change")
        _leave_out(
            distinct, big, f"under {TINY_BOX_PX} px in the result, too small for restoring to change", out
        )
    kept = [f for f in big if f.size >= cfg.min_face]
    if len(kept) < len(big):
        why.append(f"{len(big) - len(kept)} smaller than restore.min_face = {cfg.min_face}")
        _leave_out(big, kept, f"smaller than restore.min_face = {cfg.min_face}", out)
    chosen = kept
    if cfg.faces == "largest" and len(chosen) > 1:
        chosen = [max(chosen, key=_area)]
    elif cfg.faces == "center" and len(chosen) > 1:
        chosen = [min(chosen, key=lambda f: _off_centre(f, hw))]
    if len(chosen) < len(kept):
        why.append(f"restore.faces = {cfg.faces}")
        which = "the largest face" if cfg.faces == "largest" else "the face nearest the centre"
        _leave_out(kept, chosen, f"not {which} (restore.faces = {cfg.faces})", out)
    if cfg.max_faces and len(chosen) > cfg.max_faces:
        largest = sorted(chosen, key=_area, reverse=True)[: cfg.max_faces]
        _leave_out(
            chosen,
            largest,
            f"not among the {cfg.max_faces} largest (restore.max_faces = {cfg.max_faces})",
            out,
        )
        chosen = [f for f in chosen if any(f is g for g in largest)]
        why.append(f"restore.max_faces = {cfg.max_faces}")
    if cfg.strength == 0 and chosen:
        out.extend((f, "restore.strength = 0 restores no face") for f in chosen)
        chosen = []
        why.append("restore.strength = 0")
    if why:
        n = len(faces)
        notes.append(f"{n} face{'' if n == 1 else 's'} found, {len(chosen)} restored ({'; '.join(why)})")
    return chosen


def pick(
    detected: list[Face], chosen: list[Face], ids: tuple[int, ...], notes: list[str], left_out: list[LeftOut]
) -> list[Face]:
    """Of ``chosen``, the faces a person picked by number (their place in ``detected``, as the
    photo's page numbers them); the others are left as they are, each with that reason."""
    wanted = {id(detected[i]) for i in ids if 0 <= i < len(detected)}
    kept = [f for f in chosen if id(f) in wanted]
    picked = ", ".join(map(str, sorted(set(ids)))) or "none"
    _leave_out(chosen, kept, f"not picked for this run (faces picked: {picked})", left_out)
    if len(kept) < len(chosen):
        notes.append(f"{len(kept)} of {len(chosen)} faces restored, as picked ({picked})")
    return kept
