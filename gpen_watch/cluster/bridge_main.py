"""The cluster bridge: the one process that talks to Ray for the service (``bridge.Bridge`` starts it).

Ray ends a driver whose head has been gone for a while (its GCS reconnect timeout), and a driver
cannot move on to a new head of the same address (WrongClusterID). So the driver is this child,
not the service: when the head goes, the bridge goes, the service requeues the photos that were on
the remote workers and starts a new bridge once the head answers again.

It connects (``ray.init``), says which nodes are alive every POLL_S (the service's heartbeat from
it), and runs one ``remote.RayWorker`` per remote GPU the service asks for, forwarding each one's
``protocol`` messages, tagged, over the one pipe. Files are read and written here, on the service's
machine (``remote`` packs the original's bytes and writes the result to the job's temp name).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from multiprocessing.connection import Connection, wait
from typing import Any

from gpen_watch.base.errors import ClusterError
from gpen_watch.cluster import link, token
from gpen_watch.cluster.head import CPU_RESOURCE, probe_head
from gpen_watch.cluster.raylib import ray
from gpen_watch.cluster.remote import RayWorker
from gpen_watch.dispatch import protocol as P

log = logging.getLogger(__name__)

# How often the bridge reads the node table and tells the service (which takes silence for loss).
POLL_S = 2.0


class _Channel:
    """The pipe to the service, with a lock: the loop, the node watcher and the reapers send on it."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.lock = threading.Lock()

    def send(self, msg: link.FromBridge) -> None:
        with self.lock:
            self.conn.send(msg)


class _LogHandler(logging.Handler):
    """The bridge's log records go to the service's log (as a worker's do)."""

    def __init__(self, chan: _Channel) -> None:
        super().__init__()
        self.chan = chan

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):  # the service is gone: nothing to log to
            self.chan.send(P.Log(record.levelno, record.name, self.format(record)))


def main(conn: Connection, args: link.BridgeArgs) -> None:
    """Entry point of the bridge process (the target of the spawn context's Process)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the service decides when the bridge goes
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    chan = _Channel(conn)
    root = logging.getLogger()
    root.handlers[:] = [_LogHandler(chan)]
    root.setLevel(args.log_level)
    try:
        own = connect(args)
    except ClusterError as exc:
        chan.send(link.Refused(str(exc)))
        conn.close()
        return
    chan.send(link.Connected(args.cluster.address, own))
    threading.Thread(target=_watch_nodes, args=(chan,), daemon=True, name="nodes").start()
    try:
        _serve(conn, chan, args)
    finally:
        with contextlib.suppress(Exception):
            ray().shutdown()
        conn.close()


def connect(args: link.BridgeArgs) -> str:
    """ray.init against cluster.address with the token; this machine's Ray node id."""
    address = args.cluster.address
    path = token.token_path(args.cluster)
    token.check_token(path)
    local_ip = None if address == "auto" else probe_head(address)
    # Ray reads these from this process's environment, when it is first imported.
    os.environ.update(token.ray_env(path))
    r_ = ray()
    try:
        r_.init(
            address=address,
            _node_ip_address=local_ip,
            namespace="gpen-watch",
            log_to_driver=False,
            configure_logging=False,
        )
    except Exception as exc:  # noqa: BLE001 - Ray's errors are many; the user needs one sentence
        with contextlib.suppress(Exception):
            r_.shutdown()
        raise ClusterError(
            f"cluster.address {address}: Ray refused the connection ({first_line(exc)}); "
            f"check that {path} holds the cluster's token (copy it from the head machine); "
            "local workers carry on"
        ) from None
    return str(r_.get_runtime_context().get_node_id())


def _watch_nodes(chan: _Channel) -> None:
    """Every POLL_S, the live nodes. While the head is gone the call blocks or raises; either
    way the service hears nothing and ends this process after its silence limit."""
    r_ = ray()
    while True:
        try:
            nodes = r_.nodes()
        except Exception as exc:  # noqa: BLE001
            log.debug("ray.nodes(): %s", first_line(exc))
        else:
            with contextlib.suppress(Exception):
                chan.send(link.Nodes(tuple(node_info(n) for n in nodes if n.get("Alive"))))
        time.sleep(POLL_S)


def node_info(n: dict[str, Any]) -> link.NodeInfo:
    res = n.get("Resources", {})
    return link.NodeInfo(
        node_id=str(n.get("NodeID")),
        address=str(n.get("NodeManagerAddress", "")),
        host=str(n.get("NodeManagerHostname") or "?"),
        gpus=int(res.get("GPU", 0)),
        cpus=max(1, int(res.get("CPU", 1))),
        cpu_offered=res.get(CPU_RESOURCE, 0) >= 1,
    )


def _serve(conn: Connection, chan: _Channel, args: link.BridgeArgs) -> None:
    workers: dict[str, RayWorker] = {}
    while True:
        handles: dict[Any, str] = {h: wid for wid, w in workers.items() for h in w.handles()}
        for ready in wait([conn, *handles], timeout=1.0):
            if ready is conn:
                try:
                    msg: link.ToBridge = conn.recv()
                except (EOFError, OSError):
                    msg = link.Close()  # the service is gone
                if isinstance(msg, link.Close):
                    for each in workers.values():
                        each.kill()
                    return
                _command(msg, workers, chan, args)
                continue
            wid = handles[ready]
            found = workers.get(wid)
            if found is None:
                continue
            msgs, open_ = found.receive()
            for m in msgs:
                chan.send(link.FromRemote(wid, m))
            if not open_ or not found.alive():
                del workers[wid]
                _end(wid, found, chan)


def _command(
    msg: link.ToBridge, workers: dict[str, RayWorker], chan: _Channel, args: link.BridgeArgs
) -> None:
    if isinstance(msg, link.StartWorker):
        _start(msg, workers, chan, args)
    elif isinstance(msg, link.ToRemote):
        w = workers.get(msg.wid)
        if w is None or not w.send(msg.msg):
            log.debug("remote worker %s: could not send %s", msg.wid, msg.msg)
    elif isinstance(msg, link.KillWorker):
        gone = workers.pop(msg.wid, None)
        if gone is not None:
            gone.kill()
            _end(msg.wid, gone, chan)


def _start(
    msg: link.StartWorker, workers: dict[str, RayWorker], chan: _Channel, args: link.BridgeArgs
) -> None:
    def node_id(_address: str) -> str | None:
        return msg.node_id

    w = RayWorker(
        msg.slot,
        args.restore,
        args.factory,
        node_id=node_id,
        env=msg.env,
        heartbeat_s=args.heartbeat_s,
        mb_in_flight=args.cluster.mb_in_flight,
    )
    try:
        w.start()
    except Exception as exc:  # noqa: BLE001 - said to the pool as the worker's crash
        chan.send(link.FromRemote(msg.wid, P.Fatal(P.FatalKind.CRASH, f"cannot start it: {first_line(exc)}")))
        chan.send(link.Ended(msg.wid, clean=False))
        return
    workers[msg.wid] = w


def _end(wid: str, w: RayWorker, chan: _Channel) -> None:
    """Reap a worker off the loop (joining its Ray thread can take seconds), then say it ended."""

    def reap() -> None:
        clean = w.reap() == 0
        with contextlib.suppress(Exception):
            chan.send(link.Ended(wid, clean))

    threading.Thread(target=reap, daemon=True, name=f"reap {wid}").start()


def first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
