"""Modes against a checkout of the real upstream GPEN: its weights folder, its runs, the agreement.

``--upstream PATH`` adds two modes: "real-upstream" (one fresh upstream process per photo, the seed
recipe) and "real-warm" (one upstream process over the whole folder). The same random weights
gpen-watch loads are written again under upstream's file names, so both sides run the same models.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from benchmarks.known_faces import FaceTable
from benchmarks.models import BenchModels
from benchmarks.photos import PhotoSet
from benchmarks.results import ModeRun
from benchmarks.runner import BenchError, _tail, child_env
from benchmarks.spec import RunSpec

REAL_MODES = ("real-upstream", "real-warm")
# Upstream's file names under its weights/ folder, by the role each model plays.
_UPSTREAM_NAMES = {"detector": "RetinaFace-R50.pth", "parser": "ParseNet-latest.pth"}


def write_upstream_weights(models: BenchModels, checkout: Path, base: Path) -> None:
    """The benchmark's model files again, under ``base/weights`` with upstream's names."""
    from gpen_watch.catalog import registry

    if not models.use_parse or models.detector != "retinaface_resnet50":
        raise BenchError("the real-upstream modes need --parse and RetinaFace-R50: upstream always runs both")
    weights = base / "weights"
    weights.mkdir(parents=True, exist_ok=True)
    gpen = registry.get_spec(models.gpen)
    # The layouts are the same (state dicts with the same keys; the detector's "module." prefix is
    # removed by upstream's loader), so the files are shared, not converted.
    pairs = {
        gpen.filename: f"{models.gpen}.pth",
        registry.detector_spec(models.detector).filename: _UPSTREAM_NAMES["detector"],
        registry.parser_spec().filename: _UPSTREAM_NAMES["parser"],
    }
    for ours, theirs in pairs.items():
        shutil.copyfile(models.model_dir / ours, weights / theirs)
    cmd = [sys.executable, "-m", "benchmarks.real_upstream", "--setup-sr", str(checkout), str(base)]
    proc = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise BenchError(
            f"cannot build upstream's SR weights (exit {proc.returncode}):\n{_tail(proc.stderr)}"
        )


def check_checkout(path: Path) -> Path:
    """``path`` if it looks like a GPEN checkout, else a BenchError saying what to do."""
    needed = ("face_enhancement.py", "face_model/gpen_model.py", "face_parse/parse_model.py")
    missing = [n for n in needed if not (path / n).is_file()]
    if missing:
        raise BenchError(
            f"{path}: not a checkout of yangxy/GPEN (missing {', '.join(missing)}); "
            "clone https://github.com/yangxy/GPEN and pass its folder to --upstream"
        )
    return path.resolve()


def run_real(mode: str, spec: RunSpec, checkout: Path, base: Path, out_dir: Path, timeout: float) -> ModeRun:
    """One run of "real-upstream" (a process per photo) or "real-warm" (one process)."""
    photos = PhotoSet.load(spec.photo_set).photos
    out_dir.mkdir(parents=True, exist_ok=True)
    groups = [[p.path] for p in photos] if mode == "real-upstream" else [[p.path for p in photos]]
    reports, walls = [], []
    t0 = time.perf_counter()
    for group in groups:
        started = time.perf_counter()
        cmd = [
            sys.executable,
            "-m",
            "benchmarks.real_upstream",
            str(checkout),
            str(base),
            str(spec.photo_set),
            str(out_dir),
            str(spec.models.size),
            *map(str, group),
        ]
        proc = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise BenchError(f"upstream GPEN failed (exit {proc.returncode}):\n{_tail(proc.stderr)}")
        reports.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        walls.append(time.perf_counter() - started)
    wall = time.perf_counter() - t0
    startup = sum(w - r["work_s"] for r, w in zip(reports, walls))
    rss = [r["rss_mb"] for r in reports if r.get("rss_mb") is not None]
    if mode == "real-warm":
        # Mode 2's convention: the clock starts once the models are in.
        wall -= startup
    return ModeRun(
        mode=mode,
        images=len(photos),
        ok=sum(len(g) for g in groups),
        faces=sum(r["faces"] for r in reports),
        wall_s=wall,
        load_s=startup if mode == "real-warm" else 0.0,
        stages={"startup+load": startup} if mode == "real-upstream" else {},
        rss_workers_mb=rss if mode == "real-upstream" else [],
        rss_parent_mb=max(rss) if mode == "real-warm" and rss else None,
        settings={"checkout": str(checkout), "processes": len(groups), "precision": "fp32"},
    )


def _env() -> dict[str, str]:
    # Upstream compiles its CUDA kernels at import when it sees a GPU; the comparison is on the CPU.
    env = child_env({"CUDA_VISIBLE_DEVICES": ""})
    for var in ("MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_"):
        env.pop(var, None)  # upstream as shipped: glibc's default allocator settings
    return env


@dataclass(frozen=True)
class Agreement:
    """PSNR (dB) of one run's outputs against another's, over each known face's box."""

    faces: int
    min_db: float
    median_db: float


def face_box_psnr(photo_set: Path, ours: Path, theirs: Path) -> Agreement | None:
    """Per-face-box PSNR between two output folders of the same photos; None if none compare."""
    photos = PhotoSet.load(photo_set)
    table = FaceTable(photos.faces)
    values: list[float] = []
    for p in photos.photos:
        a = cv2.imread(str(ours / p.path.name), cv2.IMREAD_COLOR)
        b = cv2.imread(str(theirs / p.path.name), cv2.IMREAD_COLOR)
        if a is None or b is None or a.shape != b.shape:
            continue
        for face in table.faces_for(*a.shape[:2]):
            x1, y1 = np.maximum(face.box[:2].astype(int), 0)
            x2, y2 = face.box[2:].astype(int)
            da = a[y1:y2, x1:x2].astype(np.float64) - b[y1:y2, x1:x2].astype(np.float64)
            if da.size:
                mse = float(np.mean(da**2))
                values.append(99.0 if mse == 0 else 10 * np.log10(255.0**2 / mse))
    if not values:
        return None
    return Agreement(len(values), round(min(values), 2), round(float(np.median(values)), 2))
