"""Restorers the hostile scenarios load into the service's workers (via GPEN_WATCH_RESTORER).

``CopyRestorer``: tests/fake_restorer.py's stand-in (copies the photo; crash/hang/oom/slow/bad by
name), plus knobs for fault injection, all from the environment:

    HOSTILE_DELAY=lo,hi      sleep a random time in [lo, hi] s before each image (kills land anywhere)
    HOSTILE_SLOW_WRITE=n,s   write the output in n chunks, s seconds apart (kills land mid-write)

``OomRestorer``: the real engine (tiny models) with CUDA out-of-memory simulated at the restore
calls: the detector runs out of memory on images whose long side exceeds HOSTILE_OOM_ABOVE pixels,
and the generator on any batch of more than one face. So both fallbacks run: the pool's retry at a smaller scale, and the smaller face batch.

``FaultyWriteRestorer``: the real engine whose file writes fail with the errno named in the file
HOSTILE_WRITE_FAULT (ENOSPC, EROFS...) while that file exists: a full or read-only outbox where a
real one cannot be mounted.
"""

from __future__ import annotations

import errno
import os
import random
import time
from pathlib import Path
from typing import Any

from fake_restorer import FakeRestorer

from gpen_watch.restore.api import FileJob, FileResult


class CopyRestorer(FakeRestorer):
    def __init__(self, cfg: object, device: str, threads: int | None = None) -> None:
        super().__init__(cfg, device, threads)
        lo, _, hi = os.environ.get("HOSTILE_DELAY", "0,0").partition(",")
        self.delay = (float(lo), float(hi or lo))
        n, _, pause = os.environ.get("HOSTILE_SLOW_WRITE", "0,0").partition(",")
        self.write_chunks, self.write_pause = int(n), float(pause or 0)

    def _one(self, job: FileJob) -> FileResult:
        if self.delay[1] > 0:
            time.sleep(random.uniform(*self.delay))
        if self.write_chunks <= 1 or any(k in job.src.name for k in ("crash", "hang", "oom", "raise", "bad")):
            return super()._one(job)
        data = job.src.read_bytes()
        step = max(1, -(-len(data) // self.write_chunks))
        with open(job.dst, "xb") as f:
            for i in range(0, len(data), step):
                f.write(data[i : i + step])
                f.flush()
                time.sleep(self.write_pause)
            os.fsync(f.fileno())
        return FileResult(job.src, ok=True, dst=job.dst, faces=1, timings={"restore": 0.001})


def OomRestorer(cfg: Any, device: str, threads: int | None = None) -> Any:
    import torch

    from gpen_watch.restore.engines.restorer import Restorer

    restorer = Restorer(cfg, device, threads=threads)
    limit = int(os.environ.get("HOSTILE_OOM_ABOVE", "0"))
    detect, run = restorer.detector.detect, restorer.enhancer._run

    def oom(what: str) -> torch.cuda.OutOfMemoryError:
        return torch.cuda.OutOfMemoryError(
            f"CUDA out of memory. Tried to allocate 2.00 GiB ({what}, simulated)"
        )

    def detect_or_oom(images: list[Any]) -> Any:
        if any(max(im.shape[:2]) > limit for im in images):
            raise oom("detector")
        return detect(images)

    def run_or_oom(chunk: Any) -> Any:
        if len(chunk) > 1:
            raise oom(f"generator, batch of {len(chunk)}")
        return run(chunk)

    restorer.detector.detect = detect_or_oom  # type: ignore[method-assign]
    restorer.enhancer._run = run_or_oom  # type: ignore[method-assign]
    return restorer


def FaultyWriteRestorer(cfg: Any, device: str, threads: int | None = None) -> Any:
    from gpen_watch.imaging import save
    from gpen_watch.restore.engines import restorer as engine
    from gpen_watch.restore.stages import finish

    fault = Path(os.environ["HOSTILE_WRITE_FAULT"])

    def check() -> None:
        try:
            name = fault.read_text().strip()
        except FileNotFoundError:
            return
        code = getattr(errno, name)
        raise OSError(code, os.strerror(code))

    write_synced, copy_source = save._write_synced, finish.copy_source

    def faulty_write(tmp: Path, data: bytes) -> None:
        check()
        write_synced(tmp, data)

    def faulty_copy(image: Any, src: Path, dst: Path) -> str | None:
        try:
            check()
        except OSError as exc:
            raise save.write_error(dst, exc) from exc
        return copy_source(image, src, dst)

    save._write_synced = faulty_write  # type: ignore[assignment]
    # The finish stage calls copy_source through its own module's name.
    finish.copy_source = faulty_copy  # type: ignore[assignment]
    return engine.Restorer(cfg, device, threads=threads)
