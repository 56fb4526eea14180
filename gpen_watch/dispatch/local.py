"""A restorer worker on this machine: a process started with the ``spawn`` context, over a Pipe.

spawn is the same on Linux, macOS and Windows; fork would copy the parent's threads and locks, and
CUDA cannot be used after fork. The Pipe's ``Connection`` frames pickled ``protocol`` messages, and
the pool waits on every worker's pipe and process sentinel at once.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from gpen_watch.dispatch import protocol as P
from gpen_watch.dispatch import worker_main
from gpen_watch.dispatch.worker import drain

log = logging.getLogger(__name__)

# A worker still alive this long after it was told to go gets no more chances.
REAP_WAIT_S = 5.0


class LocalWorker:
    """One spawned worker process; a new process each time it is started."""

    def __init__(self, args: worker_main.WorkerArgs) -> None:
        self._ctx = mp.get_context("spawn")
        self._args = args
        self._proc: BaseProcess | None = None
        self._conn: Connection | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        parent, child = self._ctx.Pipe(duplex=True)
        proc = self._ctx.Process(
            target=worker_main.main,
            args=(child, self._args),
            name=f"gpen-watch worker {self._args.slot.name}",
            daemon=False,
        )
        try:
            proc.start()
        except OSError:
            parent.close()
            child.close()
            raise
        child.close()  # the child has its own copy; ours must go so that its death shows as EOF
        self._proc, self._conn = proc, parent

    def send(self, msg: P.ToWorker) -> bool:
        if self._conn is None:
            return False
        try:
            self._conn.send(msg)
            return True
        except (OSError, ValueError):
            return False

    def stop(self) -> bool:
        return self.send(P.Stop())

    def receive(self) -> tuple[list[P.FromWorker], bool]:
        return drain(self._conn)

    def handles(self) -> list[Any]:
        found: list[Any] = []
        if self._conn is not None:
            found.append(self._conn)
        if self._proc is not None:
            found.append(self._proc.sentinel)
        return found

    def alive(self) -> bool:
        return self._proc is not None and self._proc.exitcode is None

    def kill(self) -> None:
        if self._proc is not None and self._proc.exitcode is None:
            with contextlib.suppress(OSError, ValueError):
                self._proc.kill()

    def reap(self) -> int | None:
        proc, conn = self._proc, self._conn
        self._proc, self._conn = None, None
        if conn is not None:
            conn.close()
        if proc is None:
            return None
        proc.join(REAP_WAIT_S)
        if proc.exitcode is None:
            proc.kill()
            proc.join(REAP_WAIT_S)
        code: int | None = proc.exitcode
        with contextlib.suppress(ValueError):
            proc.close()
        return code
