"""A photo's views: the small files the dashboard shows of it, made by the finish stage while the
pixels are in memory (the service never decodes a photo for them). docs/architecture.md lists the
files and the keys of faces.json.

Plain numpy, OpenCV and Pillow; no torch.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from gpen_watch.base.fsutil import replace_folder
from gpen_watch.imaging.preview import srgb_jpeg
from gpen_watch.restore.stages.staged import StagedPhoto

log = logging.getLogger(__name__)

# The long side of before.jpg and after.jpg (the dashboard's before/after slider), and of thumb.jpg.
PREVIEW_SIDE = 1600
THUMB_SIDE = 320
JPEG_QUALITY = 85
# The face crops: JPEG at quality 95 without chroma subsampling, which keeps what a person judges
# identity by (skin, eyes, hair) at full resolution; PNG cost 25-40 ms a crop here, this 2-3 ms,
# and a group photo pays it for every face (docs/benchmarks.md).
FACE_QUALITY = 95


def write_views(work: StagedPhoto, after: np.ndarray, folder: Path) -> None:
    """Write ``work``'s views into ``folder`` (replacing an older set); ``after``: the result's
    pixels as written. A view that cannot be written costs the photo nothing: it is logged."""
    try:
        replace_folder(folder, view_files(work, after))
    except Exception:
        log.exception("%s: could not write its views to %s", work.job.src, folder)


def view_files(work: StagedPhoto, after: np.ndarray) -> dict[str, bytes]:
    """The views of ``work`` by file name (see the module's docstring)."""
    image = work.image
    assert image is not None
    # The photo as decoded (oriented, pre-scaled), before any upscaling replaced ``pixels``.
    before = image.bgr8
    h, w = after.shape[:2]
    size = _fit(w, h, PREVIEW_SIDE)
    before_p = _resize(before, size)
    after_p = _resize(_to_8bit(after), size)
    icc = image.icc_profile
    files = {
        "before.jpg": _jpeg(before_p, icc),
        "after.jpg": _jpeg(after_p, icc),
        "thumb.jpg": _jpeg(_resize(after_p, _fit(size[0], size[1], THUMB_SIDE)), icc),
    }
    scale = size[0] / before.shape[1]  # the faces' boxes are at the decoded size
    restored = np.concatenate(work.restored) if work.restored else None
    faces: list[dict[str, Any]] = []
    k = 0  # the next restored face, in the order of work.faces
    for i, (face, reason) in enumerate(work.shown):
        if reason is None and work.crops is not None and restored is not None:
            files[f"faces/{i}.before.jpg"] = _face_jpeg(work.crops[k])
            files[f"faces/{i}.after.jpg"] = _face_jpeg(restored[k])
            k += 1
        else:
            crop = _box_crop(before, face.box, work.face_size)
            if crop is not None:
                files[f"faces/{i}.before.jpg"] = _face_jpeg(crop)
        box = [float(v) for v in face.box[:4]]
        faces.append(
            {
                "index": i,
                # A detection that cannot be a face may hold no numbers at all (a broken checkpoint).
                "box": [round(v * scale, 1) for v in box] if all(map(np.isfinite, box)) else [0.0] * 4,
                "score": round(float(face.score), 4) if np.isfinite(face.score) else None,
                "restored": reason is None,
                "reason": reason,
            }
        )
    sw, sh = image.original_size
    meta = {"width": size[0], "height": size[1], "source_width": sw, "source_height": sh, "faces": faces}
    files["faces.json"] = json.dumps(meta, indent=1).encode()
    return files


def _fit(w: int, h: int, side: int) -> tuple[int, int]:
    """(w, h) shrunk to a long side of at most ``side``, the aspect kept (never enlarged)."""
    scale = min(1.0, side / max(w, h, 1))
    return max(1, round(w * scale)), max(1, round(h * scale))


def _resize(bgr: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Shrunk to ``size`` by INTER_AREA (each target pixel the average of its source pixels: no
    aliasing). OpenCV's area shrink is fast only by whole factors: a large shrink goes by the
    largest whole factor first (the same averages within rounding), then the rest of the way."""
    h, w = bgr.shape[:2]
    if (w, h) == size:
        return bgr
    whole = min(w // size[0], h // size[1])
    if whole >= 2:
        bgr = cv2.resize(bgr, (w // whole, h // whole), interpolation=cv2.INTER_AREA)
        if (bgr.shape[1], bgr.shape[0]) == size:
            return bgr
    out: np.ndarray = cv2.resize(bgr, size, interpolation=cv2.INTER_AREA)
    return out


def _to_8bit(pixels: np.ndarray) -> np.ndarray:
    if pixels.dtype == np.uint8:
        return pixels
    out: np.ndarray = ((pixels.astype(np.uint32) + 128) // 257).astype(np.uint8)
    return out


def _jpeg(bgr: np.ndarray, icc: bytes | None) -> bytes:
    return srgb_jpeg(bgr, icc, JPEG_QUALITY)


def _face_jpeg(bgr: np.ndarray) -> bytes:
    params = [
        cv2.IMWRITE_JPEG_QUALITY,
        FACE_QUALITY,
        cv2.IMWRITE_JPEG_SAMPLING_FACTOR,
        cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444,
    ]
    ok, buf = cv2.imencode(".jpg", np.ascontiguousarray(bgr), params)
    if not ok:
        raise ValueError("JPEG encoding failed")
    return bytes(buf.tobytes())


def _box_crop(bgr: np.ndarray, box: np.ndarray, side: int) -> np.ndarray | None:
    """The detection box cut from the photo (clipped to it), shrunk to at most ``side`` a side;
    None when nothing of the box lies in the photo."""
    if not np.all(np.isfinite(box[:4])):
        return None
    h, w = bgr.shape[:2]
    x1, y1 = max(0, int(np.floor(box[0]))), max(0, int(np.floor(box[1])))
    x2, y2 = min(w, int(np.ceil(box[2]))), min(h, int(np.ceil(box[3])))
    if x2 <= x1 or y2 <= y1:
        return None
    crop = bgr[y1:y2, x1:x2]
    return _resize(crop, _fit(x2 - x1, y2 - y1, side or max(x2 - x1, y2 - y1)))
