"""``python -m benchmarks.payload``: what sending a photo as bytes costs a worker on this machine.

A local worker reads the original and writes the outbox's temp file itself (paths). A remote
worker gets the bytes (``dispatch.payload``): the service reads the file, pickles it through a
pipe, the worker writes it to its scratch folder, and the output travels back the same way. This
times that extra round trip for one 12 MP JPEG, through a real spawned process and Pipe, with no
restoration in between (the engine's own time is the same either way).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path

import numpy as np

from gpen_watch.dispatch import payload
from gpen_watch.restore.api import FileJob, FileResult


def _echo(conn: Connection, scratch_root: str) -> None:
    """The worker's side: write the photo to scratch, 'restore' it (a copy), send the output."""
    scratch = payload.Scratch(Path(scratch_root))
    while True:
        msg = conn.recv()
        if msg is None:
            break
        key, photo = msg
        job = scratch.job(key, photo)
        job.dst.write_bytes(job.src.read_bytes())
        conn.send(scratch.result(FileResult(job.src, True, dst=job.dst, faces=1)))
    scratch.close()
    conn.close()


def make_jpeg(path: Path, width: int = 4000, height: int = 3000) -> None:
    import cv2

    rng = np.random.default_rng(0)
    # Smooth noise compresses like a photo (a flat image would make the bytes unrealistically few).
    small = rng.integers(0, 255, (height // 16, width // 16, 3), dtype=np.uint8)
    img = cv2.resize(small, (width, height), interpolation=cv2.INTER_CUBIC)
    cv2.imwrite(str(path), img, [cv2.IMWRITE_JPEG_QUALITY, 92])


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.payload", description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=20)
    args = p.parse_args()
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        src = root / "photo.jpg"
        make_jpeg(src)
        out = root / "out"
        out.mkdir()
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_echo, args=(child, str(root / "scratch")))
        proc.start()
        child.close()
        times: list[float] = []
        for k in range(args.rounds):
            job = FileJob(src, out / f".photo.jpg.tmp{k}")
            t0 = time.perf_counter()
            parent.send((k, payload.pack(job)))
            res = payload.unpack(parent.recv(), job)
            times.append(time.perf_counter() - t0)
            assert res.ok, res.error
            job.dst.unlink()
        parent.send(None)
        proc.join()
        parent.close()
        size = src.stat().st_size
    ms = sorted(t * 1000 for t in times)
    print(
        f"12 MP JPEG of {size / 1e6:.1f} MB, there and back as bytes: median {statistics.median(ms):.1f} ms, "
        f"min {ms[0]:.1f} ms, max {ms[-1]:.1f} ms over {len(ms)} rounds"
    )


if __name__ == "__main__":
    main()
