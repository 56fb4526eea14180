"""The cluster's nodes as pool workers: connect, follow nodes as they come and go, report.

Called from the service loop (``poll``, a few times a second at most; it looks at the cluster
every POLL_S). Every GPU of every live node other than this one gets a worker (``remote``); a
node started with `gpen-watch cluster join --cpu` offers one CPU worker. A node that leaves keeps
its workers, which fail to start until it is back (the pool backs off, up to 30 s between tries),
so they come back by themselves. A cluster that cannot be reached is said once, in the log and in
status; local workers carry on, and the connection is tried again every RETRY_S.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpen_watch.cluster import token
from gpen_watch.cluster.raylib import ray
from gpen_watch.cluster.remote import RayWorker, RemoteSlot
from gpen_watch.config import Config
from gpen_watch.dispatch.devices import THREAD_ENV_VARS, WorkerSlot
from gpen_watch.dispatch.pool import Pool
from gpen_watch.errors import ClusterError

log = logging.getLogger(__name__)

POLL_S = 2.0
RETRY_S = 30.0
# The custom Ray resource a node offers when its CPU may restore photos (`cluster join --cpu`).
CPU_RESOURCE = "gpen_watch_cpu"
PROBE_TIMEOUT_S = 3.0


@dataclass
class _Node:
    address: str
    host: str
    node_id: str | None
    gpus: int
    cpus: int
    cpu_offered: bool


class Membership:
    def __init__(
        self,
        cfg: Config,
        pool: Pool,
        *,
        factory: str,
        env: dict[str, str] | None = None,
        heartbeat_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cfg = cfg
        self._pool = pool
        self._factory = factory
        self._env = dict(env or {})
        self._heartbeat_s = heartbeat_s
        self._clock = clock
        self._connected = False
        self._next_look = 0.0
        self._nodes: dict[str, _Node] = {}
        self._slots: set[tuple[str, int | None]] = set()
        self._own_node: str | None = None
        self._connecting: threading.Thread | None = None
        self._connect_error: str | None = None
        self.problem: str | None = None

    def poll(self) -> None:
        now = self._clock()
        if not self._connected:
            self._check_connecting(now)
            return
        if now < self._next_look:
            return
        self._next_look = now + POLL_S
        try:
            nodes = ray().nodes()
        except Exception as exc:  # noqa: BLE001 - the head went away: workers notice on their own
            problem = f"cannot list the cluster's nodes: {_first_line(exc)}"
            if self.problem != problem:
                log.error("%s", problem)
            self.problem = problem
            return
        if self.problem:
            log.info("the Ray cluster at %s answers again", self._cfg.cluster.address)
            self.problem = None
        self._follow(nodes)
        if not self._slots and self._pool.worker_count() == 0:
            # Not the pool's "no worker configured": the workers come with the nodes.
            self.problem = (
                "no worker yet: no cluster node offers a GPU or CPU to gpen-watch (run "
                f"`gpen-watch cluster join {self._cfg.cluster.address}` on the GPU machines)"
            )

    def _check_connecting(self, now: float) -> None:
        """Connect on a side thread: Ray retries a refused or unauthenticated connection for
        about 20 s, which the service loop (and the local workers it feeds) must not wait for."""
        if self._connecting is not None:
            if self._connecting.is_alive():
                return
            self._connecting = None
            if self._connect_error is not None:
                if self.problem != self._connect_error:
                    log.error("%s", self._connect_error)  # once per distinct problem, not every retry
                self.problem = self._connect_error
                self._next_look = now + RETRY_S
                return
            if self.problem:
                log.info("connected to the Ray cluster at %s", self._cfg.cluster.address)
            self.problem = None
            self._connected = True
            self._next_look = now
            self.poll()
            return
        if now >= self._next_look:
            self._connect_error = None
            self._connecting = threading.Thread(target=self._connect_quietly, daemon=True, name="ray connect")
            self._connecting.start()

    def _connect_quietly(self) -> None:
        try:
            self._connect()
        except ClusterError as exc:
            self._connect_error = str(exc)
        except Exception as exc:  # noqa: BLE001 - reported like a refusal
            self._connect_error = f"cluster.address {self._cfg.cluster.address}: {type(exc).__name__}: {exc}"

    def _connect(self) -> None:
        address = self._cfg.cluster.address
        path = token.token_path(self._cfg.cluster)
        token.check_token(path)
        local_ip = None
        if address != "auto":
            local_ip = probe_head(address)
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
                ignore_reinit_error=True,
            )
        except Exception as exc:  # noqa: BLE001 - Ray's errors are many; the user needs one sentence
            r_.shutdown()
            raise ClusterError(
                f"cluster.address {address}: Ray refused the connection ({_first_line(exc)}); "
                f"check that {path} holds the cluster's token (copy it from the head machine); "
                "local workers carry on"
            ) from None
        self._own_node = r_.get_runtime_context().get_node_id()

    def _follow(self, nodes: list[dict[str, Any]]) -> None:
        seen: dict[str, _Node] = {}
        for n in nodes:
            address = str(n.get("NodeManagerAddress", ""))
            if not n.get("Alive") or not address:
                continue
            res = n.get("Resources", {})
            if n.get("NodeID") == self._own_node and self._cfg.cluster.local_workers:
                continue  # this machine's GPUs have local workers
            seen[address] = _Node(
                address,
                str(n.get("NodeManagerHostname") or "?"),
                str(n.get("NodeID")),
                int(res.get("GPU", 0)),
                max(1, int(res.get("CPU", 1))),
                res.get(CPU_RESOURCE, 0) >= 1,
            )
        before, self._nodes = self._nodes, seen
        for address, node in seen.items():
            if node.gpus == 0 and not node.cpu_offered:
                continue
            if address not in before:
                log.info(
                    "cluster node %s joined: %d GPU(s)%s",
                    address,
                    node.gpus,
                    ", CPU" if node.cpu_offered else "",
                )
                # Back after leaving: its workers wait out a back-off of up to 30 s; start them now.
                self._pool.retry_now({self._name(a, g) for a, g in self._slots if a == address})
            for gpu in range(node.gpus):
                self._add(node, gpu, max(1, node.cpus // node.gpus))
            if node.cpu_offered:
                self._add(node, None, node.cpus)
        for address in set(before) - set(seen):
            log.warning("cluster node %s left; its photos in flight are requeued", address)

    def _add(self, node: _Node, gpu: int | None, threads: int) -> None:
        if (node.address, gpu) in self._slots:
            return
        self._slots.add((node.address, gpu))
        name = self._name(node.address, gpu)
        device = "cpu" if gpu is None else "cuda"
        label = f"{node.address} {'CPU' if gpu is None else f'GPU {gpu}'}"
        env = {var: str(threads) for var in THREAD_ENV_VARS} | self._env
        worker = RayWorker(
            RemoteSlot(node.address, gpu, threads),
            self._cfg.restore,
            self._factory,
            node_id=self._node_id,
            env=env,
            heartbeat_s=self._heartbeat_s,
            mb_in_flight=self._cfg.cluster.mb_in_flight,
        )
        # The same "host (address)" as the actor's own (actor.RestorerActor), which Ray's node
        # table gives before any actor runs there.
        slot = WorkerSlot(name, device, label, gpu, threads, node=f"{node.host} ({node.address})")
        self._pool.add_worker(slot, worker)

    @staticmethod
    def _name(address: str, gpu: int | None) -> str:
        return f"{address}/{'cpu' if gpu is None else f'gpu{gpu}'}"

    def _node_id(self, address: str) -> str | None:
        node = self._nodes.get(address)
        return node.node_id if node is not None else None

    def status(self) -> dict[str, Any]:
        return {
            "address": self._cfg.cluster.address,
            "connected": self._connected,
            "problem": self.problem,
            "nodes": [
                {"address": n.address, "gpus": n.gpus, "cpus": n.cpus, "cpu_offered": n.cpu_offered}
                for n in self._nodes.values()
            ],
        }

    def close(self) -> None:
        if self._connected:
            try:
                ray().shutdown()
            except Exception as exc:  # noqa: BLE001
                log.debug("ray.shutdown: %s", exc)
            self._connected = False


def probe_head(address: str) -> str:
    """Reach the head over TCP before handing the address to Ray (which retries for a long time
    before it fails); returns this machine's address on the way there."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_TIMEOUT_S) as s:
            return str(s.getsockname()[0])
    except OSError as exc:
        raise ClusterError(
            f"cluster.address {address}: cannot reach the Ray head ({exc.strerror or exc}); check the "
            "address and that `gpen-watch cluster head` runs there; local workers carry on"
        ) from None


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
