"""``python -m benchmarks.views``: what writing a photo's views (FileJob.views) adds to its finish stage.

The finish stage (restore/stages/finish.py: paste back, encode, write) of one 12 MP JPEG photo with
faces (benchmarks.photos: the Solvay group photo where ../shared has it), with and without views, rounds interleaved, on the engine's own code; the generator's
output is stood in by the aligned crops themselves (the views' cost does not depend on what the
faces look like). Photos take their decode, detection and restoration before this either way.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from benchmarks.photos import PhotoSet, build_photo_set
from gpen_watch.config import RestoreConfig
from gpen_watch.imaging.load import load_image
from gpen_watch.restore.api import FileJob, FileResult
from gpen_watch.restore.stages import align
from gpen_watch.restore.stages.detect import Face
from gpen_watch.restore.stages.finish import finish
from gpen_watch.restore.stages.staged import StagedPhoto


def _work(photo: PhotoSet, dst: Path, views: Path | None, faces: int, size: int) -> StagedPhoto:
    """The photo with its known faces aligned; the first ``faces`` restored, the others left out."""
    (first,) = photo.photos
    src = first.path
    image = load_image(src)
    h, w = image.bgr8.shape[:2]
    _aspect, marks = photo.faces[first.source]
    all_faces = []
    for lm in np.array(marks, np.float32) * np.array([w, h], np.float32):
        (x1, y1), (x2, y2) = lm.min(axis=0), lm.max(axis=0)
        pad = 0.8 * max(x2 - x1, y2 - y1)
        box = np.array([x1 - pad, y1 - pad, x2 + pad, y2 + pad], np.float32)
        all_faces.append(Face(box, 0.99, lm))
    chosen = all_faces[:faces]
    crops, affines = align.align_faces(image.bgr8, np.stack([f.landmarks for f in chosen]), size)
    work = StagedPhoto(
        FileJob(src, dst, "same", 92, views=views), FileResult(src, False), cfg=RestoreConfig()
    )
    work.image = image
    work.faces = chosen
    work.crops, work.affines = crops, affines
    work.restored = [crops[:, ::-1].copy()]  # stands in for the generator's output
    work.shown = [(f, None) for f in chosen] + [(f, "not among the largest") for f in all_faces[faces:]]
    work.face_size = size
    work.found = len(all_faces)
    return work


def _once(folder: Path, photo: PhotoSet, with_views: bool, args: argparse.Namespace) -> tuple[float, int]:
    dst = folder / "out.jpg"
    views = folder / "views" / "1" if with_views else None
    work = _work(photo, dst, views, args.faces, args.size)
    t0 = time.perf_counter()
    res = finish(work, 0, threading.Event())
    seconds = time.perf_counter() - t0
    assert res.ok, res.error
    size = sum(p.stat().st_size for p in views.rglob("*") if p.is_file()) if views else 0
    dst.unlink()
    return seconds, size


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.views", description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--faces", type=int, default=20, help="faces restored; the photo's others are left out")
    ap.add_argument("--size", type=int, default=512, help="the generator's resolution")
    args = ap.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="gpen-bench-views-"))
    try:
        photo = build_photo_set(folder / "in", 1, 12.0)
        found = photo.total_faces
        times: dict[bool, list[float]] = {False: [], True: []}
        sizes = []
        _once(folder, photo, True, args)  # warm: the first call loads codecs and lazy imports
        for _ in range(args.rounds):
            for with_views in (False, True):
                seconds, size = _once(folder, photo, with_views, args)
                times[with_views].append(seconds)
                if with_views:
                    sizes.append(size)
        without, with_ = statistics.median(times[False]), statistics.median(times[True])
        (first,) = photo.photos
        print(
            f"{first.width}x{first.height} JPEG ({first.source}), {min(args.faces, found)} faces restored, "
            f"{max(0, found - args.faces)} left out, {args.size} px crops"
        )
        print(f"finish stage without views: median {without * 1000:.0f} ms of {args.rounds}")
        print(f"finish stage with views:    median {with_ * 1000:.0f} ms of {args.rounds}")
        print(
            f"views cost: +{(with_ - without) * 1000:.0f} ms a photo; {statistics.median(sizes) / 1e6:.2f} MB of views"
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
