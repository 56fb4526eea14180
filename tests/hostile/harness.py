"""Driving a real `gpen-watch run` subprocess, and dropping files into its inbox.

The service runs with the test's isolated user folders (the environment of the test process, set
by the autouse fixture in tests/conftest.py), so ``control.request`` and ``Journal.open`` here
reach that service and its journal. Workers run either the real engine with the tiny models or a
stand-in from tests/hostile/hostile_restorer.py (no torch, milliseconds per image). Starting,
waiting on and stopping the service is tests/service_harness.py, shared with tests/test_daemon.py;
this suite's defaults and extras are here.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

if __package__ == "tests.hostile":  # python -m tests.hostile.stress, from the repository root
    from ..service_harness import (
        TESTS_DIR,
        ServiceProcess,
        finished,
        real_engine_args,
        services_fixture,
        write_atomic,
    )
else:  # pytest puts tests/ on sys.path and imports this package as `hostile`
    from service_harness import (
        TESTS_DIR,
        ServiceProcess,
        finished,
        real_engine_args,
        services_fixture,
        write_atomic,
    )

__all__ = [
    "COPY",
    "REPO",
    "START_TIMEOUT",
    "TESTS_DIR",
    "Service",
    "file_sha",
    "finished",
    "real_engine_args",
    "services_fixture",
    "sha256",
    "write_atomic",
    "write_slowly",
]

REPO = TESTS_DIR.parent
# The stand-in restorer: copies the photo, with the fault modes of tests/fake_restorer.py and more.
COPY = "hostile.hostile_restorer:CopyRestorer"
START_TIMEOUT = 90.0


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha(path: Path) -> str:
    return sha256(path.read_bytes())


class Service(ServiceProcess):
    """One `gpen-watch run` on ``root/inbox`` -> ``root/outbox``, its inbox made at once; the stand-in
    restorer unless ``restorer`` names another (None: the real engine)."""

    start_timeout = START_TIMEOUT
    wait_timeout = 60.0
    log_tail = 8000

    def __init__(
        self,
        root: Path,
        *extra: str,
        restorer: str | None = COPY,
        env: dict[str, str] | None = None,
        settle: float = 0.2,
    ) -> None:
        super().__init__(root, *extra, restorer=restorer, env=env, settle=settle)
        self.inbox.mkdir(parents=True, exist_ok=True)

    def wait_idle(self, n: int, timeout: float = 120.0) -> dict[str, Any]:
        """Until at least n jobs ended and nothing is queued, running, in flight or settling."""

        def idle(s: dict[str, Any]) -> bool:
            q = s["queue"]
            return (
                finished(s) >= n
                and q["queued"] == 0
                and q["running"] == 0
                and q["in_flight"] == 0
                and s["settling"] == 0
            )

        return self.wait(idle, timeout, f"{n} jobs finished and the service idle")


def write_slowly(path: Path, data: bytes, chunks: int = 10, pause: float = 0.1) -> Path:
    """Write in place (no rename) in several chunks, each pause apart: a copy still in progress."""
    path.parent.mkdir(parents=True, exist_ok=True)
    step = max(1, -(-len(data) // chunks))
    with open(path, "wb") as f:
        for i in range(0, len(data), step):
            f.write(data[i : i + step])
            f.flush()
            time.sleep(pause)
    return path
