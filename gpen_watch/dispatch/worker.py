"""The seam between the pool and a restorer worker, wherever the worker runs.

The pool drives every worker through this interface only: ``local.LocalWorker`` (a spawned process
on this machine, over a Pipe) and the cluster's actor worker implement it. Both speak the messages
of ``protocol``; the fault policy (``policy``) never sees which kind it is talking to.
"""

from __future__ import annotations

import signal
from multiprocessing.connection import Connection
from typing import Any, Protocol

from gpen_watch.dispatch import protocol as P


class Worker(Protocol):
    """One restorer worker. The pool calls these from its one thread."""

    @property
    def pid(self) -> int | None:
        """The worker's process id where that means something to the user, else None."""
        ...

    def start(self) -> None:
        """Start it (loading models happens after; Ready says when). OSError: it could not start."""
        ...

    def send(self, msg: P.ToWorker) -> bool:
        """Hand it a message; False when it can no longer take one (it is going away)."""
        ...

    def stop(self) -> bool:
        """Ask it to finish what it started, hand back the rest and exit (sends Stop)."""
        ...

    def receive(self) -> tuple[list[P.FromWorker], bool]:
        """The messages waiting now, without blocking, and whether the channel is still open."""
        ...

    def handles(self) -> list[Any]:
        """Objects for ``multiprocessing.connection.wait``: one is ready when ``receive`` has
        something or the worker is gone."""
        ...

    def alive(self) -> bool:
        """Whether it still runs (a dead worker's last messages may still be waiting)."""
        ...

    def kill(self) -> None:
        """End it now, whatever it is doing."""
        ...

    def reap(self) -> int | None:
        """Wait for it to be gone, release what it held and return its exit code (None: unknown)."""
        ...


def describe_exit(code: int | None) -> str:
    if code is None:
        return "exit status unknown"
    if code < 0:
        try:
            return f"exit signal {-code}, {signal.Signals(-code).name}"
        except ValueError:
            return f"exit signal {-code}"
    return f"exit code {code}"


def drain(conn: Connection | None) -> tuple[list[Any], bool]:
    """What a worker's channel holds now, and whether it is still open (the ``receive`` of a
    worker whose messages arrive on a Pipe)."""
    msgs: list[Any] = []
    if conn is None:
        return msgs, False
    try:
        while conn.poll():
            msgs.append(conn.recv())
    except (EOFError, OSError):
        return msgs, False
    return msgs, True
