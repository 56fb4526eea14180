"""A photo's views as the dashboard reads them: the previews, the thumbnail and the face crops the
worker wrote (see docs/architecture.md, "A photo's views"), found by job id and a name from a fixed
list, never by a path from the request."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpen_watch.base.strenum import StrEnum
from gpen_watch.service.views import views_dir

MAX_FACES_JSON = 1 << 20


class Picture(StrEnum):
    BEFORE = "before"
    AFTER = "after"
    THUMB = "thumb"


class Side(StrEnum):
    BEFORE = "before"
    AFTER = "after"


_FACE_INDEX = re.compile(r"[0-9]{1,4}")


@dataclass(frozen=True)
class FaceView:
    index: int
    box: tuple[float, float, float, float]  # in preview pixels
    score: float | None
    restored: bool
    reason: str | None
    has_after: bool


@dataclass(frozen=True)
class PhotoViews:
    width: int
    height: int
    source_width: int
    source_height: int
    faces: tuple[FaceView, ...]
    has_after: bool


def picture_file(root: Path, job_id: int, picture: Picture) -> Path | None:
    path = views_dir(root, job_id) / f"{picture}.jpg"
    return path if path.is_file() else None


def face_file(root: Path, job_id: int, index: str, side: Side) -> Path | None:
    if not _FACE_INDEX.fullmatch(index):
        return None
    path = views_dir(root, job_id) / "faces" / f"{int(index)}.{side}.jpg"
    return path if path.is_file() else None


def photo_views(root: Path, job_id: int) -> PhotoViews | None:
    """What faces.json says, or None when the worker wrote no views (or they were pruned)."""
    folder = views_dir(root, job_id)
    try:
        with open(folder / "faces.json", "rb") as f:
            data: Any = json.loads(f.read(MAX_FACES_JSON))
        faces = tuple(_face(folder, f) for f in data.get("faces", []))
        return PhotoViews(
            int(data["width"]),
            int(data["height"]),
            int(data.get("source_width", 0)),
            int(data.get("source_height", 0)),
            faces,
            (folder / "after.jpg").is_file(),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _face(folder: Path, f: dict[str, Any]) -> FaceView:
    index = int(f["index"])
    x0, y0, x1, y1 = (float(v) for v in f["box"])
    score = f.get("score")
    return FaceView(
        index,
        (x0, y0, x1, y1),
        float(score) if score is not None else None,
        bool(f.get("restored")),
        str(f["reason"]) if f.get("reason") else None,
        (folder / "faces" / f"{index}.after.jpg").is_file(),
    )
