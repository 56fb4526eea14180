"""Restorer factory for the daemon's workers in benchmark mode 4.

The daemon loads its workers' restorer from ``GPEN_WATCH_RESTORER`` ("module:attr"); the benchmark
points it here so workers run the real engine with the photo set's known faces, and append what
they measured (stage timings per photo, generator and detector time) to a JSON-lines file per
worker for the benchmark to add up.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.engine import make_restorer
from benchmarks.engine_modes import parse_seconds, split_parse
from benchmarks.known_faces import FaceTable
from benchmarks.photos import PhotoSet
from benchmarks.stages import StageClock
from gpen_watch.config import RestoreConfig
from gpen_watch.restore.api import Engine, FileJob, FileResult, ModelSetWatch, PhotoProgress

if TYPE_CHECKING:
    from gpen_watch.restore.engines.restorer import Restorer

FACTORY = "benchmarks.factory:bench_restorer"
PHOTOS_ENV = "GPEN_BENCH_PHOTOS"  # the PhotoSet JSON
LOG_ENV = "GPEN_BENCH_LOG"  # folder for the workers' measurements
DETECT_REAL_ENV = "GPEN_BENCH_DETECT_REAL"  # "1": the detector's own faces (RunSpec.detect_real)


class _Measured:
    """A Restorer that writes one line per result (and its clocks so far) to its log."""

    def __init__(self, restorer: Restorer, clock: StageClock, log: Path) -> None:
        self.restorer = restorer
        self.clock = clock
        self.log = log
        # What it tells the worker (restore.api.Engine): nothing of the engine's own hints, as
        # the pool's defaults are what the benchmark measures.
        self.device_label = ""
        self.read_ahead = 0
        self.loaded = ""
        self.memory_budget_mb = 0
        self.models: ModelSetWatch | None = None
        self.steps = 0
        self.restoring = -1

    @property
    def engine_label(self) -> str:
        return str(getattr(self.restorer, "engine_label", ""))

    @property
    def engine_note(self) -> str:
        return str(getattr(self.restorer, "engine_note", ""))

    @property
    def progress(self) -> tuple[PhotoProgress, ...]:
        return self.restorer.progress

    def restore_files(self, jobs: Iterable[FileJob | None]) -> Iterator[FileResult]:
        for res in self.restorer.restore_files(jobs):
            line = {
                "src": str(res.src),
                "ok": res.ok,
                "faces": res.faces,
                "timings": res.timings,
                "rss_mb": res.rss_mb,
                "at": time.time(),
                "clock": dict(self.clock.totals),
                "parse_s": parse_seconds(self.restorer.enhancer),
            }
            with self.log.open("a") as fh:
                fh.write(json.dumps(line) + "\n")
            yield res

    def stop(self) -> None:
        self.restorer.stop()

    def close(self) -> None:
        self.restorer.close()


def bench_restorer(cfg: RestoreConfig, device: str, threads: int | None = None) -> Engine:
    photos = PhotoSet.load(Path(os.environ[PHOTOS_ENV]))
    clock = StageClock()
    table = None if os.environ.get(DETECT_REAL_ENV) == "1" else FaceTable(photos.faces)
    restorer = make_restorer(cfg, table, device, threads, clock=clock)
    log = Path(os.environ[LOG_ENV]) / f"worker-{os.getpid()}.jsonl"
    return _Measured(restorer, clock, log)


def read_worker_rss(folder: Path) -> dict[str, float]:
    """Highest resident memory (MB) of any worker when each stage of a photo ended."""
    out: dict[str, float] = {}
    for path in sorted(folder.glob("worker-*.jsonl")):
        for x in path.read_text().splitlines():
            if x.strip():
                for stage, mb in json.loads(x).get("rss_mb", {}).items():
                    out[stage] = max(mb, out.get(stage, 0.0))
    return out


def read_worker_logs(folder: Path) -> tuple[dict[str, float], float, float, int, int]:
    """(stage totals, generator s, detector s, photos ok, faces) over all workers' logs."""
    stages = StageClock()
    detector = parse = 0.0
    ok = faces = 0
    for path in sorted(folder.glob("worker-*.jsonl")):
        lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
        for line in lines:
            for k, v in line["timings"].items():
                stages.add(k, v)
            ok += bool(line["ok"])
            faces += line["faces"] if line["ok"] else 0
        if lines:
            detector += float(lines[-1]["clock"].get("detector", 0.0))
            parse += float(lines[-1].get("parse_s", 0.0))
    # The engine's "restore" stage is the wall time of its generator passes, split over the faces.
    totals = split_parse(stages.totals, parse)
    return totals, stages.totals.get("restore", 0.0), detector, ok, faces
