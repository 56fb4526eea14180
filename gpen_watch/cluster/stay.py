"""`gpen-watch cluster head|join --stay`: keep this machine's Ray node up, for a login entry.

A plain `join` starts a Ray node and returns; that node's raylet ends when its head has been
gone for Ray's 60 s, or at once when it meets a restarted head, and the machine is out of the
cluster until someone joins it again. With ``--stay`` the command stays in the foreground as the
node's keeper: it waits until the head answers over TCP, runs `ray start --block` (Ray's own
foreground mode, which ends with the node's processes and takes them down with it), and when that
ends, says why and joins again once the head answers, with a back-off. SIGTERM or SIGINT (a login
manager stopping it, Ctrl-C, `cluster leave`) stops the node and the keeper.

The keeper records itself beside the node's processes (``started``), so `cluster leave` stops it
before the node, and the node is not joined again behind its back. Ray's own output goes to
``ray-node.log`` in gpen-watch's state folder; the keeper's lines, one per change, go there too
and to stdout (a login manager's log).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO

from gpen_watch.base.errors import ClusterError
from gpen_watch.cluster import started, token
from gpen_watch.cluster.head import reach_head
from gpen_watch.cluster.raylib import ray_cli, ray_failure
from gpen_watch.platform import paths

LOG_NAME = "ray-node.log"
# Waits between tries while the head does not answer or `ray start` fails: doubling, capped.
RETRY_MIN_S = 1.0
RETRY_MAX_S = 30.0
# A node that ran this long had joined for real: the next start after it ends is not delayed.
STEADY_S = 60.0
# What `ray start` prints once the node runs (head or not).
STARTED_LINE = "Ray runtime started"
# At most this long between the keeper's notes of the processes below `ray start` (a scan of
# /proc), for what to kill once the node ends: its agents start with it, later workers end by
# themselves.
FAMILY_LOOK_S = 10.0
# How long `ray start --block` gets to stop its processes after SIGTERM before it is killed.
STOP_WAIT_S = 20.0


@dataclass(frozen=True)
class NodePlan:
    """One node to keep up: the `ray start` arguments besides the address this machine binds."""

    start_args: tuple[str, ...]  # `ray` arguments (start ...), without --node-ip-address and --block
    token_path: Path
    # Said each time the node runs; {bind} is the address this machine was given.
    running_line: str
    head_address: str | None = None  # a node's head host:port; None for the head itself
    bind: str | None = None  # this machine's address; None: the one that reaches the head
    temp_dir: Path | None = None  # Ray's session folder (for `leave`'s record)
    log_path: Path = field(default_factory=lambda: paths.state_dir() / LOG_NAME)
    address: str = ""  # the head's own host:port (for the record); a node's is head_address

    @property
    def role(self) -> str:
        return started.HEAD if self.head_address is None else started.NODE

    @property
    def cluster(self) -> str:
        """The cluster's address, as the record keeps it."""
        return self.head_address or self.address


@dataclass
class Keeper:
    """Runs ``plan``'s node until ``stop`` is set; ``say`` gets the lines for the user."""

    plan: NodePlan
    say: Callable[[str], None]
    stop: threading.Event = field(default_factory=threading.Event)
    runs: int = 0  # nodes started so far (tests, messages)

    def run(self) -> int:
        """Keep the node up until ``stop``; 0 then. ClusterError at once when Ray is not
        installed, which no retry mends."""
        ray_cli()
        started.remember_keeper(self.plan.role, self.plan.cluster)
        try:
            return self._keep()
        finally:
            started.forget_keeper()

    def _keep(self) -> int:
        wait = RETRY_MIN_S
        said: str | None = None  # the last failure said, so a lasting one is said once
        while not self.stop.is_set():
            try:
                bind = self._bind()
                token.check_token(self.plan.token_path)
                ran_for = self._run_node(bind)
            except ClusterError as exc:
                if str(exc) != said:
                    self.say(f"{exc}; trying again every {RETRY_MAX_S:g} s at most")
                    said = str(exc)
                self.stop.wait(wait)
                wait = min(RETRY_MAX_S, wait * 2)
                continue
            said = None
            if self.stop.is_set():
                break
            where = f"its head at {self.plan.head_address}" if self.plan.head_address else "this head"
            self.say(
                f"the Ray node ended after {ran_for:.0f} s ({where} went away or restarted, or its "
                "processes were stopped); starting it again"
                + (" once the head answers" if self.plan.head_address else "")
            )
            # A node that ends soon after each start backs off as a failed start does.
            wait = RETRY_MIN_S if ran_for >= STEADY_S else min(RETRY_MAX_S, wait * 2)
            self.stop.wait(wait)
        self.say("stopped: this machine's Ray node is down")
        return 0

    def _bind(self) -> str | None:
        if self.plan.head_address is None:
            return self.plan.bind
        try:
            found = reach_head(self.plan.head_address)
        except OSError as exc:
            raise ClusterError(
                f"cannot reach the cluster's head at {self.plan.head_address} ({exc.strerror or exc}); "
                "waiting for it (`gpen-watch cluster head` starts it there)"
            ) from None
        return self.plan.bind or found

    def _run_node(self, bind: str | None) -> float:
        """One `ray start --block`, until it ends or ``stop``; seconds it ran once started.
        ClusterError when it ended before the node started (the reason from Ray's output)."""
        cmd = [ray_cli(), *self.plan.start_args, "--block"]
        if bind:
            cmd += ["--node-ip-address", bind]
        before = started.ray_processes() if started.supported() else {}
        self.plan.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.plan.log_path, "a", encoding="utf-8") as log:
            proc = subprocess.Popen(
                cmd,
                env={**os.environ, **token.ray_env(self.plan.token_path)},
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                # Its own process group: a terminal's Ctrl-C reaches the keeper, which stops it.
                start_new_session=True,
            )
            node = _Output(proc, log)
            family: dict[int, started.RayProcess] = {}  # every process seen below `ray start`
            try:
                t0 = self._wait_started(proc, node)
                if t0 is None:
                    return 0.0
                self.runs += 1
                if started.supported():
                    started.remember(before, self.plan.temp_dir, self.plan.role, self.plan.cluster)
                self.say(self.plan.running_line.format(bind=bind))
                next_look, looks = 0.0, 0
                while proc.poll() is None and not self.stop.wait(0.5):
                    if started.supported() and time.monotonic() >= next_look:
                        family.update({p.pid: p for p in started.tree(proc.pid)})
                        # Often while the node starts its agents, then seldom.
                        next_look = time.monotonic() + min(FAMILY_LOOK_S, 2.0**looks)
                        looks += 1
                return time.monotonic() - t0
            finally:
                _end(proc)
                node.join()
                # What Ray's own stop leaves (its agents outlive a killed raylet for seconds and
                # hold the fixed ports, so the next start would time out): stopped here.
                started.kill_leftovers(list(family.values()))

    def _wait_started(self, proc: subprocess.Popen[str], node: _Output) -> float | None:
        """When the node runs; None when ``stop`` came first; ClusterError when it failed."""
        while not node.started.wait(0.2):
            if self.stop.is_set():
                return None
            if proc.poll() is not None:
                node.join()
                raise ClusterError(
                    ray_failure("start", "\n".join(node.tail), proc.returncode, self.plan.token_path)
                )
        return time.monotonic()


class _Output:
    """Copies `ray start`'s output to the log file, and notes when the node runs."""

    def __init__(self, proc: subprocess.Popen[str], log: IO[str]) -> None:
        self.started = threading.Event()
        self.tail: list[str] = []
        self._log = log
        self._thread = threading.Thread(target=self._copy, args=(proc,), daemon=True, name="ray-output")
        self._thread.start()

    def _copy(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self._log.write(line)
            self._log.flush()
            self.tail = [*self.tail[-20:], line.rstrip()]
            if STARTED_LINE in line:
                self.started.set()

    def join(self) -> None:
        self._thread.join(5.0)


def _end(proc: subprocess.Popen[str]) -> None:
    """Stop `ray start --block` (on SIGTERM it stops the node's processes), then its group."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            proc.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if hasattr(os, "killpg"):
                    os.killpg(proc.pid, signal.SIGKILL)
                else:  # Windows: no process groups to kill
                    proc.kill()
            proc.wait()


@contextlib.contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGTERM and SIGINT set ``stop`` instead of ending the process (so the node is stopped)."""

    def handler(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    names = [signal.SIGTERM, signal.SIGINT] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
    old = {s: signal.signal(s, handler) for s in names}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def say_to(log_path: Path) -> Callable[[str], None]:
    """The keeper's lines, stamped, on stdout and in the node's log (a desktop's autostart or
    Windows' Run key keeps no stdout)."""

    def say(text: str) -> None:
        line = f"{time.strftime('%Y-%m-%d %H:%M:%S')} gpen-watch cluster: {text}"
        print(line, file=sys.stdout, flush=True)
        with contextlib.suppress(OSError):
            log_path.parent.mkdir(parents=True, exist_ok=True)
            with open(log_path, "a", encoding="utf-8") as f:
                f.write(line + "\n")

    return say
