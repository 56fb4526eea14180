"""Starting the measured runs from the benchmark's parent process.

Mode 1 is a loop starting ``benchmarks.upstream`` once per photo, like upstream's
``batch_infer.sh``: one process at a time on CPU, round-robin over the GPUs (one process per GPU at
a time) when there are any. Modes 2 and 3 run in one fresh child process each.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

from benchmarks.photos import PhotoSet
from benchmarks.results import ModeRun
from benchmarks.spec import RunSpec


class BenchError(RuntimeError):
    """A measured run failed; the message carries the child's last output."""


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    # The children import this checkout's gpen_watch and benchmarks (the wheel has no benchmarks).
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra or {})
    return env


def run_in_child(
    mode: str,
    spec_path: Path,
    out_dir: Path,
    work: Path,
    timeout: float,
    env: dict[str, str] | None = None,
    warm_up: bool = False,
) -> ModeRun:
    """Mode 2 or 3 (or 3 on another runtime, ``benchmarks.engine_modes``) in a fresh process;
    ``warm_up``: the engine on the first photo only, outside the timed rounds."""
    result = work / f"{mode}-{time.monotonic_ns()}.json"
    cmd = [sys.executable, "-m", "benchmarks.child", mode, str(spec_path), str(out_dir), str(result)]
    cmd += ["--warm-up"] if warm_up else []
    proc = subprocess.run(cmd, env=child_env(env), capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0 or not result.exists():
        raise BenchError(f"{mode} run failed (exit {proc.returncode}):\n{_tail(proc.stderr)}")
    return ModeRun.from_dict(json.loads(result.read_text()))


def run_upstream(spec: RunSpec, spec_path: Path, out_dir: Path, gpus: list[int], timeout: float) -> ModeRun:
    """Mode 1: one fresh process per photo."""
    photos = PhotoSet.load(spec.photo_set).photos
    out_dir.mkdir(parents=True, exist_ok=True)
    lanes: list[str | None] = [str(g) for g in gpus] or [None]
    todo = deque(photos)
    running: dict[str | None, tuple[subprocess.Popen[str], float]] = {}
    reports: list[dict[str, Any]] = []
    walls: list[float] = []
    t0 = time.perf_counter()
    deadline = t0 + timeout
    while todo or running:
        for lane in lanes:
            if lane not in running and todo:
                photo = todo.popleft()
                extra = {"CUDA_VISIBLE_DEVICES": lane} if lane is not None else {}
                cmd = [
                    sys.executable,
                    "-m",
                    "benchmarks.upstream",
                    str(spec_path),
                    str(photo.path),
                    str(out_dir / photo.path.name),
                ]
                proc = subprocess.Popen(
                    cmd, env=child_env(extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
                )
                running[lane] = (proc, time.perf_counter())
        for lane, (proc, started) in list(running.items()):
            if proc.poll() is None:
                continue
            out, err = proc.communicate()
            del running[lane]
            walls.append(time.perf_counter() - started)
            if proc.returncode != 0:
                raise BenchError(f"upstream-style process failed (exit {proc.returncode}):\n{_tail(err)}")
            reports.append(json.loads(out.strip().splitlines()[-1]))
        if time.perf_counter() > deadline:
            for proc, _ in running.values():
                proc.kill()
            raise BenchError(f"upstream-style runs took longer than {timeout:g} s")
        time.sleep(0.01)
    wall = time.perf_counter() - t0
    stages: dict[str, float] = {}
    for rep, proc_wall in zip(reports, walls):
        for k, v in rep["stages"].items():
            stages[k] = stages.get(k, 0.0) + v
        # Interpreter start, imports and model loading: paid again for every photo.
        stages["startup+load"] = stages.get("startup+load", 0.0) + proc_wall - rep["work_s"]
    rss = [r["rss_mb"] for r in reports if r.get("rss_mb") is not None]
    return ModeRun(
        mode="upstream",
        images=len(photos),
        ok=len(reports),
        faces=sum(r["faces"] for r in reports),
        wall_s=wall,
        stages=stages,
        generator_s=sum(r["generator_s"] for r in reports),
        detect_s=stages.get("detect", 0.0),
        rss_workers_mb=[max(rss)] if rss else [],
        slots=len(lanes),
        settings={
            "face_batch": 1,
            "precision": "fp32",
            "processes_at_once": len(lanes),
            "load_s_median": sorted(r["load_s"] for r in reports)[len(reports) // 2] if reports else 0.0,
        },
    )


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join((text or "").strip().splitlines()[-lines:])
