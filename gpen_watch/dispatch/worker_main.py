"""The restorer worker: the child side of the pool, and the only place the service imports torch.

Started by the pool with the multiprocessing ``spawn`` context (the same on Linux, macOS and
Windows; fork would copy the parent's threads and locks, and CUDA cannot be used after fork).
A ``Pipe`` carries the messages of ``protocol``: its ``Connection`` frames pickled objects, and the
parent can wait on all workers' pipes and process sentinels at once (``local.LocalWorker``).

The worker loads the models once (warm), then restores the images it is sent. Several images are in
flight at once so that the restorer can overlap decode, detection, restoration, paste-back and
encode. A reader thread takes messages off the pipe (so the parent never blocks on a full pipe), and
a heartbeat thread says the process is alive while the main thread is deep inside torch.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import queue
import signal
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import NoReturn, Protocol

from gpen_watch.base.errors import ModelError
from gpen_watch.base.streams import flush_and_exit
from gpen_watch.config import RestoreConfig
from gpen_watch.dispatch import protocol as P
from gpen_watch.dispatch.devices import WorkerSlot
from gpen_watch.restore.api import Engine, EngineFactory, FileJob, ModelKey, PhotoProgress

_STOP = object()  # queue sentinel: the parent asked us to stop


@dataclass
class WorkerArgs:
    """Everything a worker needs; pickled to the child by the spawn context."""

    slot: WorkerSlot
    restore: RestoreConfig
    factory: str = P.DEFAULT_FACTORY
    heartbeat_s: float = 2.0
    log_level: int = logging.INFO
    # Extra environment for the child (tests use it to steer the fake restorer).
    env: dict[str, str] = field(default_factory=dict)


class Sender(Protocol):
    """Where a worker's messages go: the pipe here, the actor's own queue in a cluster actor."""

    def send(self, msg: P.FromWorker) -> None: ...


class _Channel:
    """The pipe, with a lock: the main, reader-fed and heartbeat threads all send on it."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.lock = threading.Lock()

    def send(self, msg: P.FromWorker) -> None:
        with self.lock:
            try:
                self.conn.send(msg)
            except (BrokenPipeError, ConnectionResetError):
                _parent_gone()


class _PipeLogHandler(logging.Handler):
    """Sends log records to the parent, which owns the log file (one file, no rotation races)."""

    def __init__(self, chan: _Channel) -> None:
        super().__init__()
        self.chan = chan

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):  # the parent is gone: nothing to log to
            self.chan.send(P.Log(record.levelno, record.name, self.format(record)))


def main(conn: Connection, args: WorkerArgs) -> None:
    """Entry point of the worker process (the target of the spawn context's Process)."""
    # Ctrl-C in a terminal reaches the whole process group; the parent decides when workers stop
    # (finishing the images they started), so the terminal's signals are not for us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    # Before anything imports torch, numpy or OpenCV: pin the GPU and cap the thread pools.
    os.environ.update(args.slot.env)
    os.environ.update(args.env)
    chan = _Channel(conn)
    root = logging.getLogger()
    root.handlers[:] = [_PipeLogHandler(chan)]
    root.setLevel(args.log_level)
    state = JobQueue()
    threading.Thread(
        target=_heartbeat, args=(chan, state, args.heartbeat_s), daemon=True, name="heartbeat"
    ).start()
    # Reading from the start, not once loaded: a parent killed while the models load (seconds)
    # shows at once as the pipe's end, and the worker leaves instead of loading for nobody.
    threading.Thread(target=_reader, args=(conn, state), daemon=True, name="reader").start()
    try:
        factory = load_factory(args.factory)
        restorer = factory(args.restore, args.slot.device, threads=args.slot.threads)
    except ModelError as exc:
        _fatal(chan, P.FatalKind.MODEL, str(exc))
    except BaseException as exc:  # noqa: BLE001
        _fatal(
            chan,
            start_failure_kind(exc, args.slot.device),
            f"could not start the restorer: {type(exc).__name__}: {exc}",
        )
    # A stand-in restorer (tests, benchmarks) may keep no count (0): its photos then get the
    # plain per-image timeout.
    state.progress = lambda: restorer.steps
    state.restoring = lambda: restorer.restoring
    state.photos = lambda: photos_at(restorer.progress, state)
    chan.send(ready_message(restorer, args.slot, os.getpid()))
    report_model_sets(restorer, chan)
    try:
        serve(chan, state, restorer)
    except BaseException as exc:  # noqa: BLE001
        # The restorer raised instead of returning a failed FileResult: the process may be in a bad
        # state (CUDA errors are sticky), so report and exit; the parent requeues and restarts.
        logging.getLogger(__name__).debug("worker failure:\n%s", traceback.format_exc())
        _fatal(
            chan,
            P.FatalKind.DEVICE if is_device_error(exc) else P.FatalKind.CRASH,
            f"{type(exc).__name__}: {exc}",
        )
    with contextlib.suppress(Exception):
        restorer.close()
    chan.send(P.Bye(tuple(item.key for item in state.drain())))
    conn.close()
    # Every result is written and reported: the interpreter's own teardown (torch's and the BLAS
    # libraries' native state) has nothing left to save, and it holds up the service's stop.
    flush_and_exit(0)


class JobQueue:
    """Jobs received but not yet started, and whether a stop was asked for; shared by the threads."""

    def __init__(self) -> None:
        self.waiting: queue.Queue[P.JobItem | object] = queue.Queue()
        self.stopping = False
        self.busy = False
        # The restorer's count of finished device steps, once it is loaded (see P.Heartbeat).
        self.progress: Callable[[], int] = lambda: 0
        # Its count of photos past decoding (see P.Heartbeat); -1: it keeps none.
        self.restoring: Callable[[], int] = lambda: -1
        # Where each photo it holds is (see P.Heartbeat); (): it says nothing.
        self.photos: Callable[[], tuple[P.PhotoAt, ...]] = tuple
        # The keys of the jobs handed to the restorer, by src (``serve``), and their lock: the
        # restorer may pull from the source on its own thread, and the heartbeat reads them.
        self.keys: dict[str, deque[int]] = {}
        self.lock = threading.Lock()

    def drain(self) -> list[P.JobItem]:
        items: list[P.JobItem] = []
        while True:
            try:
                item = self.waiting.get_nowait()
            except queue.Empty:
                return items
            if isinstance(item, P.JobItem):
                items.append(item)


def serve(chan: Sender, state: JobQueue, restorer: Engine) -> None:
    """Restore jobs as they come until asked to stop: one restore_files call over a live source.

    The restorer reads ahead (to batch faces across images) before it yields a result, and jobs
    only arrive as results go out, so a source that blocked while results are held would
    deadlock. The source therefore answers None ("nothing yet") while the restorer holds work,
    and the restorer asks again as it goes: photos that arrive join the running batches rather
    than waiting for them to drain. It blocks only when nothing is outstanding.
    """
    keys = state.keys
    outstanding = [0]
    lock = state.lock

    def jobs() -> Iterator[FileJob | None]:
        while not state.stopping:
            try:
                item = state.waiting.get_nowait()
            except queue.Empty:
                with lock:
                    held = outstanding[0] > 0
                    state.busy = held
                if held:
                    yield None
                    continue
                item = state.waiting.get()
            if not isinstance(item, P.JobItem):  # _STOP
                state.stopping = True
                return
            key, job = item.key, item.job
            with lock:
                keys.setdefault(str(job.src), deque()).append(key)
                outstanding[0] += 1
                state.busy = True
            chan.send(P.Took(key))
            yield job

    for result in restorer.restore_files(jobs()):
        with lock:
            pending = keys.get(str(result.src))
            key = pending.popleft() if pending else None
            outstanding[0] -= 1
        if key is None:
            logging.getLogger(__name__).error("restorer returned a result for an unknown file %s", result.src)
            continue
        if not result.ok and not result.out_of_memory and is_device_error(result.error or ""):
            # The GPU is in trouble; this image is probably not to blame. Crash-handling requeues it.
            raise RuntimeError(result.error)
        chan.send(P.Result(key, result))
    state.busy = False


def _reader(conn: Connection, state: JobQueue) -> None:
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            _parent_gone()
        if isinstance(msg, P.Jobs):
            for item in msg.items:
                state.waiting.put(item)
        elif isinstance(msg, P.Stop):
            state.stopping = True
            state.waiting.put(_STOP)
            return


def _parent_gone() -> NoReturn:
    """The parent's end of the pipe is closed (it was killed): nobody will collect results, and
    temp outputs are cleaned at the next start. Leave at once, quietly (nothing to report to, and
    no traceback for the terminal), rather than linger as an orphan on the GPU."""
    os._exit(0)


def _heartbeat(chan: _Channel, state: JobQueue, every: float) -> None:
    while True:
        try:
            chan.send(
                P.Heartbeat(state.busy, state.progress(), restoring=state.restoring(), photos=state.photos())
            )
        except Exception:  # noqa: BLE001
            return
        time.sleep(every)


def photos_at(progress: tuple[PhotoProgress, ...], state: JobQueue) -> tuple[P.PhotoAt, ...]:
    """The restorer's photos (``Engine.progress``) by their jobs' keys; a photo whose key is
    gone (its result is on its way) is left out."""
    with state.lock:
        return tuple(P.PhotoAt(state.keys[p.src][0], p) for p in progress if state.keys.get(p.src))


def _fatal(chan: _Channel, kind: P.FatalKind, message: str) -> None:
    with contextlib.suppress(Exception):
        chan.send(P.Fatal(kind, message))
    os._exit(P.EXIT_CODES[kind])


def start_failure_kind(exc: BaseException, device: str) -> P.FatalKind:
    """What an exception raised while loading the restorer means for restarting it."""
    if device not in ("cpu", "auto") and (is_device_error(exc) or "cuda" in str(exc).lower()):
        return P.FatalKind.DEVICE
    return P.FatalKind.CRASH


def ready_message(restorer: Engine, slot: WorkerSlot, pid: int | None, node: str = "") -> P.Ready:
    """What a worker tells the pool once its restorer is loaded (the restorer's own hints)."""
    return P.Ready(
        pid=pid,
        device=slot.device,
        threads=slot.threads,
        device_label=restorer.device_label,
        read_ahead=restorer.read_ahead,
        loaded=restorer.loaded,
        memory_budget_mb=restorer.memory_budget_mb,
        node=node,
        engine=restorer.engine_label,
        engine_note=restorer.engine_note,
    )


def report_model_sets(restorer: Engine, chan: Sender) -> None:
    """Send the model sets the restorer holds now, and again whenever it loads or unloads one. A
    stand-in restorer (tests, benchmarks) without model sets (``models`` None) sends nothing."""
    models = restorer.models
    if models is None:
        return

    def changed(loaded: list[ModelKey]) -> None:
        with contextlib.suppress(Exception):  # the parent is gone: nobody to tell
            chan.send(P.ModelSets(tuple(loaded)))

    models.on_change = changed
    changed(models.loaded)


def load_factory(spec: str) -> EngineFactory:
    """The engine factory that ``spec`` ("module:attr") names (``P.DEFAULT_FACTORY``, or a
    stand-in's)."""
    module, _, attr = spec.partition(":")
    factory: EngineFactory | None = vars(importlib.import_module(module)).get(attr)
    if not callable(factory):
        raise ImportError(f"{spec}: module {module} has no engine factory {attr!r}")
    return factory


def is_device_error(exc: BaseException | str) -> bool:
    """A CUDA failure other than out-of-memory (device lost, illegal access, driver error)."""
    text = str(exc)
    if "out of memory" in text.lower():
        return False
    return any(
        s in text for s in ("CUDA error", "CUDA driver", "cuDNN error", "CUBLAS_STATUS", "device-side")
    )
