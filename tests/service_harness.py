"""A real `gpen-watch run` subprocess on a temp inbox/outbox, shared by tests/test_daemon.py and tests/hostile/.

The service runs with the test's isolated user folders (the environment of the test process, set by
the autouse fixture in tests/conftest.py, or by its ``isolated_env``), so
``control.request`` and ``Journal.open`` in the test reach that service and its journal. Workers load
the restorer named by ``restorer`` (``module:Class`` importable from tests/, which goes on the
service's PYTHONPATH), or the real engine when it is None.

Each suite subclasses ``ServiceProcess`` for its own defaults and extras, and gets its ``services``
fixture from ``services_fixture``. Imported as
``service_harness`` under pytest (tests/ is on sys.path, as for ``from conftest import ...``) and as
``tests.service_harness`` when the hostile suite runs as ``python -m tests.hostile.stress``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from gpen_watch.platform import paths
from gpen_watch.service import control

TESTS_DIR = Path(__file__).resolve().parent

S = TypeVar("S", bound="ServiceProcess")


def real_engine_args(models: Any) -> list[str]:
    """`gpen-watch run` options for the real engine on the tiny random-weight models (CPU)."""
    return [
        "--model",
        str(models.gpen),
        "--model-dir",
        str(models.model_dir),
        "--set",
        "restore.detector=retinaface_mobile0.25",
        "--set",
        "restore.use_parse=false",
        "--face-batch",
        "4",
        "--device",
        "cpu",
    ]


def finished(s: dict[str, Any]) -> int:
    """Jobs that reached an end state, from a status reply."""
    q = s["queue"]
    return q["done"] + q["failed"] + q["unsupported"] + q["duplicate"]


def queue_empty(s: dict[str, Any]) -> bool:
    """Nothing waits or runs, from a status reply."""
    return bool(s["queue"]["queued"] == 0 and s["queue"]["running"] == 0)


def write_atomic(path: Path, data: bytes) -> Path:
    """Write the way a careful copier does: under a hidden temp name, then rename into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.part"
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path


class ServiceProcess:
    """One `gpen-watch run` on ``root/inbox`` -> ``root/outbox`` (failed/ and originals/ beside it)."""

    start_timeout: float = 60.0  # start() until every worker is idle or busy
    wait_timeout: float = 30.0  # wait() when no timeout is given
    log_tail: int = 6000  # characters of the service log in failure messages

    def __init__(
        self,
        root: Path,
        *extra: str,
        restorer: str | None,
        env: dict[str, str] | None = None,
        settle: float = 0.2,
    ) -> None:
        self.root = root
        self.inbox = root / "inbox"
        self.outbox = root / "outbox"
        self.failed = root / "failed"
        self.originals = root / "originals"
        self.extra = list(extra)
        self.settle = settle
        self.env = dict(os.environ)
        self.env["PYTHONPATH"] = os.pathsep.join([str(TESTS_DIR), self.env.get("PYTHONPATH", "")]).strip(
            os.pathsep
        )
        self.env.pop("GPEN_WATCH_RESTORER", None)
        # The test machine's own desktop and power stay out of it: no real notices pop up from
        # test services (the test's XDG_RUNTIME_DIR holds no bus), and a laptop on battery does
        # not hold every test's photos.
        self.env.pop("DBUS_SESSION_BUS_ADDRESS", None)
        self.env["GPEN_WATCH_POWER_SUPPLY"] = str(root / "no-power-supply")
        if restorer is not None:
            self.env["GPEN_WATCH_RESTORER"] = restorer
        self.env.update(env or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "gpen_watch",
            "run",
            "--no-tray",
            "--inbox",
            str(self.inbox),
            "--outbox",
            str(self.outbox),
            "--set",
            f"watch.settle_seconds={self.settle}",
            "--stop-grace",
            "5",
            *self.extra,
        ]

    def start(self: S, wait: bool = True) -> S:
        self.runs += 1
        self.stderr = self.root / f"stderr-{self.runs}.txt"
        with open(self.stderr, "wb") as err:
            self.proc = subprocess.Popen(self.command(), env=self.env, stdout=subprocess.DEVNULL, stderr=err)
        if wait:
            self.wait(
                lambda s: bool(s["workers"]) and all(w["state"] in ("idle", "busy") for w in s["workers"]),
                self.start_timeout,
                "service ready",
            )
        return self

    def status(self, timeout: float = 10.0) -> dict[str, Any]:
        return control.request("status", timeout=timeout)

    def request(self, cmd: str) -> dict[str, Any]:
        return control.request(cmd)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait(
        self, cond: Callable[[dict[str, Any]], bool], timeout: float | None = None, what: str = "condition"
    ) -> dict[str, Any]:
        """Poll the status until cond holds; fail at once if the service exits, or after timeout s."""
        deadline = time.monotonic() + (self.wait_timeout if timeout is None else timeout)
        last: dict[str, Any] = {}
        while time.monotonic() < deadline:
            if not self.alive():
                raise AssertionError(
                    f"service exited ({self.proc and self.proc.returncode}) waiting for {what}\n{self.logs()}"
                )
            try:
                last = self.status()
                if cond(last):
                    return last
            except control.ControlError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}; last status {last}\n{self.logs()}")

    def stop(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        control.request("stop")
        return self.proc.wait(timeout)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def log_text(self) -> str:
        log = paths.log_file()
        return log.read_text(errors="replace") if log.exists() else ""

    def logs(self) -> str:
        text = self.log_text()[-self.log_tail :] or "(no log)"
        err = self.stderr.read_text(errors="replace")[-3000:] if self.runs and self.stderr.exists() else ""
        return f"--- log ---\n{text}\n--- stderr ---\n{err}"

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def services_fixture(cls: type[S], own_folders: bool = False) -> Any:
    """A ``services`` fixture for a test module or conftest (``services = services_fixture(Service)``):
    ``services(*extra, **kw)`` makes a ``cls`` on the test's tmp_path (each on its own
    ``tmp_path/svcN`` with ``own_folders``), and every one made is closed (killed if still running)
    when the test ends."""

    @pytest.fixture
    def services(tmp_path: Path) -> Iterator[Callable[..., S]]:
        """services(*extra, **kw) -> a new service; each one is closed (killed if running) at the end."""
        made: list[S] = []

        def make(*extra: str, **kw: Any) -> S:
            svc = cls(tmp_path / f"svc{len(made)}" if own_folders else tmp_path, *extra, **kw)
            made.append(svc)
            return svc

        yield make
        for svc in made:
            svc.close()

    return services
