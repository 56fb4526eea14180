"""The service's side of the cluster bridge (``bridge_main``): one child process that talks to Ray.

``Bridge`` starts the bridge, sends it commands and, on a reader thread, sorts what it says: each
remote worker's messages go down that worker's own pipe (so the pool waits on it like on a local
worker's), the rest (connected, refused, the node table) wait in ``events`` for the service loop.
When the bridge exits, for whatever reason (the head went away and Ray ended it, the service
ended it after a silence, it could not connect), every worker pipe closes: the pool sees its
remote workers gone and requeues their photos, charging an attempt, as for a dead node.

``BridgedWorker`` is a remote GPU (or CPU) behind ``dispatch.worker.Worker``; it can start only
while a bridge is connected and its node is in the cluster.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from gpen_watch.cluster import bridge_main, link
from gpen_watch.dispatch import protocol as P
from gpen_watch.dispatch.worker import drain

log = logging.getLogger(__name__)
bridge_log = logging.getLogger("gpen_watch.cluster.bridge_main")

# How long the bridge gets to shut its Ray connection down before it is killed.
CLOSE_WAIT_S = 10.0


@dataclass(frozen=True)
class Gone:
    """The bridge process exited (or its pipe broke): ``events``' last item."""

    exitcode: int | None


class Bridge:
    def __init__(self, args: link.BridgeArgs, wake: Callable[[], None]) -> None:
        self._args = args
        self._wake = wake
        self._proc: BaseProcess | None = None
        self._conn: Connection | None = None
        self._reader: threading.Thread | None = None
        self._lock = threading.Lock()  # the routes, and sending on the pipe
        self._routes: dict[str, Connection] = {}  # wid -> the writing end of that worker's pipe
        self.events: queue.Queue[link.FromBridge | Gone] = queue.Queue()

    def start(self) -> None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe(duplex=True)
        proc = ctx.Process(
            target=bridge_main.main, args=(child, self._args), name="gpen-watch cluster bridge", daemon=False
        )
        try:
            proc.start()
        finally:
            child.close()  # the child has its own copy; ours must go so that its death shows as EOF
        self._proc, self._conn = proc, parent
        self._reader = threading.Thread(target=self._read, args=(parent,), daemon=True, name="bridge reader")
        self._reader.start()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def send(self, msg: link.ToBridge) -> bool:
        with self._lock:
            if self._conn is None:
                return False
            try:
                self._conn.send(msg)
                return True
            except (OSError, ValueError):
                return False

    def route(self, wid: str) -> Connection | None:
        """A pipe for one worker's messages: its reading end, None once the bridge is gone."""
        r, w = mp.get_context("spawn").Pipe(duplex=False)
        with self._lock:
            if self._conn is None:
                r.close()
                w.close()
                return None
            self._routes[wid] = w
        return r

    def unroute(self, wid: str) -> None:
        with self._lock:
            w = self._routes.pop(wid, None)
        if w is not None:
            w.close()

    def kill(self) -> None:
        if self._proc is not None and self._proc.exitcode is None:
            with contextlib.suppress(OSError, ValueError):
                self._proc.kill()

    def close(self) -> None:
        """Ask the bridge to leave the cluster, kill it if it does not, and release everything."""
        self.send(link.Close())
        proc, reader = self._proc, self._reader
        if proc is not None:
            proc.join(CLOSE_WAIT_S)
            if proc.exitcode is None:
                self.kill()
                proc.join(CLOSE_WAIT_S)
        if reader is not None:
            reader.join(CLOSE_WAIT_S)
        if proc is not None:
            with contextlib.suppress(ValueError):
                proc.close()
        self._proc = self._reader = None

    # --- the reader thread ----------------------------------------------------------------------

    def _read(self, conn: Connection) -> None:
        try:
            while True:
                try:
                    msg: link.FromBridge = conn.recv()
                except (EOFError, OSError):
                    return
                self._dispatch(msg)
        finally:
            with self._lock:
                self._conn, routes, self._routes = None, self._routes, {}
            conn.close()
            for w in routes.values():
                w.close()  # each remote worker's channel closes: the pool requeues its photos
            proc = self._proc
            if proc is not None:
                proc.join(CLOSE_WAIT_S)
            self.events.put(Gone(proc.exitcode if proc is not None else None))
            self._wake()

    def _dispatch(self, msg: link.FromBridge) -> None:
        if isinstance(msg, P.Log):
            bridge_log.log(msg.level, "[cluster bridge] %s", msg.message)
            return
        if isinstance(msg, link.FromRemote | link.Ended):
            with self._lock:
                w = self._routes.get(msg.wid)
                if w is None:
                    return  # a worker the service gave up on already
                with contextlib.suppress(OSError, ValueError):
                    w.send(msg.msg if isinstance(msg, link.FromRemote) else msg)
                if isinstance(msg, link.Ended):
                    self._routes.pop(msg.wid, None)
                    w.close()
            return
        self.events.put(msg)
        self._wake()


class BridgedWorker:
    """One remote worker, driven by the pool through the bridge."""

    def __init__(
        self,
        name: str,
        slot: link.RemoteSlot,
        env: dict[str, str],
        *,
        bridge: Callable[[], Bridge | None],
        node_id: Callable[[str], str | None],
    ) -> None:
        self._name = name
        self._slot = slot
        self._env = env
        self._bridge = bridge
        self._node_id = node_id
        self._starts = 0
        self._wid = ""
        self._on: Bridge | None = None
        self._r: Connection | None = None
        self._open = False
        self._clean = False

    @property
    def pid(self) -> int | None:
        return None  # the actor's process is on another machine; status names its node instead

    def start(self) -> None:
        bridge = self._bridge()
        if bridge is None:
            raise OSError("the Ray cluster is unreachable (reconnecting)")
        node = self._node_id(self._slot.address)
        if node is None:
            raise OSError(f"node {self._slot.address} is not in the cluster (left, or not back yet)")
        self._starts += 1
        wid = f"{self._name}#{self._starts}"
        r = bridge.route(wid)
        if r is None or not bridge.send(link.StartWorker(wid, self._slot, node, self._env)):
            if r is not None:
                bridge.unroute(wid)
                r.close()
            raise OSError("the Ray cluster is unreachable (reconnecting)")
        self._wid, self._on, self._r, self._open, self._clean = wid, bridge, r, True, False

    def send(self, msg: P.ToWorker) -> bool:
        return self._open and self._on is not None and self._on.send(link.ToRemote(self._wid, msg))

    def stop(self) -> bool:
        return self.send(P.Stop())

    def receive(self) -> tuple[list[P.FromWorker], bool]:
        got, still_open = drain(self._r)
        msgs: list[P.FromWorker] = []
        for msg in got:
            if isinstance(msg, link.Ended):
                self._clean = msg.clean
            else:
                msgs.append(msg)
        if self._r is not None and not still_open:
            self._open = False
        return msgs, still_open

    def handles(self) -> list[Any]:
        return [self._r] if self._r is not None else []

    def alive(self) -> bool:
        return self._r is not None and self._open

    def kill(self) -> None:
        if self._on is not None and self._open:
            self._on.send(link.KillWorker(self._wid))

    def reap(self) -> int | None:
        on, r = self._on, self._r
        self._on, self._r, self._open = None, None, False
        if on is not None:
            on.unroute(self._wid)
        if r is not None:
            r.close()
        return 0 if self._clean else None
