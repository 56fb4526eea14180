"""A stand-in restorer for the review's browser tests: the outcomes of ``fake_restorer`` (by file
name), but a photo's result and views look like a worker's. The result is the photo with its colours
turned (same framing, so the two halves of the slider line up; twice the size when the name holds
"x2", as with restore.upscale = 2, and larger by the factor a redo's restore.upscale asks), and its views are what restore/stages/views.py writes:
before.jpg and after.jpg at one size (at most 1600 px a side), thumb.jpg, and one face crop before
and after from the middle of the photo with its box. A file Pillow cannot read keeps the stand-in's
plain copy and views."""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from fake_restorer import FakeRestorer
from PIL import Image, ImageOps

from gpen_watch.base.fsutil import replace_folder
from gpen_watch.restore.api import FileJob, FileResult

PREVIEW_SIDE = 1600
THUMB_SIDE = 320
FACE_SIDE = 96


class ReviewRestorer(FakeRestorer):
    def restore_files(self, jobs: Iterable[FileJob | None]) -> Iterator[FileResult]:
        held: dict[str, FileJob] = {}

        def remembered() -> Iterator[FileJob | None]:
            for job in jobs:
                if job is not None:
                    held[str(job.src)] = job
                yield job

        for result in super().restore_files(remembered()):
            job = held.pop(str(result.src), None)
            if result.ok and job is not None and result.dst is not None:
                _restore(job, Path(result.dst))
            yield result


def _jpeg(im: Image.Image, quality: int = 90) -> bytes:
    out = io.BytesIO()
    im.convert("RGB").save(out, "JPEG", quality=quality)
    return out.getvalue()


def _fit(im: Image.Image, side: int) -> Image.Image:
    scale = min(1.0, side / max(im.size))
    return im.resize(
        (max(1, round(im.width * scale)), max(1, round(im.height * scale))), Image.Resampling.LANCZOS
    )


def _restore(job: FileJob, dst: Path) -> None:
    try:
        with Image.open(job.src) as opened:
            before = ImageOps.exif_transpose(opened).convert("RGB")
    except OSError:
        return
    after = ImageOps.invert(before)
    factor = 2 if "x2" in job.src.name else job.restore.upscale if job.restore is not None else 1
    if factor > 1:
        after = after.resize((before.width * factor, before.height * factor), Image.Resampling.NEAREST)
    dst.write_bytes(_jpeg(after, 95))
    if job.views is None:
        return
    b, a = _fit(before, PREVIEW_SIDE), _fit(after, PREVIEW_SIDE)
    a = a.resize(b.size, Image.Resampling.LANCZOS)
    w, h = before.size
    box = (w // 2 - w // 10, h // 2 - h // 10, w // 2 + w // 10, h // 2 + h // 10)
    face = before.crop(box).resize((FACE_SIDE, FACE_SIDE))
    scale = b.width / w
    meta = {
        "width": b.width,
        "height": b.height,
        "source_width": w,
        "source_height": h,
        "faces": [
            {
                "index": 0,
                "box": [round(v * scale, 1) for v in box],
                "score": 0.99,
                "restored": True,
                "reason": None,
            }
        ],
    }
    replace_folder(
        job.views,
        {
            "before.jpg": _jpeg(b),
            "after.jpg": _jpeg(a),
            "thumb.jpg": _jpeg(_fit(a, THUMB_SIDE)),
            "faces/0.before.jpg": _jpeg(face),
            "faces/0.after.jpg": _jpeg(ImageOps.invert(face)),
            "faces.json": json.dumps(meta).encode(),
        },
    )
