"""Running `gpen-watch restore`'s engine on a thread of its own, and stopping it on Ctrl-C or SIGTERM.

Everything heavy (loading the models, and the whole pipeline: its device loop runs torch and OpenCV
calls that hold a thread for seconds at a time, and Python runs a signal handler only between
bytecodes of the main thread) happens on one engine thread. The main thread only waits for results
and commits them, so a signal is acted on at once wherever the engine is.
"""

from __future__ import annotations

import argparse
import logging
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn

from gpen_watch import config
from gpen_watch.restore.api import FileJob, FileResult

if TYPE_CHECKING:
    from gpen_watch.restore.engines.restorer import Restorer

log = logging.getLogger(__name__)

STOP_SIGNALS = tuple(s for s in (signal.SIGINT, getattr(signal, "SIGTERM", None)) if s is not None)
# How long a stop waits for the engine to wind down (it writes nothing after stop()) before the
# process exits regardless; longer than writing one encoded result, short enough to feel prompt.
STOP_GRACE_S = 1.0


class Stopped(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_stopped(signum: int, _frame: FrameType | None) -> None:
    raise Stopped(signum)


class stop_signals:
    """Turns SIGINT and SIGTERM into ``Stopped`` in the main thread while inside the block."""

    def __enter__(self) -> None:
        self._previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for s in STOP_SIGNALS:
                self._previous[s] = signal.signal(s, _raise_stopped)

    def __exit__(self, *exc: object) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)


class EngineThread:
    """The Restorer (the ``restore.api.Engine`` of this command) and its pipeline on a thread of
    their own; results come back on a queue."""

    def __init__(
        self,
        cfg: config.Config,
        args: argparse.Namespace,
        jobs: list[FileJob],
        on_loaded: Callable[[], None],
    ) -> None:
        self._cfg, self._args, self._jobs, self._on_loaded = cfg, args, jobs, on_loaded
        self._queue: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="gpen-restore", daemon=True)
        self.restorer: Restorer | None = None
        self.load_seconds = 0.0
        self.images_started = time.perf_counter()

    def results(self) -> Iterator[FileResult | None]:
        """Start the engine and yield None once its models are loaded, then its results;
        re-raises what the engine raised."""
        self._thread.start()
        while True:
            # A timeout keeps the wait short even where a blocked get would not wake for signals.
            try:
                kind, value = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            if kind == "ready":
                self.load_seconds = value
                self.images_started = time.perf_counter()
                yield None
            elif kind == "result":
                yield value
            elif kind == "error":
                raise value
            else:
                return

    def stop(self, grace: float) -> None:
        if self.restorer is not None:
            self.restorer.stop()
        if self._thread.is_alive():
            self._thread.join(grace)

    def _run(self) -> None:
        from gpen_watch.restore.engines.restorer import Restorer

        try:
            with Restorer(
                self._cfg.restore, threads=self._args.threads, download=not self._args.no_download
            ) as restorer:
                self.restorer = restorer
                if restorer.engine_note:  # what runs is not what the settings ask for: say why, once
                    log.warning("%s", restorer.engine_note)
                self._on_loaded()
                self._queue.put(("ready", restorer.load_seconds))
                for res in restorer.restore_files(self._jobs):
                    self._queue.put(("result", res))
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread, which reports it
            self._queue.put(("error", exc))
        else:
            self._queue.put(("end", None))


@dataclass
class RunState:
    """What a stop needs to know about the run so far."""

    outdir: Path | None = None
    jobs: list[FileJob] = field(default_factory=list)
    results: list[FileResult] = field(default_factory=list)
    engine: EngineThread | None = None


def abandon(state: RunState, signum: int, say: Callable[[str], None]) -> NoReturn:
    """Stop the engine, remove every unfinished result, say so, and exit at once."""
    if state.engine is not None:
        state.engine.stop(STOP_GRACE_S)
    removed = remove_temps(state.jobs)
    name = "Ctrl-C (SIGINT)" if signum == signal.SIGINT else signal.Signals(signum).name
    if state.engine is None:
        what = "before any image was restored"
    else:
        done = sum(1 for r in state.results if r.ok)
        what = f"{done} of {len(state.jobs)} images restored into {state.outdir}"
        if removed:
            what += f", {removed} unfinished result(s) removed"
        what += "; run the same command again for the rest (restored ones are skipped)"
    say(f"gpen-watch: stopped by {name}: {what}")
    sys.stdout.flush()
    sys.stderr.flush()
    # Not sys.exit: the engine's threads may sit in a torch or OpenCV call for seconds more, and the
    # interpreter would wait for them at exit. Nothing of theirs is left to keep.
    os._exit(128 + signum)


def remove_temps(jobs: list[FileJob]) -> int:
    """Delete each job's temp result and the image writer's own temp beside it; how many."""
    from gpen_watch.base.fsutil import remove_quietly

    removed = 0
    for job in jobs:
        temps = [job.dst, *job.dst.parent.glob(f".{job.dst.name}.tmp-*")]
        for tmp in temps:
            if os.path.lexists(tmp):
                remove_quietly(tmp)
                removed += 1
    return removed
