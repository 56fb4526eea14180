"""Benchmark mode 4: the full daemon. Photos dropped into its inbox, timed until the last result lands.

The daemon (``gpen-watch run --no-tray``) runs as a subprocess with its own temporary user folders
(config, state, runtime, logs), so it never meets the user's own service or files. Its workers load
the engine through the ``GPEN_WATCH_RESTORER`` hook pointed at ``benchmarks.factory`` (the
real Restorer with the photo set's known faces). Timing starts once every worker reports ready
(models warm, as a running service is) and the photos are renamed into the inbox all at once; it
ends when the last result appears in the outbox. The watcher's settle time (watch.settle_seconds,
default 1 s) is part of what is measured: a user waits for it too.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.factory import (
    DETECT_REAL_ENV,
    FACTORY,
    LOG_ENV,
    PHOTOS_ENV,
    read_worker_logs,
    read_worker_rss,
)
from benchmarks.photos import PhotoSet
from benchmarks.results import ModeRun
from benchmarks.runner import BenchError, child_env
from benchmarks.spec import RunSpec
from benchmarks.stages import peak_rss_mb

_READY_TIMEOUT_S = 300.0


def run_daemon(
    spec: RunSpec,
    root: Path,
    workers: int,
    timeout: float,
    env: dict[str, str] | None = None,
    sets: dict[str, object] | None = None,
) -> ModeRun:
    """One daemon run with ``workers`` CPU workers (workers.cpu_workers), or one worker per GPU;
    ``sets``: further settings by dotted name (``workers.workers_per_device``...)."""
    photos = PhotoSet.load(spec.photo_set).photos
    folders = _folders(root)
    daemon_env = child_env(
        {
            **_user_dirs(folders["home"]),
            "GPEN_WATCH_RESTORER": FACTORY,
            PHOTOS_ENV: str(spec.photo_set),
            LOG_ENV: str(folders["measure"]),
            DETECT_REAL_ENV: "1" if spec.detect_real else "0",
            **(env or {}),
        }
    )
    log = (root / "daemon.log").open("w")
    proc = subprocess.Popen(
        _command(spec, folders, workers, sets),
        env=daemon_env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        status = _wait_ready(proc, daemon_env, root)
        for p in photos:  # same file system as the inbox: the drop is a rename
            shutil.copyfile(p.path, folders["staging"] / p.path.name)
        t0 = time.perf_counter()
        for p in photos:
            os.rename(folders["staging"] / p.path.name, folders["inbox"] / p.path.name)
        landed, failed = _wait_outputs(proc, folders, [p.path.name for p in photos], t0 + timeout, root)
        wall = time.perf_counter() - t0
        status = _status(daemon_env) or status
        worker_rss = [peak_rss_mb(w["pid"]) for w in status.get("workers", []) if w.get("pid")]
        parent_rss = status.get("rss_peak_mb")
    finally:
        _stop(proc)
        log.close()
    # The photos counted ok are the results that landed in the outbox.
    stages, generator, detector, _logged_ok, faces = read_worker_logs(folders["measure"])
    notes = [f"{failed} photo(s) failed"] if failed else []
    return ModeRun(
        mode=f"daemon-{workers}w",
        images=len(photos),
        ok=landed,
        faces=faces,
        wall_s=wall,
        stages=stages,
        generator_s=generator,
        detect_s=detector,
        rss_parent_mb=parent_rss,
        rss_workers_mb=[r for r in worker_rss if r is not None],
        rss_stages_mb=read_worker_rss(folders["measure"]),
        slots=max(1, len(status.get("workers", []))),
        settings={
            "workers": len(status.get("workers", [])),
            "threads_per_worker": [w.get("threads") for w in status.get("workers", [])],
            "in_flight_per_worker": [w.get("in_flight_cap") for w in status.get("workers", [])],
            **(sets or {}),
        },
        notes=notes,
    )


def _folders(root: Path) -> dict[str, Path]:
    names = ("home", "inbox", "outbox", "staging", "measure")
    folders = {n: root / n for n in names}
    for f in folders.values():
        f.mkdir(parents=True, exist_ok=True)
    # An empty config file: the defaults, never the user's own file.
    (folders["home"] / "defaults.toml").write_text("")
    return folders


def _user_dirs(home: Path) -> dict[str, str]:
    env = {"HOME": str(home)}
    for var, sub in [
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_CACHE_HOME", "cache"),
        ("XDG_STATE_HOME", "state"),
        ("XDG_DATA_HOME", "data"),
        ("XDG_RUNTIME_DIR", "run"),
    ]:
        (home / sub).mkdir(parents=True, exist_ok=True)
        env[var] = str(home / sub)
    (home / "run").chmod(0o700)
    return env


def run_command(folders: dict[str, Path], gpen: str, model_dir: Path) -> list[str]:
    """`gpen-watch run --no-tray` on the benchmark's own folders and model files."""
    return [
        sys.executable,
        "-m",
        "gpen_watch",
        "run",
        "--no-tray",
        "--config",
        str(folders["home"] / "defaults.toml"),
        "--inbox",
        str(folders["inbox"]),
        "--outbox",
        str(folders["outbox"]),
        "--model",
        gpen,
        "--model-dir",
        str(model_dir),
    ]


def _command(
    spec: RunSpec, folders: dict[str, Path], workers: int, extra: dict[str, object] | None = None
) -> list[str]:
    m = spec.models
    sets = {
        "restore.detector": m.detector,
        "restore.use_parse": str(m.use_parse).lower(),
        "restore.device": spec.device,
        "restore.max_side": spec.max_side,
        "restore.detect_max_side": spec.detect_max_side,
        "restore.detect_shrink_above": spec.detect_shrink_above,
        "restore.face_batch": spec.face_batch,
        "restore.precision": spec.precision,
        "restore.memory_mb": spec.memory_mb,
        "workers.devices": "cpu" if spec.device == "cpu" else "auto",
        "workers.cpu_workers": workers,
        "output.jpeg_quality": spec.jpeg_quality,
        **(extra or {}),
    }
    cmd = run_command(folders, m.gpen, m.model_dir)
    for key, value in sets.items():
        cmd += ["--set", f"{key}={value}"]
    return cmd


def _status(env: dict[str, str]) -> dict[str, Any] | None:
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "gpen_watch", "status", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        data = json.loads(proc.stdout)
    except (subprocess.TimeoutExpired, json.JSONDecodeError, ValueError):
        return None
    return data if data.get("ok") else None


def _wait_ready(proc: subprocess.Popen[bytes], env: dict[str, str], root: Path) -> dict[str, Any]:
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BenchError(f"the daemon exited ({proc.returncode}) before it was ready:\n{_log_tail(root)}")
        status = _status(env)
        workers = (status or {}).get("workers", [])
        if workers and all(w.get("state") in ("idle", "busy") for w in workers):
            return status or {}
        if status and status.get("problem"):
            raise BenchError(f"the daemon's workers cannot run: {status['problem']}\n{_log_tail(root)}")
        time.sleep(0.5)
    raise BenchError(f"the daemon's workers were not ready after {_READY_TIMEOUT_S:g} s:\n{_log_tail(root)}")


def _wait_outputs(
    proc: subprocess.Popen[bytes], folders: dict[str, Path], names: list[str], deadline: float, root: Path
) -> tuple[int, int]:
    """(results landed, photos failed) once every photo has one or the other."""
    wanted = set(names)
    failed_root = folders["outbox"].parent / "failed"
    while True:
        landed = _present(folders["outbox"], wanted)
        failed = _present(failed_root, wanted) if failed_root.exists() else 0
        if landed + failed >= len(wanted):
            return landed, failed
        if proc.poll() is not None:
            raise BenchError(f"the daemon exited ({proc.returncode}) during the run:\n{_log_tail(root)}")
        if time.perf_counter() > deadline:
            raise BenchError(
                f"only {landed} of {len(wanted)} results after the time limit:\n{_log_tail(root)}"
            )
        time.sleep(0.05)


def _present(folder: Path, wanted: set[str]) -> int:
    found = 0
    for _root, _dirs, files in os.walk(folder):
        found += sum(1 for f in files if f in wanted)
    return found


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # its own session: the daemon and its workers only
        proc.wait(timeout=30)


def _log_tail(root: Path, lines: int = 30) -> str:
    parts = []
    for path in [root / "daemon.log", *sorted((root / "home").rglob("gpen-watch.log"))]:
        if path.exists():
            parts.append("\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
    return "\n".join(parts)
