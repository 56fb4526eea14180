"""The parent side of the restorer workers: start them, feed them, notice when they die or hang.

No torch here (the service process must stay small). The pool is driven by one thread, the
service loop, which calls ``submit`` and ``poll``; only ``wake`` may be called from other threads.

Fault rules, in short:

* A worker that exits, loses its pipe or stays silent is restarted. Images it had started are
  charged an attempt and run again *alone* on a worker, so a photo that kills the restorer is
  identified and given up after ``workers.max_attempts`` crashes while it ran alone, while photos
  that merely shared the worker with it go through. Images it had not started are requeued free.
* A worker whose oldest image shows no progress for ``workers.image_timeout`` is killed (hung).
* Out of GPU memory: the image is retried alone at half the scale, down to MIN_OOM_SCALE.
* Start failures back off. A worker that fails to start three times in a row with a CUDA error
  is retired (its GPU fell off the bus, its driver broke) and the others carry on; three Python
  exceptions in a row while loading, or weights that cannot be loaded (at once), stop the worker
  with the message instead of crash-looping. ``resume`` gives them another try. A worker killed
  from outside while loading is simply restarted, more and more slowly.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import multiprocessing as mp
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from gpen_watch.config import RestoreConfig, WorkerConfig
from gpen_watch.dispatch import protocol as P
from gpen_watch.dispatch import worker_main
from gpen_watch.dispatch.devices import WorkerSlot
from gpen_watch.restore.api import FileJob, FileResult

log = logging.getLogger(__name__)
worker_log = logging.getLogger("gpen_watch.worker")

# Out-of-memory retries halve the scale down to this; below it the image fails.
MIN_OOM_SCALE = 0.25
# Consecutive failed starts before a worker is retired.
MAX_START_FAILURES = 3
# Longest pause between restarts of a worker that keeps failing.
MAX_BACKOFF = 30.0

# Photos per worker before it has said how many it wants (and for restorers that never say).
DEFAULT_IN_FLIGHT = 4

# Worker states, as `status` shows them.
STARTING, READY, STOPPING, BACKOFF, ERROR, RETIRED, STOPPED = (
    "starting",
    "ready",
    "stopping",
    "restarting",
    "error",
    "retired",
    "stopped",
)
_ALIVE = (STARTING, READY, STOPPING)


@dataclass
class Task:
    """One image the pool is responsible for until it reports it done or given up."""

    key: int  # the journal's job id
    job: FileJob
    # Worker crashes/hangs charged to this image so far.
    attempts: int = 0
    # Run it alone on a worker: it was in flight when a worker died, or it ran out of memory.
    isolate: bool = False


@dataclass
class PoolEvent:
    """What happened to a task. kind: DONE (result holds it), GAVE_UP (message says why) or
    RETRY (informational: the task is queued again, message says why)."""

    kind: str
    task: Task
    worker: str
    result: FileResult | None = None
    message: str = ""


DONE, GAVE_UP, RETRY = "done", "gave_up", "retry"


@dataclass(eq=False)
class _Flight:
    task: Task
    taken: bool = False


@dataclass(eq=False)
class _Worker:
    slot: WorkerSlot
    state: str = STOPPED
    proc: Any = None  # multiprocessing.Process
    conn: Connection | None = None
    pid: int | None = None
    flights: dict[int, _Flight] = field(default_factory=dict)
    started_at: float = 0.0
    last_msg_at: float = 0.0
    # When the worker last finished an image, or went from idle to busy.
    last_progress_at: float = 0.0
    restart_at: float = 0.0
    start_failures: int = 0
    crash_streak: int = 0  # crashes since the last finished image
    restarts: int = 0
    done: int = 0
    faces: int = 0
    # Photos the worker's restorer wants in hand at once (it says so when ready; 0: not said).
    read_ahead: int = 0
    # What its restorer loaded (model, detector, mask, device, precision), as it said when ready.
    loaded: str = ""
    # The device its restorer chose where the slot said "auto" ("Apple GPU (mps)", "cpu").
    device_label: str = ""
    # The worker's memory budget (MB, 0: not said) and its highest resident memory when each stage
    # of a photo ended, from its results (this process only: cleared when it is restarted).
    memory_budget_mb: int = 0
    rss_mb: dict[str, float] = field(default_factory=dict)
    # Running an isolated task: nothing else is sent until it finishes.
    exclusive: bool = False
    fatal: tuple[str, str] | None = None
    kill_reason: str | None = None
    error: str | None = None
    # In ERROR because its model files could not be loaded (the service retries when they change).
    model_error: bool = False


class Pool:
    def __init__(
        self,
        slots: list[WorkerSlot],
        restore: RestoreConfig,
        workers: WorkerConfig,
        *,
        factory: str = P.DEFAULT_FACTORY,
        child_env: dict[str, str] | None = None,
        heartbeat_s: float = 2.0,
        start_timeout: float | None = None,
        log_level: int = logging.INFO,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ctx = mp.get_context("spawn")
        self._workers = [_Worker(slot) for slot in slots]
        self._restore = restore
        self._cfg = workers
        self._factory = factory
        self._child_env = dict(child_env or {})
        self._heartbeat_s = heartbeat_s
        # Loading models from a cold disk can be slow; heartbeats show the worker is alive meanwhile.
        self._start_timeout = start_timeout or max(300.0, workers.image_timeout)
        # A live worker sends a heartbeat every heartbeat_s; this much silence means it is frozen.
        self._silence_timeout = max(60.0, 15 * heartbeat_s)
        self._log_level = log_level
        self._clock = clock
        self._pending: deque[Task] = deque()
        self.paused = False
        self._stopping = False
        self._wake_r, self._wake_w = self._ctx.Pipe(duplex=False)
        self._wake_lock = threading.Lock()
        self._wake_pending = False

    # --- life cycle -----------------------------------------------------------------------------

    def start(self) -> None:
        for w in self._workers:
            self._spawn(w)

    def begin_stop(self) -> None:
        """Stop handing out work and ask every worker to finish what it started, then exit."""
        self._stopping = True
        for w in self._workers:
            if w.state == READY:
                self._send(w, (P.STOP,))
                w.state = STOPPING
            elif w.state == STARTING:
                # No work was sent to it yet; loading models only to exit is a waste of seconds.
                self._kill(w, "stopping")
            elif w.state in (BACKOFF, ERROR, RETIRED):
                w.state = STOPPED

    def alive(self) -> bool:
        return any(w.state in _ALIVE for w in self._workers)

    def kill_all(self) -> list[Task]:
        """Kill whatever still runs; return every task not finished, for the journal to requeue."""
        leftover = list(self._pending)
        self._pending.clear()
        for w in self._workers:
            if w.state in _ALIVE:
                self._kill(w, "stopping")
                self._reap(w)
            leftover += [f.task for f in w.flights.values()]
            w.flights.clear()
            w.state = STOPPED
        for conn in (self._wake_r, self._wake_w):
            conn.close()
        return leftover

    # --- feeding --------------------------------------------------------------------------------

    def capacity(self) -> int:
        """How many more tasks the pool can take now without them waiting long."""
        if self.paused or self._stopping:
            return 0
        slots = sum(
            self._in_flight_cap(w) - len(w.flights)
            for w in self._workers
            if w.state in (STARTING, READY, BACKOFF)
        )
        return max(0, slots - len(self._pending))

    def _in_flight_cap(self, w: _Worker) -> int:
        """Photos to hand one worker at once: the configured number, else what its restorer asked
        for (a GPU worker wants enough one-face photos to fill a face batch), else a CPU-sized 4."""
        return self._cfg.images_in_flight or w.read_ahead or DEFAULT_IN_FLIGHT

    def submit(self, tasks: list[Task]) -> None:
        self._pending.extend(tasks)
        self._dispatch()

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        """Hand out work again; give workers stopped by an error or retired another try."""
        self.paused = False
        now = self._clock()
        for w in self._workers:
            if w.state in (ERROR, RETIRED) and not self._stopping:
                w.start_failures, w.model_error = 0, False
                w.state, w.restart_at = BACKOFF, now
        self._dispatch()

    def stopped_for_models(self) -> bool:
        """Whether a worker is stopped because it could not load its model files."""
        return any(w.state == ERROR and w.model_error for w in self._workers)

    def retry_model_errors(self) -> None:
        """Start the workers stopped by their model files again (the files changed)."""
        now = self._clock()
        for w in self._workers:
            if w.state == ERROR and w.model_error and not self._stopping:
                w.start_failures, w.model_error = 0, False
                w.state, w.restart_at = BACKOFF, now

    def take_back_stranded(self) -> list[Task]:
        """Tasks waiting for a worker when no worker can come (all stopped by errors or retired).

        The service puts them back in the journal's queue, so status shows them as waiting, not
        running, and they go out again once a worker is back (``resume``, a restart)."""
        if any(w.state in (STARTING, READY, BACKOFF) for w in self._workers):
            return []
        tasks = list(self._pending)
        self._pending.clear()
        return tasks

    def in_flight(self) -> int:
        return sum(len(w.flights) for w in self._workers)

    def pending(self) -> int:
        return len(self._pending)

    def wake(self) -> None:
        """Make a poll() in progress return now (thread-safe)."""
        with self._wake_lock:
            if self._wake_pending:
                return
            self._wake_pending = True
            with contextlib.suppress(OSError):
                self._wake_w.send_bytes(b"!")

    # --- the loop -------------------------------------------------------------------------------

    def poll(self, timeout: float) -> list[PoolEvent]:
        """Wait up to timeout for worker messages, exits and deadlines; return what happened."""
        events: list[PoolEvent] = []
        waitables: list[Any] = [self._wake_r]
        owner: dict[Any, _Worker] = {}
        for w in self._workers:
            if w.state in _ALIVE:
                if w.conn is not None:
                    waitables.append(w.conn)
                    owner[w.conn] = w
                waitables.append(w.proc.sentinel)
                owner[w.proc.sentinel] = w
        timeout = max(0.0, min(timeout, self._next_deadline() - self._clock()))
        ready = wait(waitables, timeout)
        dead: list[_Worker] = []
        for obj in ready:
            if obj is self._wake_r:
                self._drain_wake()
                continue
            w = owner[obj]
            if (obj is w.conn and not self._read(w, events)) or obj is not w.conn:
                dead.append(w)
        for w in dict.fromkeys(dead):
            if w.state in _ALIVE:
                self._on_exit(w, events)
        self._check_deadlines(events)
        self._dispatch()
        return events

    def _read(self, w: _Worker, events: list[PoolEvent]) -> bool:
        """Handle every message waiting on w's pipe; False at end of file (the worker is gone)."""
        assert w.conn is not None
        try:
            while w.conn.poll():
                self._on_message(w, w.conn.recv(), events)
        except (EOFError, OSError):
            return False
        return True

    def _on_message(self, w: _Worker, msg: tuple[Any, ...], events: list[PoolEvent]) -> None:
        now = self._clock()
        w.last_msg_at = now
        kind = msg[0]
        if kind == P.RESULT:
            self._on_result(w, msg[1], msg[2], events)
        elif kind == P.TOOK:
            if msg[1] in w.flights:
                w.flights[msg[1]].taken = True
        elif kind == P.HEARTBEAT:
            pass
        elif kind == P.LOG:
            worker_log.log(msg[1], "[%s] %s", w.slot.name, msg[3])
        elif kind == P.READY:
            w.state = READY
            w.pid = msg[1].get("pid", w.pid)
            w.read_ahead = int(msg[1].get("read_ahead") or 0)
            w.loaded = str(msg[1].get("loaded") or "")
            if w.slot.device == "auto":
                w.device_label = str(msg[1].get("device_label") or "")
            w.memory_budget_mb = int(msg[1].get("memory_budget_mb") or 0)
            w.rss_mb = {}
            w.start_failures = 0
            w.error = None
            log.info(
                "worker %s ready on %s: %s (pid %s, %s threads, %.1f s to load)",
                w.slot.name,
                w.slot.label,
                w.loaded or "restorer loaded",
                w.pid,
                w.slot.threads,
                now - w.started_at,
            )
        elif kind == P.FATAL:
            w.fatal = (msg[1], msg[2])
        elif kind == P.BYE:
            for key in msg[1]:
                flight = w.flights.pop(key, None)
                if flight is not None:
                    self._pending.appendleft(flight.task)

    def _on_result(self, w: _Worker, key: int, result: FileResult, events: list[PoolEvent]) -> None:
        flight = w.flights.pop(key, None)
        if flight is None:
            return  # a result for a task already requeued elsewhere: the first one counts
        now = self._clock()
        for stage, mb in (getattr(result, "rss_mb", None) or {}).items():
            w.rss_mb[stage] = max(mb, w.rss_mb.get(stage, 0.0))
        w.last_progress_at = now
        w.crash_streak = 0
        if w.exclusive and not w.flights:
            w.exclusive = False
        task = flight.task
        if result.out_of_memory and not result.ok:
            smaller = task.job.scale * 0.5
            if smaller >= MIN_OOM_SCALE:
                task.job = replace(task.job, scale=smaller)
                task.isolate = True
                self._pending.appendleft(task)
                msg = f"out of GPU memory; retrying alone at {smaller:.0%} scale"
                events.append(PoolEvent(RETRY, task, w.slot.name, message=msg))
                return
            result.error = (
                f"out of GPU memory even at {task.job.scale:.0%} scale "
                f"({result.error or 'CUDA out of memory'}); lower restore.max_side or restore.face_batch"
            )
            result.error_kind = result.error_kind or "failed"
        w.done += 1
        w.faces += result.faces
        events.append(PoolEvent(DONE, task, w.slot.name, result=result))

    def _on_exit(self, w: _Worker, events: list[PoolEvent]) -> None:
        """w's process exited or its pipe closed: collect what it said, then requeue and restart."""
        if w.conn is not None:
            self._read(w, events)  # results sent just before dying still count
        code = self._reap(w)
        was = w.state
        reason = w.kill_reason or (f"{w.fatal[1]}" if w.fatal else describe_exit(code))
        fatal_kind = w.fatal[0] if w.fatal else None
        w.conn, w.proc = None, None
        flights = list(w.flights.values())
        w.flights.clear()
        w.exclusive = False
        now = self._clock()
        for f in flights:
            # The process is gone (reaped): whatever it left at the temp output is partial, and the
            # engine's writers never overwrite, so the retry would fail on it. dst is the caller's
            # temp name for this task only (FileJob), never a user's file.
            _discard(Path(f.task.job.dst))

        if was == STOPPING or self._stopping:
            self._pending.extendleft(f.task for f in flights)
            w.state = STOPPED
            if was == STOPPING and code not in (0, None):
                log.warning("worker %s exited while stopping: %s", w.slot.name, reason)
            return

        if was == STARTING:
            w.start_failures += 1
            self._pending.extendleft(f.task for f in flights)
            if fatal_kind == P.FATAL_MODEL:
                # Missing or corrupt weights: every restart would fail the same way.
                w.state, w.error, w.model_error = ERROR, reason, True
                log.error("worker %s cannot load the models: %s", w.slot.name, reason)
                return
            if w.start_failures >= MAX_START_FAILURES and fatal_kind == P.FATAL_DEVICE:
                w.state = RETIRED
                w.error = f"failed to start {w.start_failures} times in a row, device error: {reason}"
                log.error(
                    "worker %s retired (its device may be gone; the others carry on): %s",
                    w.slot.name,
                    w.error,
                )
                return
            if w.start_failures >= MAX_START_FAILURES and fatal_kind == P.FATAL_CRASH:
                # An exception while loading is deterministic (a bug, a broken install): stop and say so.
                w.state = ERROR
                w.error = f"failed to start {w.start_failures} times in a row: {reason}"
                log.error("worker %s stopped: %s", w.slot.name, w.error)
                return
            # Killed from outside while loading (OOM killer, a user): keep trying, more slowly.
            w.error = f"failed to start ({reason})"
            w.state, w.restart_at = BACKOFF, now + min(MAX_BACKOFF, 2.0 ** (w.start_failures - 1))
            log.warning("worker %s failed to start (%s); retrying", w.slot.name, reason)
            return

        # It was working: lay the blame on the images it had started.
        w.crash_streak += 1
        w.restarts += 1
        hung = w.kill_reason is not None
        # A hung worker that started nothing is still stuck on something it was given.
        started = [f for f in flights if f.taken] or (flights if hung else [])
        for f in flights:
            if f not in started:
                self._pending.appendleft(f.task)
        alone = len(started) == 1 and len(flights) == 1
        for f in started:
            t = f.task
            t.attempts += 1
            if t.attempts >= self._cfg.max_attempts and (alone or t.isolate):
                verb = "hung" if hung else ("failed" if fatal_kind == P.FATAL_CRASH else "crashed")
                times = "once" if t.attempts == 1 else f"{t.attempts} times"
                msg = f"worker {verb} {times} while restoring this image ({reason})"
                events.append(PoolEvent(GAVE_UP, t, w.slot.name, message=msg))
            else:
                t.isolate = True
                self._pending.appendleft(t)
                events.append(PoolEvent(RETRY, t, w.slot.name, message=f"worker died ({reason}); will retry"))
        log.warning(
            "worker %s died (%s) with %d image(s) in flight; restarting", w.slot.name, reason, len(flights)
        )
        backoff = 0.0 if w.crash_streak <= 1 else min(MAX_BACKOFF, 2.0 ** (w.crash_streak - 2))
        w.state, w.restart_at = BACKOFF, now + backoff

    def _check_deadlines(self, events: list[PoolEvent]) -> None:
        now = self._clock()
        for w in self._workers:
            if w.state == BACKOFF and now >= w.restart_at and not self._stopping:
                self._spawn(w)
            elif w.state == STARTING and now - w.started_at > self._start_timeout:
                self._kill(w, f"did not load within {self._start_timeout:g} s")
                self._on_exit(w, events)
            elif w.state in (READY, STOPPING) and now - w.last_msg_at > self._silence_timeout:
                self._kill(w, f"silent for {self._silence_timeout:g} s (frozen)")
                self._on_exit(w, events)
            elif w.state in (READY, STOPPING) and w.flights and now > self._hang_deadline(w):
                self._kill(w, f"no result within {self._cfg.image_timeout:g} s; worker killed")
                self._on_exit(w, events)

    def _hang_deadline(self, w: _Worker) -> float:
        # A restorer may batch faces across the images it has started and finish them together, so
        # each started image adds one timeout; a healthy slow worker must never be killed.
        started = sum(1 for f in w.flights.values() if f.taken)
        return w.last_progress_at + self._cfg.image_timeout * max(1, started)

    def _next_deadline(self) -> float:
        now = self._clock()
        deadlines = [now + 3600.0]
        for w in self._workers:
            if w.state == BACKOFF:
                deadlines.append(w.restart_at)
            elif w.state == STARTING:
                deadlines.append(w.started_at + self._start_timeout)
            elif w.state in (READY, STOPPING):
                deadlines.append(w.last_msg_at + self._silence_timeout)
                if w.flights:
                    deadlines.append(self._hang_deadline(w))
        return min(deadlines)

    def _dispatch(self) -> None:
        """Send pending tasks to ready workers with free slots, oldest first.

        While a task must run alone, busy workers get nothing new: one of them drains, takes it,
        and the others follow. Crashes are rare, so the lost overlap does not matter.
        """
        if self.paused or self._stopping or not self._pending:
            return
        ready = sorted(
            (w for w in self._workers if w.state == READY and not w.exclusive), key=lambda w: len(w.flights)
        )
        for w in ready:
            if not self._pending:
                return
            if any(t.isolate for t in self._pending):
                if w.flights:
                    continue
                task = next(t for t in self._pending if t.isolate)
                self._pending.remove(task)
                w.exclusive = True
                self._send_tasks(w, [task])
                continue
            free = self._in_flight_cap(w) - len(w.flights)
            batch = [self._pending.popleft() for _ in range(min(free, len(self._pending)))]
            if batch:
                self._send_tasks(w, batch)

    def _send_tasks(self, w: _Worker, tasks: list[Task]) -> None:
        now = self._clock()
        if not w.flights:
            w.last_progress_at = now
        for t in tasks:
            w.flights[t.key] = _Flight(t)
        if not self._send(w, (P.JOBS, [(t.key, t.job) for t in tasks])):
            # The pipe broke: the worker is dying; its exit will requeue these.
            log.debug("worker %s: could not send jobs", w.slot.name)

    # --- processes ------------------------------------------------------------------------------

    def _spawn(self, w: _Worker) -> None:
        parent, child = self._ctx.Pipe(duplex=True)
        args = worker_main.WorkerArgs(
            w.slot, self._restore, self._factory, self._heartbeat_s, self._log_level, self._child_env
        )
        proc = self._ctx.Process(
            target=worker_main.main, args=(child, args), name=f"gpen-watch worker {w.slot.name}", daemon=False
        )
        now = self._clock()
        w.fatal, w.kill_reason = None, None
        try:
            proc.start()
        except OSError as exc:
            parent.close()
            child.close()
            w.start_failures += 1
            w.state, w.restart_at = BACKOFF, now + min(MAX_BACKOFF, 2.0**w.start_failures)
            w.error = f"cannot start a process: {exc}"
            log.error("worker %s: %s", w.slot.name, w.error)
            return
        child.close()  # the child has its own copy; ours must go so that its death shows as EOF
        w.proc, w.conn, w.pid = proc, parent, proc.pid
        w.state, w.started_at, w.last_msg_at = STARTING, now, now
        log.info("starting worker %s on %s (pid %s)", w.slot.name, w.slot.label, proc.pid)

    def _send(self, w: _Worker, msg: tuple[Any, ...]) -> bool:
        if w.conn is None:
            return False
        try:
            w.conn.send(msg)
            return True
        except (OSError, ValueError):
            return False

    def _kill(self, w: _Worker, reason: str) -> None:
        w.kill_reason = reason
        if w.proc is not None and w.proc.exitcode is None:
            with contextlib.suppress(OSError, ValueError):
                w.proc.kill()

    def _reap(self, w: _Worker) -> int | None:
        if w.proc is None:
            return None
        w.proc.join(5.0)
        if w.proc.exitcode is None:  # still alive after 5 s: it gets no more chances
            w.proc.kill()
            w.proc.join(5.0)
        code: int | None = w.proc.exitcode
        if w.conn is not None:
            w.conn.close()
        with contextlib.suppress(ValueError):
            w.proc.close()
        return code

    def _drain_wake(self) -> None:
        with self._wake_lock:
            while self._wake_r.poll():
                self._wake_r.recv_bytes()
            self._wake_pending = False

    # --- status ---------------------------------------------------------------------------------

    def snapshot(self) -> list[dict[str, Any]]:
        now = self._clock()
        return [
            {
                "name": w.slot.name,
                "device": w.device_label or w.slot.label,
                "state": ("busy" if w.flights else "idle") if w.state == READY else w.state,
                "pid": w.pid if w.state in _ALIVE else None,
                "threads": w.slot.threads,
                "in_flight": len(w.flights),
                "in_flight_cap": self._in_flight_cap(w),
                "done": w.done,
                "faces": w.faces,
                "loaded": w.loaded if w.state in _ALIVE else "",
                "restarts": w.restarts,
                "memory_budget_mb": w.memory_budget_mb or None,
                "rss_mb": dict(w.rss_mb),
                "last_seen_s": round(now - w.last_msg_at, 1) if w.state in _ALIVE else None,
                "error": w.error,
            }
            for w in self._workers
        ]

    def problem(self) -> str | None:
        """A message when no worker can work (all stopped by errors or retired), else None."""
        if self._workers and all(w.state in (ERROR, RETIRED) for w in self._workers):
            return "; ".join(f"{w.slot.name}: {w.error}" for w in self._workers)
        if not self._workers:
            return "no worker configured"
        return None


def _discard(dst: Path) -> None:
    """Remove a task's partial temp output, and the image writer's temp for it (".<name>.tmp-<hex>")."""
    for path in (dst, *dst.parent.glob(f".{glob.escape(dst.name)}.tmp-????????")):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:  # e.g. a read-only outbox: the service's own checks will report it
            log.debug("could not remove %s: %s", path, exc)


def describe_exit(code: int | None) -> str:
    if code is None:
        return "exit status unknown"
    if code < 0:
        try:
            return f"exit signal {-code}, {signal.Signals(-code).name}"
        except ValueError:
            return f"exit signal {-code}"
    return f"exit code {code}"
