"""The parent side of the restorer workers: start them, feed them, notice when they die or hang.

No torch here (the service process must stay small). The pool is driven by one thread, the
service loop, which calls ``submit`` and ``poll``; only ``wake`` may be called from other threads.

The rules (restart, requeue, attempts, timeouts, out-of-memory, retiring) live in ``policy``, which
is pure; this module carries out what it decides on real workers, through the ``worker.Worker``
interface: ``local.LocalWorker`` for the processes on this machine, and whatever else is added with
``add_worker`` (the cluster's remote workers).
"""

from __future__ import annotations

import contextlib
import glob
import logging
import multiprocessing as mp
import os
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from gpen_watch.config import RestoreConfig, WorkerConfig
from gpen_watch.dispatch import protocol as P
from gpen_watch.dispatch import worker_main
from gpen_watch.dispatch.devices import WorkerSlot
from gpen_watch.dispatch.local import LocalWorker
from gpen_watch.dispatch.policy import MIN_OOM_SCALE, FaultPolicy
from gpen_watch.dispatch.records import Action, Kill, Send, Spawn
from gpen_watch.dispatch.tasks import EventKind, PoolEvent, Task
from gpen_watch.dispatch.worker import Worker, describe_exit
from gpen_watch.restore.runtime.batching import DEFAULT_IN_FLIGHT

log = logging.getLogger(__name__)
worker_log = logging.getLogger("gpen_watch.worker")

DONE, GAVE_UP, RETRY = EventKind.DONE, EventKind.GAVE_UP, EventKind.RETRY

__all__ = [
    "DEFAULT_IN_FLIGHT",
    "DONE",
    "GAVE_UP",
    "MIN_OOM_SCALE",
    "RETRY",
    "Pool",
    "PoolEvent",
    "Task",
    "describe_exit",
]


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
        env = dict(child_env or {})
        self._workers: list[Worker] = [
            LocalWorker(worker_main.WorkerArgs(slot, restore, factory, heartbeat_s, log_level, env))
            for slot in slots
        ]
        self._policy = FaultPolicy(
            slots,
            workers,
            clock=clock,
            # Loading models from a cold disk can be slow; heartbeats show the worker is alive meanwhile.
            start_timeout=start_timeout or max(300.0, workers.image_timeout),
            # A live worker sends a heartbeat every heartbeat_s; this much silence means it is frozen.
            silence_timeout=max(60.0, 15 * heartbeat_s),
        )
        self._clock = clock
        self._wake_r, self._wake_w = mp.get_context("spawn").Pipe(duplex=False)
        self._wake_lock = threading.Lock()
        self._wake_pending = False
        self._started = False

    @property
    def paused(self) -> bool:
        return self._policy.paused

    # --- life cycle -----------------------------------------------------------------------------

    def start(self) -> None:
        self._started = True
        self._apply(self._policy.start(), [])

    def add_worker(self, slot: WorkerSlot, worker: Worker) -> None:
        """Drive one more worker (a remote GPU that appeared); started at once if the pool runs."""
        self._workers.append(worker)
        i = self._policy.add(slot)
        if self._started and not self._policy.stopping:
            self._apply([Spawn(i)], [])

    def worker_count(self) -> int:
        return len(self._workers)

    def retry_now(self, names: set[str]) -> None:
        """Restart these workers at the next ``poll`` if they wait in back-off (their cluster
        node came back)."""
        self._policy.retry_now(names)

    def begin_stop(self) -> None:
        """Stop handing out work and ask every worker to finish what it started, then exit."""
        self._apply(self._policy.begin_stop(), [])

    def alive(self) -> bool:
        return self._policy.alive()

    def kill_all(self) -> list[Task]:
        """Kill whatever still runs; return every task not finished, for the journal to requeue."""
        for w in self._workers:
            if w.alive() or w.handles():
                w.kill()
                w.reap()
        for conn in (self._wake_r, self._wake_w):
            conn.close()
        return self._policy.take_all()

    # --- feeding --------------------------------------------------------------------------------

    def capacity(self) -> int:
        """How many more tasks the pool can take now without them waiting long."""
        return self._policy.capacity()

    def submit(self, tasks: list[Task]) -> None:
        self._policy.pending.extend(tasks)
        self._apply(self._policy.dispatch(), [])

    def pause(self) -> None:
        self._policy.paused = True

    def resume(self) -> None:
        """Hand out work again; give workers stopped by an error or retired another try."""
        self._policy.resume()
        self._apply(self._policy.dispatch(), [])

    def stopped_for_models(self) -> bool:
        """Whether a worker is stopped because it could not load its model files."""
        return self._policy.stopped_for_models()

    def hold_for_models(self) -> None:
        """The workers wait for their model files (the service's model gate holds them); their
        state says so until ``start`` or ``retry_model_errors``."""
        self._policy.hold_for_models()

    def retry_model_errors(self) -> None:
        """Start the workers stopped by their model files again (the files changed)."""
        self._policy.retry_model_errors()

    def take_back_stranded(self) -> list[Task]:
        """Tasks waiting for a worker when no worker can come (all stopped by errors or retired).

        The service puts them back in the journal's queue, so status shows them as waiting, not
        running, and they go out again once a worker is back (``resume``, a restart)."""
        return self._policy.take_back_stranded()

    def in_flight(self) -> int:
        return self._policy.in_flight()

    def restoring(self) -> int:
        return self._policy.restoring()

    def pending(self) -> int:
        return len(self._policy.pending)

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
        owner: dict[Any, int] = {}
        for i, w in enumerate(self._workers):
            for h in w.handles():
                waitables.append(h)
                owner[h] = i
        timeout = max(0.0, min(timeout, self._policy.next_deadline() - self._clock()))
        ready = wait(waitables, timeout)
        gone: list[int] = []
        for obj in ready:
            if obj is self._wake_r:
                self._drain_wake()
                continue
            i = owner[obj]
            msgs, open_ = self._workers[i].receive()
            self._handle(i, msgs, events)
            if not open_ or not self._workers[i].alive():
                gone.append(i)
        for i in dict.fromkeys(gone):
            self._gone(i, events)
        self._apply(self._policy.due(), events)
        self._apply(self._policy.dispatch(), events)
        return events

    def _handle(self, i: int, msgs: list[P.FromWorker], events: list[PoolEvent]) -> None:
        for msg in msgs:
            if isinstance(msg, P.Log):
                worker_log.log(msg.level, "[%s] %s", self._policy.workers[i].slot.name, msg.message)
            else:
                self._policy.on_message(i, msg, events)

    def _gone(self, i: int, events: list[PoolEvent]) -> None:
        """Worker i exited or lost its channel: collect what it said, then let the policy decide."""
        w = self._workers[i]
        msgs, _ = w.receive()  # results sent just before dying still count
        self._handle(i, msgs, events)
        code = w.reap()
        rec = self._policy.workers[i]
        for f in rec.flights.values():
            # The worker is gone (reaped): whatever it left at the temp output is partial, and the
            # engine's writers never overwrite, so the retry would fail on it. dst is the caller's
            # temp name for this task only (FileJob), never a user's file.
            _discard(Path(f.task.job.dst))
        self._policy.on_exit(i, describe_exit(code), events, clean=code in (0, None))

    def _apply(self, actions: list[Action], events: list[PoolEvent]) -> None:
        for action in actions:
            w = self._workers[action.index]
            if isinstance(action, Spawn):
                try:
                    w.start()
                except OSError as exc:
                    self._policy.spawn_failed(action.index, str(exc))
                    continue
                self._policy.spawned(action.index, w.pid)
            elif isinstance(action, Kill):
                w.kill()
                self._gone(action.index, events)
            elif isinstance(action, Send) and not w.send(action.msg):
                # The channel broke: the worker is dying; its exit will requeue these.
                log.debug(
                    "worker %s: could not send %s", self._policy.workers[action.index].slot.name, action.msg
                )

    def _drain_wake(self) -> None:
        with self._wake_lock:
            while self._wake_r.poll():
                self._wake_r.recv_bytes()
            self._wake_pending = False

    # --- status ---------------------------------------------------------------------------------

    def snapshot(self) -> list[dict[str, Any]]:
        return self._policy.snapshot()

    def problem(self) -> str | None:
        """A message when no worker can work (all stopped by errors or retired), else None."""
        return self._policy.problem()


def _discard(dst: Path) -> None:
    """Remove a task's partial temp output, and the image writer's temp for it (".<name>.tmp-<hex>")."""
    for path in (dst, *dst.parent.glob(f".{glob.escape(dst.name)}.tmp-????????")):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:  # e.g. a read-only outbox: the service's own checks will report it
            log.debug("could not remove %s: %s", path, exc)
