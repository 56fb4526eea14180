"""The cluster's nodes as pool workers: keep a bridge to Ray, follow nodes as they come and go, report.

Called from the service loop (``poll``, a few times a second at most). The service never talks to
Ray itself: a bridge process does (``bridge``), and when it goes (the head went away, the network
broke, it fell silent for SILENCE_S) the remote workers' photos are requeued, local workers carry
on, the log says once that the cluster is unreachable, and a new bridge is tried after a back-off
(RETRY_MIN_S doubling up to RETRY_MAX_S) until the head answers again.

Every GPU of every live node other than this one gets a worker (``bridge.BridgedWorker``); a node
started with `gpen-watch cluster join --cpu` offers one CPU worker. A node that leaves keeps its
workers, which fail to start until it is back (the pool backs off), and are started at once when
it is seen again.
"""

from __future__ import annotations

import logging
import queue
import time
from collections.abc import Callable
from typing import Any

from gpen_watch.cluster import link, started
from gpen_watch.cluster.bridge import Bridge, BridgedWorker, Gone
from gpen_watch.config import Config
from gpen_watch.dispatch.devices import THREAD_ENV_VARS, WorkerSlot
from gpen_watch.dispatch.pool import Pool
from gpen_watch.platform import program

log = logging.getLogger(__name__)

RETRY_MIN_S = 1.0
RETRY_MAX_S = 10.0
# The bridge sends the node table every bridge_main.POLL_S; this much silence means it lost the head.
SILENCE_S = 10.0
# ray.init retries a refused or unauthenticated connection for about 20 s before it fails.
CONNECT_TIMEOUT_S = 90.0


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
        self._env = dict(env or {})
        self._args = link.BridgeArgs(
            cfg.cluster, cfg.restore, factory, heartbeat_s, logging.getLogger().getEffectiveLevel(), self._env
        )
        self._clock = clock
        self._bridge: Bridge | None = None
        self._connected = False
        self._started_at = 0.0
        self._heard = 0.0
        self._next_try = 0.0
        self._backoff = RETRY_MIN_S
        self._outage_said = False  # the current outage is in the log already
        self._lost = ""  # while the head that was connected is away: what status says
        self._nodes: dict[str, link.NodeInfo] = {}
        self._slots: set[tuple[str, int | None]] = set()
        self._own_node: str | None = None
        self.problem: str | None = None

    @property
    def address(self) -> str:
        return self._cfg.cluster.address

    def poll(self) -> None:
        now = self._clock()
        b = self._bridge
        if b is None:
            if now >= self._next_try:
                self._start_bridge(now)
            return
        while True:
            try:
                ev = b.events.get_nowait()
            except queue.Empty:
                break
            if isinstance(ev, Gone):
                self._bridge_gone(b, ev, now)
                return
            self._on_event(ev, now)
        if self._connected and now - self._heard > SILENCE_S:
            log.debug("the cluster bridge said nothing for %g s: ending it", SILENCE_S)
            b.kill()
        elif not self._connected and now - self._started_at > CONNECT_TIMEOUT_S:
            log.debug("the cluster bridge did not connect within %g s: ending it", CONNECT_TIMEOUT_S)
            b.kill()

    def _start_bridge(self, now: float) -> None:
        b = Bridge(self._args, self._pool.wake)
        try:
            b.start()
        except OSError as exc:
            self._say(f"cannot start the cluster bridge process: {exc}")
            self._retry_later(now)
            return
        self._bridge, self._started_at = b, now

    def _on_event(self, ev: link.FromBridge, now: float) -> None:
        if isinstance(ev, link.Connected):
            self._connected, self._own_node, self._heard = True, ev.own_node, now
            self._backoff = RETRY_MIN_S
            if self._outage_said:
                log.info("connected to the Ray cluster at %s", self.address)
            self._outage_said, self._lost = False, ""
            self.problem = None
        elif isinstance(ev, link.Refused):
            self._say(f"{self._lost}; last try: {ev.message}" if self._lost else ev.message)
        elif isinstance(ev, link.Nodes):
            self._heard = now
            self._follow(ev.nodes)

    def _bridge_gone(self, b: Bridge, ev: Gone, now: float) -> None:
        b.close()
        self._bridge = None
        self._sweep_dead_head()
        if self._connected:
            self._connected = False
            self._lost = (
                f"the Ray cluster at {self.address} is unreachable (lost the connection to its head "
                f"at {time.strftime('%H:%M:%S')}); the photos on its workers were requeued, local "
                "workers carry on; reconnecting"
            )
            self._say(self._lost)
            self._nodes = {}
        elif self.problem is None:
            self._say(f"cluster.address {self.address}: the cluster bridge ended ({ev.exitcode}); retrying")
        self._retry_later(now)

    @staticmethod
    def _sweep_dead_head() -> None:
        """A head that `gpen-watch cluster head` started on this machine and whose GCS died (the
        likeliest reason the bridge lost it) leaves its monitor, log monitor and dashboard
        running, about 80 MB each, and Ray never starts its GCS again: they are stopped here."""
        try:
            stopped = started.stop_dead_head()
        except OSError as exc:
            log.debug("could not look for a dead head's processes: %s", exc)
            return
        if stopped:
            log.warning(
                "the cluster head on this machine has died (its GCS is gone): stopped the %d Ray "
                "process(es) it left running; `%s` starts it again",
                stopped,
                program.command("cluster head"),
            )

    def _say(self, problem: str) -> None:
        """Status shows the latest problem; the log has the first of each outage, not every retry."""
        if not self._outage_said:
            log.error("%s", problem)
        else:
            log.debug("%s", problem)
        self._outage_said = True
        self.problem = problem

    def _retry_later(self, now: float) -> None:
        self._next_try = now + self._backoff
        self._backoff = min(RETRY_MAX_S, self._backoff * 2)

    def _current_bridge(self) -> Bridge | None:
        return self._bridge if self._connected else None

    def _follow(self, nodes: tuple[link.NodeInfo, ...]) -> None:
        seen: dict[str, link.NodeInfo] = {}
        for n in nodes:
            if not n.address:
                continue
            if n.node_id == self._own_node and self._cfg.cluster.local_workers:
                continue  # this machine's GPUs have local workers
            seen[n.address] = n
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
                # Back after leaving (or after the head was away): its workers wait out a
                # back-off of up to 30 s; start them now.
                self._pool.retry_now({self._name(a, g) for a, g in self._slots if a == address})
            for gpu in range(node.gpus):
                self._add(node, gpu, max(1, node.cpus // node.gpus))
            if node.cpu_offered:
                self._add(node, None, node.cpus)
        for address in set(before) - set(seen):
            log.warning("cluster node %s left; its photos in flight are requeued", address)
        if not self._slots and self._pool.worker_count() == 0:
            # Not the pool's "no worker configured": the workers come with the nodes.
            self.problem = (
                "no worker yet: no cluster node offers a GPU or CPU to gpen-watch (run "
                f"`gpen-watch cluster join {self.address}` on the GPU machines)"
            )
        elif self.problem and self.problem.startswith("no worker yet"):
            self.problem = None

    def _add(self, node: link.NodeInfo, gpu: int | None, threads: int) -> None:
        if (node.address, gpu) in self._slots:
            return
        self._slots.add((node.address, gpu))
        name = self._name(node.address, gpu)
        device = "cpu" if gpu is None else "cuda"
        label = f"{node.address} {'CPU' if gpu is None else f'GPU {gpu}'}"
        env = {var: str(threads) for var in THREAD_ENV_VARS} | self._env
        worker = BridgedWorker(
            name,
            link.RemoteSlot(node.address, gpu, threads),
            env,
            bridge=self._current_bridge,
            node_id=self._node_id,
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
            "address": self.address,
            "connected": self._connected,
            "problem": self.problem,
            "nodes": [
                {"address": n.address, "gpus": n.gpus, "cpus": n.cpus, "cpu_offered": n.cpu_offered}
                for n in self._nodes.values()
            ],
        }

    def close(self) -> None:
        if self._bridge is not None:
            self._bridge.close()
            self._bridge = None
        self._connected = False
