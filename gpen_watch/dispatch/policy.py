"""The pool's fault policy: which worker gets which image, and what a crash, hang, out-of-memory or
failed start means. Pure: no processes, no pipes, time from an injected clock. It takes what the
workers said (``protocol`` messages, exits) and answers with actions for the pool to carry out.

Fault rules, in short:

* A worker that exits, loses its channel or stays silent is restarted. Images it had started are
  charged an attempt and run again *alone* on a worker, so a photo that kills the restorer is
  identified and given up after ``workers.max_attempts`` crashes while it ran alone, while photos
  that merely shared the worker with it go through. Images it had not started are requeued free.
* A worker whose oldest image shows no progress for ``workers.image_timeout`` is killed (hung).
  Progress is a result, or a heartbeat whose step count moved (a detection, a face batch, an
  upscaling tile batch finished), so a slow photo is not taken for a hung one.
* Out of GPU memory: the image is retried alone at half the scale, down to MIN_OOM_SCALE.
* Start failures back off. A worker that fails to start three times in a row with a device error
  is retired (its GPU fell off the bus, its driver broke) and the others carry on; three Python
  exceptions in a row while loading, or weights that cannot be loaded (at once), stop the worker
  with the message instead of crash-looping. ``resume`` gives them another try. A worker killed
  from outside while loading is simply restarted, more and more slowly.

It is one module of some 470 lines on purpose: the rules interlock (an exit's blame depends on
what was taken, a hang's deadline on how many images were started), and they are read together.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from gpen_watch.base.errors import ErrorKind
from gpen_watch.config import WorkerConfig
from gpen_watch.dispatch import protocol as P
from gpen_watch.dispatch.devices import WorkerSlot
from gpen_watch.dispatch.records import (
    ALIVE,
    COMING,
    Action,
    Flight,
    Kill,
    Send,
    Spawn,
    WorkerRecord,
    WorkerState,
    status_row,
)
from gpen_watch.dispatch.tasks import EventKind, PoolEvent, Task
from gpen_watch.restore.api import FileResult
from gpen_watch.restore.runtime.batching import in_flight

log = logging.getLogger("gpen_watch.dispatch.pool")

# Out-of-memory retries halve the scale down to this; below it the image fails.
MIN_OOM_SCALE = 0.25
# Consecutive failed starts before a worker is retired.
MAX_START_FAILURES = 3
# Longest pause between restarts of a worker that keeps failing.
MAX_BACKOFF = 30.0


class FaultPolicy:
    """Worker states, the queue of tasks not yet sent, and the rules above."""

    def __init__(
        self,
        slots: list[WorkerSlot],
        cfg: WorkerConfig,
        *,
        clock: Callable[[], float],
        start_timeout: float,
        silence_timeout: float,
    ) -> None:
        self.workers = [WorkerRecord(slot, node=slot.node) for slot in slots]
        self._cfg = cfg
        self._clock = clock
        self.start_timeout = start_timeout
        self.silence_timeout = silence_timeout
        self.pending: deque[Task] = deque()
        self.paused = False
        self.stopping = False

    def add(self, slot: WorkerSlot) -> int:
        """A new worker slot (a cluster node joined); returns its index. Start it with Spawn."""
        self.workers.append(WorkerRecord(slot, node=slot.node))
        return len(self.workers) - 1

    # --- life cycle -----------------------------------------------------------------------------

    def start(self) -> list[Action]:
        return [Spawn(i) for i in range(len(self.workers))]

    def spawned(self, i: int, pid: int | None) -> None:
        w, now = self.workers[i], self._clock()
        w.fatal, w.kill_reason = None, None
        w.pid = pid
        w.move(WorkerState.STARTING)
        w.started_at, w.last_msg_at = now, now
        w.progress_seen = 0  # a new process counts from 0
        log.info("starting worker %s on %s (pid %s)", w.slot.name, w.slot.label, pid)

    def spawn_failed(self, i: int, error: str) -> None:
        w = self.workers[i]
        w.start_failures += 1
        w.move(WorkerState.BACKOFF)
        w.restart_at = self._clock() + min(MAX_BACKOFF, 2.0**w.start_failures)
        w.error = f"cannot start a worker: {error}"
        # Said once when it starts failing (a cluster node away tries every 30 s for as long as it
        # is away) and again when it is back (``on_message``, Ready); the tries between at debug.
        level = logging.DEBUG if w.said_gone else logging.ERROR
        w.said_gone = True
        error = w.error
        log.log(
            level, "worker %s: %s; retrying, next in %.0f s", w.slot.name, error, w.restart_at - self._clock()
        )

    def begin_stop(self) -> list[Action]:
        self.stopping = True
        actions: list[Action] = []
        for i, w in enumerate(self.workers):
            if w.state == WorkerState.READY:
                actions.append(Send(i, P.Stop()))
                w.move(WorkerState.STOPPING)
            elif w.state == WorkerState.STARTING:
                # No work was sent to it yet; loading models only to exit is a waste of seconds.
                w.kill_reason = "stopping"
                actions.append(Kill(i, "stopping"))
            elif w.state in (
                WorkerState.BACKOFF,
                WorkerState.ERROR,
                WorkerState.RETIRED,
                WorkerState.WAITING_FOR_MODELS,
            ):
                w.move(WorkerState.STOPPED)
        return actions

    def alive(self) -> bool:
        return any(w.state in ALIVE for w in self.workers)

    def take_all(self) -> list[Task]:
        """Every task not finished (the workers were killed): for the journal to requeue."""
        leftover = list(self.pending)
        self.pending.clear()
        for w in self.workers:
            leftover += [f.task for f in w.flights.values()]
            w.flights.clear()
            w.move(WorkerState.STOPPED)
        return leftover

    # --- feeding --------------------------------------------------------------------------------

    def capacity(self) -> int:
        if self.paused or self.stopping:
            return 0
        slots = sum(self.in_flight_cap(w) - len(w.flights) for w in self.workers if w.state in COMING)
        return max(0, slots - len(self.pending))

    def in_flight_cap(self, w: WorkerRecord) -> int:
        """Photos to hand one worker at once: the configured number, else what its restorer asked
        for (a GPU worker wants enough one-face photos to fill a face batch), else a CPU-sized 4."""
        return in_flight(self._cfg.images_in_flight, w.read_ahead)

    def resume(self) -> None:
        """Hand out work again; give workers stopped by an error or retired another try."""
        self.paused = False
        now = self._clock()
        for w in self.workers:
            # (A worker held for its model files after it failed to load them is given one too.)
            failed_load = w.state == WorkerState.WAITING_FOR_MODELS and w.model_error
            if (w.state in (WorkerState.ERROR, WorkerState.RETIRED) or failed_load) and not self.stopping:
                w.start_failures, w.model_error = 0, False
                w.move(WorkerState.BACKOFF)
                w.restart_at = now

    def retry_now(self, names: set[str]) -> None:
        """Start these workers at the next ``due`` instead of when their back-off ends: their
        cluster node is back, so the reason they failed to start is gone. A worker that kept
        failing because of a stopped or crashed restorer (ERROR) is left to ``resume``."""
        now = self._clock()
        for w in self.workers:
            if w.slot.name in names and w.state == WorkerState.BACKOFF:
                w.restart_at = min(w.restart_at, now)

    def stopped_for_models(self) -> bool:
        return any(w.state == WorkerState.ERROR and w.model_error for w in self.workers)

    def hold_for_models(self) -> None:
        """The service's model gate holds the workers until their files are there: those not
        started yet, and those stopped because they could not load them, wait for model files."""
        for w in self.workers:
            if w.state == WorkerState.STOPPED or (w.state == WorkerState.ERROR and w.model_error):
                w.move(WorkerState.WAITING_FOR_MODELS)

    def retry_model_errors(self) -> None:
        now = self._clock()
        for w in self.workers:
            held = w.state == WorkerState.WAITING_FOR_MODELS or (
                w.state == WorkerState.ERROR and w.model_error
            )
            if held and not self.stopping:
                w.start_failures, w.model_error = 0, False
                w.move(WorkerState.BACKOFF)
                w.restart_at = now

    def take_back_stranded(self) -> list[Task]:
        if any(w.state in COMING for w in self.workers):
            return []
        tasks = list(self.pending)
        self.pending.clear()
        return tasks

    def in_flight(self) -> int:
        """Photos sent to the workers and not finished."""
        return sum(len(w.flights) for w in self.workers)

    def restoring(self) -> int:
        """Of those, the ones being restored: past decoding, as the restorer's heartbeat says (it
        takes photos ahead to decode them), at most those it took; the rest wait in the worker."""
        total = 0
        for w in self.workers:
            taken = sum(1 for f in w.flights.values() if f.taken)
            total += taken if w.restoring_said < 0 else min(taken, w.restoring_said)
        return total

    def dispatch(self) -> list[Action]:
        """Send pending tasks to ready workers with free slots, oldest first.

        While a task must run alone, busy workers get nothing new: one of them drains, takes it,
        and the others follow. Crashes are rare, so the lost overlap does not matter.
        """
        if self.paused or self.stopping or not self.pending:
            return []
        ready = sorted(
            (i for i, w in enumerate(self.workers) if w.state == WorkerState.READY and not w.exclusive),
            key=lambda i: len(self.workers[i].flights),
        )
        actions: list[Action] = []
        for i in ready:
            w = self.workers[i]
            if not self.pending:
                break
            if any(t.isolate for t in self.pending):
                if w.flights:
                    continue
                task = next(t for t in self.pending if t.isolate)
                self.pending.remove(task)
                w.exclusive = True
                actions.append(self._send_tasks(i, [task]))
                continue
            free = self.in_flight_cap(w) - len(w.flights)
            batch = [self.pending.popleft() for _ in range(min(free, len(self.pending)))]
            if batch:
                actions.append(self._send_tasks(i, batch))
        return actions

    def _send_tasks(self, i: int, tasks: list[Task]) -> Action:
        w = self.workers[i]
        if not w.flights:
            w.last_progress_at = self._clock()
        for t in tasks:
            w.flights[t.key] = Flight(t)
        return Send(i, P.Jobs(tuple(P.JobItem(t.key, t.job) for t in tasks)))

    # --- what the workers said ------------------------------------------------------------------

    def on_message(self, i: int, msg: P.FromWorker, events: list[PoolEvent]) -> None:
        w, now = self.workers[i], self._clock()
        w.last_msg_at = now
        if isinstance(msg, P.Result):
            self._on_result(w, msg.key, msg.result, events)
        elif isinstance(msg, P.Heartbeat):
            w.gpus = msg.gpus
            w.photos = msg.photos
            w.restoring_said = msg.restoring
            if msg.progress != w.progress_seen:
                w.progress_seen = msg.progress
                if w.flights:
                    w.last_progress_at = now
        elif isinstance(msg, P.ModelSets):
            w.model_sets = msg.loaded
        elif isinstance(msg, P.Took):
            if msg.key in w.flights:
                w.flights[msg.key].taken = True
        elif isinstance(msg, P.Ready):
            w.move(WorkerState.READY)
            w.pid = msg.pid if msg.pid is not None else w.pid
            w.restoring_said = -1  # a new process: it says at its first heartbeat
            w.photos = ()
            w.read_ahead, w.loaded, w.node = msg.read_ahead, msg.loaded, msg.node or w.slot.node
            if w.slot.device == "auto":
                w.device_label = msg.device_label
            w.memory_budget_mb = msg.memory_budget_mb
            w.threads = msg.threads
            w.engine, w.engine_note = msg.engine, msg.engine_note
            if msg.engine_note and msg.engine_note != w.note_logged:
                log.warning("worker %s: %s", w.slot.name, msg.engine_note)
            w.note_logged = msg.engine_note
            w.rss_mb = {}
            w.model_sets = ()  # a new process: it says what it holds next
            if w.said_gone and w.start_failures:
                log.info("worker %s is back after %d failed start(s)", w.slot.name, w.start_failures)
            w.said_gone = False
            w.start_failures = 0
            w.error = None
            log.info(
                "worker %s ready on %s: %s (pid %s, %s threads, %.1f s to load)",
                w.slot.name,
                w.slot.label,
                w.loaded or "restorer loaded",
                w.pid,
                w.threads or w.slot.threads,
                now - w.started_at,
            )
        elif isinstance(msg, P.Fatal):
            w.fatal = msg
        elif isinstance(msg, P.Bye):
            for key in msg.keys:
                flight = w.flights.pop(key, None)
                if flight is not None:
                    self.pending.appendleft(flight.task)

    def _on_result(self, w: WorkerRecord, key: int, result: FileResult, events: list[PoolEvent]) -> None:
        flight = w.flights.pop(key, None)
        if flight is None:
            return  # a result for a task already requeued elsewhere: the first one counts
        for stage, mb in (result.rss_mb or {}).items():
            w.rss_mb[stage] = max(mb, w.rss_mb.get(stage, 0.0))
        w.last_progress_at = self._clock()
        w.crash_streak = 0
        if w.exclusive and not w.flights:
            w.exclusive = False
        task = flight.task
        if result.out_of_memory and not result.ok:
            smaller = task.job.scale * 0.5
            if smaller >= MIN_OOM_SCALE:
                task.job = replace(task.job, scale=smaller)
                task.isolate = True
                self.pending.appendleft(task)
                msg = f"out of GPU memory; retrying alone at {smaller:.0%} scale"
                events.append(PoolEvent(EventKind.RETRY, task, w.slot.name, message=msg))
                return
            result.error = (
                f"out of GPU memory even at {task.job.scale:.0%} scale "
                f"({result.error or 'CUDA out of memory'}); lower restore.max_side or restore.face_batch"
            )
            result.error_kind = result.error_kind or ErrorKind.FAILED
        w.done += 1
        w.faces += result.faces
        events.append(PoolEvent(EventKind.DONE, task, w.slot.name, result=result, node=w.node))

    def on_exit(self, i: int, exit_text: str, events: list[PoolEvent], *, clean: bool) -> None:
        """Worker i is gone (reaped; its last messages were handled). ``exit_text`` describes how
        it ended, ``clean`` is whether it exited normally. Requeues, blames, and plans a restart."""
        w, now = self.workers[i], self._clock()
        was = w.state
        reason = w.kill_reason or (w.fatal.message if w.fatal else exit_text)
        fatal_kind = w.fatal.kind if w.fatal else None
        flights = list(w.flights.values())
        w.flights.clear()
        w.exclusive = False

        if was == WorkerState.STOPPING or self.stopping:
            self.pending.extendleft(f.task for f in flights)
            w.move(WorkerState.STOPPED)
            if was == WorkerState.STOPPING and not clean:
                log.warning("worker %s exited while stopping: %s", w.slot.name, reason)
            return
        if was == WorkerState.STARTING:
            self.pending.extendleft(f.task for f in flights)
            self._start_failed(w, reason, fatal_kind, now)
            return

        # It was working: lay the blame on the images it had started.
        w.crash_streak += 1
        w.restarts += 1
        hung = w.kill_reason is not None
        # A hung worker that started nothing is still stuck on something it was given.
        started = [f for f in flights if f.taken] or (flights if hung else [])
        for f in flights:
            if f not in started:
                self.pending.appendleft(f.task)
        alone = len(started) == 1 and len(flights) == 1
        for f in started:
            t = f.task
            t.attempts += 1
            if t.attempts >= self._cfg.max_attempts and (alone or t.isolate):
                verb = "hung" if hung else ("failed" if fatal_kind == P.FatalKind.CRASH else "crashed")
                times = "once" if t.attempts == 1 else f"{t.attempts} times"
                msg = f"worker {verb} {times} while restoring this image ({reason})"
                events.append(PoolEvent(EventKind.GAVE_UP, t, w.slot.name, message=msg, node=w.node))
            else:
                t.isolate = True
                self.pending.appendleft(t)
                msg = f"worker died ({reason}); will retry"
                events.append(PoolEvent(EventKind.RETRY, t, w.slot.name, message=msg, charged=True))
        log.warning(
            "worker %s died (%s) with %d image(s) in flight; restarting", w.slot.name, reason, len(flights)
        )
        w.said_gone = True
        backoff = 0.0 if w.crash_streak <= 1 else min(MAX_BACKOFF, 2.0 ** (w.crash_streak - 2))
        w.move(WorkerState.BACKOFF)
        w.restart_at = now + backoff

    def _start_failed(self, w: WorkerRecord, reason: str, fatal_kind: P.FatalKind | None, now: float) -> None:
        w.start_failures += 1
        if fatal_kind == P.FatalKind.MODEL:
            # Missing or corrupt weights: every restart would fail the same way.
            w.move(WorkerState.ERROR)
            w.error, w.model_error = reason, True
            log.error("worker %s cannot load the models: %s", w.slot.name, reason)
            return
        if w.start_failures >= MAX_START_FAILURES and fatal_kind == P.FatalKind.DEVICE:
            w.move(WorkerState.RETIRED)
            w.error = f"failed to start {w.start_failures} times in a row, device error: {reason}"
            log.error(
                "worker %s retired (its device may be gone; the others carry on): %s", w.slot.name, w.error
            )
            return
        if w.start_failures >= MAX_START_FAILURES and fatal_kind == P.FatalKind.CRASH:
            # An exception while loading is deterministic (a bug, a broken install): stop and say so.
            w.move(WorkerState.ERROR)
            w.error = f"failed to start {w.start_failures} times in a row: {reason}"
            log.error("worker %s stopped: %s", w.slot.name, w.error)
            return
        # Killed from outside while loading (OOM killer, a user): keep trying, more slowly.
        w.error = f"failed to start ({reason})"
        level = logging.DEBUG if w.said_gone else logging.WARNING
        w.said_gone = True
        w.move(WorkerState.BACKOFF)
        w.restart_at = now + min(MAX_BACKOFF, 2.0 ** (w.start_failures - 1))
        log.log(level, "worker %s failed to start (%s); retrying", w.slot.name, reason)

    # --- time -----------------------------------------------------------------------------------

    def due(self) -> list[Action]:
        """Restarts whose back-off is over, and kills of workers past a deadline."""
        now = self._clock()
        actions: list[Action] = []
        for i, w in enumerate(self.workers):
            reason = None
            if w.state == WorkerState.BACKOFF and now >= w.restart_at and not self.stopping:
                actions.append(Spawn(i))
            elif w.state == WorkerState.STARTING and now - w.started_at > self.start_timeout:
                reason = f"did not load within {self.start_timeout:g} s"
            elif w.state in (WorkerState.READY, WorkerState.STOPPING):
                if now - w.last_msg_at > self.silence_timeout:
                    reason = f"silent for {self.silence_timeout:g} s (frozen)"
                elif w.flights and now > self._hang_deadline(w):
                    reason = f"no result within {self._cfg.image_timeout:g} s; worker killed"
            if reason is not None:
                w.kill_reason = reason
                actions.append(Kill(i, reason))
        return actions

    def _hang_deadline(self, w: WorkerRecord) -> float:
        # A restorer may batch faces across the images it has started and finish them together, so
        # each started image adds one timeout; a healthy slow worker must never be killed.
        started = sum(1 for f in w.flights.values() if f.taken)
        return w.last_progress_at + self._cfg.image_timeout * max(1, started)

    def next_deadline(self) -> float:
        now = self._clock()
        deadlines = [now + 3600.0]
        for w in self.workers:
            if w.state == WorkerState.BACKOFF:
                deadlines.append(w.restart_at)
            elif w.state == WorkerState.STARTING:
                deadlines.append(w.started_at + self.start_timeout)
            elif w.state in (WorkerState.READY, WorkerState.STOPPING):
                deadlines.append(w.last_msg_at + self.silence_timeout)
                if w.flights:
                    deadlines.append(self._hang_deadline(w))
        return min(deadlines)

    # --- status ---------------------------------------------------------------------------------

    def snapshot(self) -> list[dict[str, Any]]:
        now = self._clock()
        return [status_row(w, self.in_flight_cap(w), now) for w in self.workers]

    def problem(self) -> str | None:
        # A worker held for its files after it could not load them still says why it could not.
        stuck = [
            w
            for w in self.workers
            if w.state in (WorkerState.ERROR, WorkerState.RETIRED)
            or (w.state == WorkerState.WAITING_FOR_MODELS and w.model_error)
        ]
        if self.workers and len(stuck) == len(self.workers):
            return "; ".join(f"{w.slot.name}: {w.error}" for w in self.workers)
        if not self.workers:
            return "no worker configured"
        return None
