"""The service's own costs: idle CPU and memory of the parent, and drop-to-start latency.

    python -m benchmarks.service [--idle 30] [--drops 5] [--out results/service-<date>]

Runs a real ``gpen-watch run --no-tray`` (tiny random-weight models: the figures here are about
the service, not the model), waits for its worker to be warm, then

* idle: samples the parent's CPU time from /proc over ``--idle`` seconds with nothing to do,
  and its resident memory (targets: under 1 % of one core, under 150 MB);
* drop-to-start: drops one photo at a time and reads from the journal when a worker started it
  (includes the settle time, ``watch.settle_seconds``, which a user waits for as well) and when
  its result landed.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.daemon_mode import _folders, _status, _stop, _user_dirs, _wait_ready, run_command
from benchmarks.models import write_models
from benchmarks.runner import child_env

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.service", description=__doc__.splitlines()[0])
    ap.add_argument("--idle", type=float, default=30.0, help="seconds of idle sampling")
    ap.add_argument("--drops", type=int, default=5, help="single-photo drops for the latency figure")
    ap.add_argument("--settle", type=float, default=1.0, help="watch.settle_seconds")
    ap.add_argument("--out", type=Path, default=Path("results") / f"service-{time.strftime('%Y%m%d-%H%M')}")
    args = ap.parse_args(argv)
    if not Path("/proc/self/stat").exists():
        print("this benchmark reads /proc: Linux only", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gpen-bench-service-") as tmp:
        result = _run(Path(tmp), args)
    (args.out / "service.json").write_text(json.dumps(result, indent=2))
    _print(result)
    print(f"\nwrote {args.out / 'service.json'}")
    return 0


def _run(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    models = write_models(root / "models", tiny=True)
    folders = _folders(root)
    env = child_env(_user_dirs(folders["home"]))
    cmd = [
        *run_command(folders, models.gpen, models.model_dir),
        "--device",
        "cpu",
        "--set",
        f"restore.detector={models.detector}",
        "--set",
        "restore.use_parse=false",
        "--set",
        f"watch.settle_seconds={args.settle}",
    ]
    log = (root / "daemon.log").open("w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        t_start = time.perf_counter()
        status = _wait_ready(proc, env, root)
        ready_s = time.perf_counter() - t_start
        time.sleep(2.0)  # let start-up work (first scan, imports) finish before sampling idle
        c0, w0 = cpu_seconds(proc.pid), time.perf_counter()
        time.sleep(args.idle)
        idle_cpu = (cpu_seconds(proc.pid) - c0) / (time.perf_counter() - w0)
        idle_rss = rss_mb(proc.pid)
        latencies, turnarounds = _drops(folders, env, args.drops)
        status = _status(env) or status
    finally:
        _stop(proc)
        log.close()
    return {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "cores": os.cpu_count(),
        "settle_seconds": args.settle,
        "ready_s": round(ready_s, 2),
        "idle_seconds": args.idle,
        "idle_cpu_percent_of_one_core": round(100 * idle_cpu, 3),
        "parent_rss_mb": round(idle_rss, 1),
        "parent_rss_peak_mb": status.get("rss_peak_mb"),
        "parent_imports_torch": status.get("torch_loaded"),
        "drop_to_start_s": [round(x, 3) for x in latencies],
        "drop_to_output_s": [round(x, 3) for x in turnarounds],
    }


def _drops(folders: dict[str, Path], env: dict[str, str], n: int) -> tuple[list[float], list[float]]:
    """Drop photos one at a time; (drop -> worker started, drop -> output present) for each."""
    import cv2
    from skimage import data

    staging = folders["staging"]
    photo = data.astronaut()[:, :, ::-1].copy()
    journal = Path(env["XDG_STATE_HOME"]) / "gpen-watch" / "journal.sqlite3"
    starts, ends = [], []
    for i in range(n):
        name = f"drop-{i}.jpg"
        photo[0, 0] = i  # new content each time: a re-dropped identical photo is a duplicate, not work
        cv2.imwrite(str(staging / name), photo)
        dropped_wall, t0 = time.time(), time.perf_counter()
        os.rename(staging / name, folders["inbox"] / name)
        while not any(p.name == name for p in folders["outbox"].rglob("*.jpg")):
            if time.perf_counter() - t0 > 120:
                raise RuntimeError(f"{name}: no result after 120 s")
            time.sleep(0.01)
        ends.append(time.perf_counter() - t0)
        starts.append(_started(journal, name) - dropped_wall)
    return starts, ends


def _started(journal: Path, name: str) -> float:
    with sqlite3.connect(f"file:{journal}?mode=ro", uri=True) as conn:
        row = conn.execute(
            "SELECT started FROM jobs WHERE source LIKE ? ORDER BY id DESC LIMIT 1", (f"%{name}",)
        ).fetchone()
    return float(row[0])


def _print(r: dict[str, Any]) -> None:
    med = statistics.median
    print(f"service benchmark, {r['date']}, {r['cores']} cores (tiny models: service costs only)")
    print(f"  workers ready after start      {r['ready_s']:.1f} s")
    print(
        f"  parent idle CPU                {r['idle_cpu_percent_of_one_core']:.2f} % of one core "
        f"over {r['idle_seconds']:g} s (target < 1 %)"
    )
    print(
        f"  parent RSS                     {r['parent_rss_mb']:.0f} MB, peak {r['parent_rss_peak_mb']} MB "
        "(target < 150 MB)"
    )
    print(f"  parent imports torch           {r['parent_imports_torch']}")
    print(
        f"  drop -> worker starts          median {med(r['drop_to_start_s']):.2f} s "
        f"(settle time {r['settle_seconds']:g} s included)"
    )
    print(f"  drop -> result in outbox       median {med(r['drop_to_output_s']):.2f} s")


if __name__ == "__main__":
    raise SystemExit(main())
