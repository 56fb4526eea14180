"""Driving a real `gpen-watch run` subprocess, and dropping files into its inbox.

The service runs with the test's isolated user folders (the environment of the test process, set
by the autouse fixture in tests/conftest.py), so ``control.request`` and ``Journal.open`` here
reach that service and its journal. Workers run either the real engine with the tiny models or a
stand-in from tests/hostile/hostile_restorer.py (no torch, milliseconds per image).
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpen_watch import paths
from gpen_watch.service import control

TESTS_DIR = Path(__file__).resolve().parents[1]
REPO = TESTS_DIR.parent
# The stand-in restorer: copies the photo, with the fault modes of tests/fake_restorer.py and more.
COPY = "hostile.hostile_restorer:CopyRestorer"
START_TIMEOUT = 90.0


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha(path: Path) -> str:
    return sha256(path.read_bytes())


def finished(s: dict[str, Any]) -> int:
    q = s["queue"]
    return q["done"] + q["failed"] + q["unsupported"] + q["duplicate"]


def real_engine_args(models: Any) -> list[str]:
    """`gpen-watch run` options for the real engine on the tiny random-weight models (CPU)."""
    return ["--model", str(models.gpen), "--model-dir", str(models.model_dir),
            "--set", "restore.detector=retinaface_mobile0.25", "--set", "restore.use_parse=false",
            "--face-batch", "4", "--device", "cpu"]


class Service:
    """One `gpen-watch run` on ``root/inbox`` -> ``root/outbox`` (failed/ and originals/ beside it)."""

    def __init__(self, root: Path, *extra: str, restorer: str | None = COPY, env: dict[str, str] | None = None,
                 settle: float = 0.2) -> None:
        self.root = root
        self.inbox = root / "inbox"
        self.outbox = root / "outbox"
        self.failed = root / "failed"
        self.originals = root / "originals"
        self.extra = list(extra)
        self.settle = settle
        self.env = dict(os.environ)
        self.env["PYTHONPATH"] = os.pathsep.join([str(TESTS_DIR), self.env.get("PYTHONPATH", "")]).strip(os.pathsep)
        self.env.pop("GPEN_WATCH_RESTORER", None)
        if restorer is not None:
            self.env["GPEN_WATCH_RESTORER"] = restorer
        self.env.update(env or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0
        self.inbox.mkdir(parents=True, exist_ok=True)

    def command(self) -> list[str]:
        return [sys.executable, "-m", "gpen_watch", "run", "--no-tray", "--inbox", str(self.inbox),
                "--outbox", str(self.outbox), "--set", f"watch.settle_seconds={self.settle}",
                "--stop-grace", "5", *self.extra]

    def start(self, wait: bool = True) -> Service:
        self.runs += 1
        self.stderr = self.root / f"stderr-{self.runs}.txt"
        with open(self.stderr, "wb") as err:
            self.proc = subprocess.Popen(self.command(), env=self.env, stdout=subprocess.DEVNULL, stderr=err)
        if wait:
            self.wait(lambda s: bool(s["workers"]) and all(w["state"] in ("idle", "busy") for w in s["workers"]),
                      START_TIMEOUT, "service ready")
        return self

    def status(self, timeout: float = 10.0) -> dict[str, Any]:
        return control.request("status", timeout=timeout)

    def request(self, cmd: str) -> dict[str, Any]:
        return control.request(cmd)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait(self, cond: Callable[[dict[str, Any]], bool], timeout: float = 60.0,
             what: str = "condition") -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        last: dict[str, Any] = {}
        while time.monotonic() < deadline:
            if not self.alive():
                raise AssertionError(f"service exited ({self.proc and self.proc.returncode}) waiting for {what}\n"
                                     f"{self.logs()}")
            try:
                last = self.status()
                if cond(last):
                    return last
            except control.ControlError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}; last status {last}\n{self.logs()}")

    def wait_idle(self, n: int, timeout: float = 120.0) -> dict[str, Any]:
        """Until at least n jobs ended and nothing is queued, running, in flight or settling."""
        def idle(s: dict[str, Any]) -> bool:
            q = s["queue"]
            return (finished(s) >= n and q["queued"] == 0 and q["running"] == 0 and q["in_flight"] == 0
                    and s["settling"] == 0)
        return self.wait(idle, timeout, f"{n} jobs finished and the service idle")

    def stop(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        control.request("stop")
        return self.proc.wait(timeout)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def log_text(self) -> str:
        log = paths.log_dir() / "gpen-watch.log"
        return log.read_text(errors="replace") if log.exists() else ""

    def logs(self) -> str:
        text = self.log_text()[-8000:] or "(no log)"
        err = self.stderr.read_text(errors="replace")[-3000:] if self.runs and self.stderr.exists() else ""
        return f"--- log ---\n{text}\n--- stderr ---\n{err}"

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def write_atomic(path: Path, data: bytes) -> Path:
    """Write the way a careful copier does: under a hidden temp name, then rename into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.part"
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path


def write_slowly(path: Path, data: bytes, chunks: int = 10, pause: float = 0.1) -> Path:
    """Write in place (no rename) in several chunks, each pause apart: a copy still in progress."""
    path.parent.mkdir(parents=True, exist_ok=True)
    step = max(1, -(-len(data) // chunks))
    with open(path, "wb") as f:
        for i in range(0, len(data), step):
            f.write(data[i:i + step])
            f.flush()
            time.sleep(pause)
    return path
