"""The gpen-watch engine (``Restorer``) as the benchmark runs it: known faces, instrumented stages.

Used in-process by modes 2-3 (through ``benchmarks.child``) and inside the daemon's workers
(through ``benchmarks.factory``), so the engine is built the same way in both.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.engine_modes import parse_seconds, split_parse
from benchmarks.known_faces import FaceTable, KnownFaces
from benchmarks.photos import PhotoSet
from benchmarks.results import ModeRun
from benchmarks.spec import RunSpec
from benchmarks.stages import StageClock, peak_rss_mb
from gpen_watch.config import RestoreConfig

if TYPE_CHECKING:
    from gpen_watch.restore.engines.restorer import Restorer


def make_restorer(
    cfg: RestoreConfig,
    table: FaceTable | None,
    device: str | None = None,
    threads: int | None = None,
    io_threads: int | None = None,
    clock: StageClock | None = None,
) -> Restorer:
    """A Restorer whose detector network runs but whose faces come from ``table`` (None: the
    network's own, for the real MobileNet weights).

    With ``clock``, the detector network's wall time is summed into it ("detector"); the engine
    reports every other stage, pre-scale and generator ("restore") included, in its results.
    """
    from gpen_watch.restore.engines.networks import open_networks
    from gpen_watch.restore.engines.restorer import Restorer
    from gpen_watch.restore.stages.detect import FaceDetector

    # The detector network of restore.engine, made as the engine's own loader makes it
    # (``restore.engines.loader``): with engine = onnx the detect stage times ONNX Runtime.
    nets = open_networks(cfg, download=False, threads=threads)
    place = nets.placement(device or cfg.device)
    network = FaceDetector(
        nets.detector(cfg.detector, place),
        place.device,
        threshold=cfg.detect_threshold,
        max_side=cfg.detect_max_side,
        shrink_above=cfg.detect_shrink_above,
    )
    detector = KnownFaces(network, table, clock)
    return Restorer(
        cfg, device=device, threads=threads, io_threads=io_threads, download=False, detector=detector
    )


def face_table(spec: RunSpec, photos: PhotoSet) -> FaceTable | None:
    """The photo set's known faces, or None where the spec finds them with the real detector."""
    return None if spec.detect_real else FaceTable(photos.faces)


def run_engine(spec: RunSpec, out_dir: Path, mode: str = "engine", limit: int | None = None) -> ModeRun:
    """Mode 3: all photos (or the first ``limit``) through one warm ``Restorer.restore_files``
    call (the `restore` path), on the runtime ``spec.engine`` names."""
    from gpen_watch.restore.api import FileJob

    photos = PhotoSet.load(spec.photo_set)
    if limit is not None:
        photos = dataclasses.replace(photos, photos=photos.photos[:limit])
    clock = StageClock()
    t0 = time.perf_counter()
    restorer = make_restorer(
        spec.restore_config(), face_table(spec, photos), spec.device, spec.threads, spec.io_threads, clock
    )
    load_s = time.perf_counter() - t0
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = [FileJob(p.path, out_dir / p.path.name, jpeg_quality=spec.jpeg_quality) for p in photos.photos]
    stages = StageClock()
    ok = faces = 0
    failed: list[str] = []
    f1, c1, t1 = _minor_faults(), time.process_time(), time.perf_counter()
    with restorer:
        for res in restorer.restore_files(jobs):
            for stage, seconds in res.timings.items():
                stages.add(stage, seconds)
            if res.ok:
                ok += 1
                faces += res.faces
            else:
                failed.append(f"{res.src.name}: {res.error}")
        wall, cpu = time.perf_counter() - t1, time.process_time() - c1
        parse_s = parse_seconds(restorer.enhancer)
    return ModeRun(
        mode=mode,
        images=len(jobs),
        ok=ok,
        faces=faces,
        wall_s=wall,
        load_s=load_s,
        stages=split_parse(stages.totals, parse_s),
        # The engine's "restore" stage is the wall time of its generator passes, split over the faces.
        generator_s=stages.totals.get("restore", 0.0),
        detect_s=clock.totals.get("detector", 0.0),
        cpu_s=cpu,
        rss_parent_mb=peak_rss_mb(),
        rss_stages_mb=dict(restorer.stage_rss_mb),
        settings={
            "face_batch": restorer.face_batch,
            "memory_budget_mb": restorer.memory_budget_mb,
            "read_ahead": restorer.read_ahead,
            "threads": restorer.threads,
            "io_threads": restorer.io_threads,
            "precision": restorer.place.precision,
            "parse_precision": spec.parse_precision,
            "device": str(restorer.place.device),
            "malloc_tuned": _malloc_tuned(),
            "minor_page_faults": _minor_faults() - f1,
            "engine": spec.engine,
            "provider": spec.provider if spec.engine == "onnx" else None,
            # What the engine says runs its networks, and why that differs from what was asked.
            "engine_label": getattr(restorer, "engine_label", ""),
            "engine_note": getattr(restorer, "engine_note", ""),
            # Why photos failed: a mode that restores nothing must say so, not print zeros.
            "failed": failed,
        },
    )


def run_warm(spec: RunSpec, out_dir: Path) -> ModeRun:
    """Mode 2: one warm process, the upstream recipe photo after photo (one face at a time, fp32)."""
    from benchmarks.upstream import UpstreamStyle

    photos = PhotoSet.load(spec.photo_set)
    pipeline = UpstreamStyle(spec)
    out_dir.mkdir(parents=True, exist_ok=True)
    ok = faces = 0
    f0, c0, t0 = _minor_faults(), time.process_time(), time.perf_counter()
    for p in photos.photos:
        faces += pipeline.restore(p.path, out_dir / p.path.name)
        ok += 1
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    import torch

    return ModeRun(
        mode="warm-loop",
        images=len(photos.photos),
        ok=ok,
        faces=faces,
        wall_s=wall,
        load_s=pipeline.load_s,
        stages=split_parse(pipeline.clock.totals, parse_seconds(pipeline.enhancer)),
        generator_s=pipeline.generator.totals.get("generator", 0.0),
        detect_s=pipeline.clock.totals.get("detect", 0.0),
        cpu_s=cpu,
        rss_parent_mb=peak_rss_mb(),
        settings={
            "face_batch": 1,
            "threads": torch.get_num_threads(),
            "precision": "fp32",
            "malloc_tuned": _malloc_tuned(),
            "minor_page_faults": _minor_faults() - f0,
        },
    )


def _minor_faults() -> int:
    """Minor page faults of this process so far: shows whether the allocator reuses memory."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _malloc_tuned() -> bool:
    from gpen_watch.restore.runtime import device

    return bool(getattr(device, "_malloc_tuned", False))
