"""A remote GPU (or CPU) as a pool worker: the service's side of one ``actor.RestorerActor``.

It implements ``dispatch.worker.Worker``, so the pool's fault policy treats it like a local
process: Ready when the actor has loaded its models, Took when a photo is handed to it, Result
with the output written to the job's temp name, Heartbeat while the actor answers pings, and the
channel closes when the actor or its node is gone (the policy requeues and charges an attempt).

One thread per remote worker talks to Ray (``ray.wait`` blocks) and turns what happens into
``protocol`` messages on a Pipe, whose reading end is what the pool waits on. Photos go out as
bytes (``dispatch.payload``) only while those in flight stay under ``cluster.mb_in_flight``, so a
slow node never holds more than that of the service's memory; the rest wait here.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from gpen_watch.cluster.link import RemoteSlot
from gpen_watch.cluster.raylib import ray
from gpen_watch.config import RestoreConfig
from gpen_watch.dispatch import payload
from gpen_watch.dispatch import protocol as P
from gpen_watch.dispatch.worker import drain
from gpen_watch.restore.api import FileJob

log = logging.getLogger(__name__)

# How long the Ray thread waits for anything before it looks at its queue again.
_TICK_S = 0.2
# How long a stopping actor gets to remove its scratch folder.
_CLOSE_S = 10.0
# glibc's malloc settings for the actor's process, from its start (Ray starts a process of its
# own for an actor with a runtime environment). The engine's runtime tuning
# (restore.runtime.device.tune_malloc_for_inference) does not reach the actor's restorer: it runs on a
# thread of its own, whose allocations go to a secondary arena that keeps mapping fresh pages
# (docs/benchmarks.md has the page faults and CPU). One arena, no mmap for large blocks and no
# trimming keep its activation memory reused, as in a local worker.
ACTOR_MALLOC_ENV = {
    "MALLOC_ARENA_MAX": "1",
    "MALLOC_MMAP_MAX_": "0",
    "MALLOC_TRIM_THRESHOLD_": str(2**31 - 1),
}


class RayWorker:
    def __init__(
        self,
        slot: RemoteSlot,
        restore: RestoreConfig,
        factory: str,
        *,
        node_id: Callable[[str], str | None],
        env: dict[str, str],
        heartbeat_s: float,
        mb_in_flight: int,
    ) -> None:
        self._slot = slot
        self._restore = restore
        self._factory = factory
        self._node_id = node_id
        self._env = env
        self._heartbeat_s = heartbeat_s
        self._cap = mb_in_flight << 20
        self._r: Connection | None = None
        self._thread: threading.Thread | None = None
        self._jobs: queue.Queue[P.ToWorker] = queue.Queue()
        self._actor: Any = None
        self._clean = False

    @property
    def pid(self) -> int | None:
        return None  # the actor's process is on another machine; status names its node instead

    def start(self) -> None:
        node = self._node_id(self._slot.address)
        if node is None:
            raise OSError(f"node {self._slot.address} is not in the cluster (left, or not back yet)")
        r_ = ray()
        strategy = r_.util.scheduling_strategies.NodeAffinitySchedulingStrategy(node, soft=False)
        if self._slot.gpu is None:
            resources: dict[str, Any] = {"num_gpus": 0, "resources": {"gpen_watch_cpu": 1}}
        else:
            resources = {"num_gpus": 1}
        from gpen_watch.cluster.actor import RestorerActor

        self._actor = (
            r_.remote(RestorerActor)
            .options(
                num_cpus=0,
                max_concurrency=256,
                scheduling_strategy=strategy,
                runtime_env={"env_vars": ACTOR_MALLOC_ENV},
                **resources,
            )
            .remote(self._restore, self._factory, self._slot.threads, self._env)
        )
        r, w = mp.get_context("spawn").Pipe(duplex=False)
        self._r, self._jobs, self._clean = r, queue.Queue(), False
        self._thread = threading.Thread(
            target=self._run, args=(self._actor, w), daemon=True, name=f"ray {self._slot.address}"
        )
        self._thread.start()

    def send(self, msg: P.ToWorker) -> bool:
        if self._thread is None or not self._thread.is_alive():
            return False
        self._jobs.put(msg)
        return True

    def stop(self) -> bool:
        return self.send(P.Stop())

    def receive(self) -> tuple[list[P.FromWorker], bool]:
        return drain(self._r)

    def handles(self) -> list[Any]:
        return [self._r] if self._r is not None else []

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def kill(self) -> None:
        if self._actor is not None:
            with contextlib.suppress(Exception):
                ray().kill(self._actor, no_restart=True)

    def reap(self) -> int | None:
        thread, r = self._thread, self._r
        self._thread, self._r = None, None
        if thread is not None:
            if not self._clean:
                self.kill()
            thread.join(10.0)
        if r is not None:
            r.close()
        self._actor = None
        return 0 if self._clean else None

    # --- the Ray thread -------------------------------------------------------------------------

    def _run(self, actor: Any, out: Connection) -> None:
        r_ = ray()
        try:
            self._serve(r_, actor, out)
        except Exception as exc:  # noqa: BLE001 - whatever Ray raised: the actor or its node is gone
            # Ray's own text (RpcError, gRPC status codes) is for a bug report, not the log's
            # warnings: there the pool says the loss in words, and what it does about it.
            log.debug("remote worker %s ended: %r", self._slot.address, exc)
            with contextlib.suppress(Exception):
                out.send(P.Fatal(P.FatalKind.CRASH, lost_words(exc, self._slot.address)))
        finally:
            with contextlib.suppress(Exception):
                r_.kill(actor, no_restart=True)
            out.close()

    def _serve(self, r_: Any, actor: Any, out: Connection) -> None:
        ready_ref = actor.ready.remote()
        while not r_.wait([ready_ref], timeout=self._heartbeat_s)[0]:
            pass  # loading models; the pool's start timeout (and kill) bound this
        said = r_.get(ready_ref)
        out.send(said)
        if isinstance(said, P.Fatal):
            return
        flights: dict[Any, tuple[int, FileJob, int]] = {}
        backlog: deque[P.JobItem] = deque()
        held = 0
        stopping = False
        ping: Any = None  # a ping in flight; no answer means no heartbeat, and the pool notices
        pinged = 0.0
        model_sets: tuple[Any, ...] = ()  # as the actor last reported them
        while True:
            stopping = self._take(backlog, block=not flights and ping is None) or stopping
            while backlog and not stopping and (not flights or held < self._cap):
                item = backlog.popleft()
                try:
                    photo = payload.pack(item.job)
                except OSError as exc:
                    out.send(P.Result(item.key, payload.unreadable(item.job, exc)))
                    continue
                flights[actor.restore.remote(item.key, photo)] = (item.key, item.job, len(photo.data))
                held += len(photo.data)
                out.send(P.Took(item.key))
            if stopping and not flights:
                with contextlib.suppress(Exception):  # its scratch folder; a killed one is swept later
                    r_.get(actor.close.remote(), timeout=_CLOSE_S)
                out.send(P.Bye(tuple(i.key for i in backlog)))
                self._clean = True
                return
            if ping is None and time.monotonic() - pinged >= self._heartbeat_s:
                ping, pinged = actor.ping.remote(), time.monotonic()
            waiting = [*flights, *([ping] if ping is not None else [])]
            if not waiting:
                continue
            done, _ = r_.wait(waiting, num_returns=1, timeout=_TICK_S)
            if done:  # collect every one that is ready, not only the first
                done, _ = r_.wait(waiting, num_returns=len(waiting), timeout=0)
            for ref in done:
                if ref is ping:
                    gpus, sets, photos = r_.get(ping)  # raises once the actor is gone
                    out.send(P.Heartbeat(bool(flights), gpus=tuple(gpus or ()), photos=tuple(photos)))
                    if sets != model_sets:
                        model_sets = tuple(sets)
                        out.send(P.ModelSets(model_sets))
                    ping = None
                    continue
                key, job, size = flights.pop(ref)
                held -= size
                out.send(P.Result(key, payload.unpack(r_.get(ref), job)))

    def _take(self, backlog: deque[P.JobItem], *, block: bool) -> bool:
        """Move what the pool sent into the backlog; True once it asked to stop."""
        stop = False
        while True:
            try:
                msg = self._jobs.get(timeout=_TICK_S) if block else self._jobs.get_nowait()
            except queue.Empty:
                return stop
            block = False
            if isinstance(msg, P.Jobs):
                backlog.extend(msg.items)
            else:
                stop = True


# What Ray raises when an actor or its node is gone, by the exception's class name (its
# subclasses included), in words.
_LOSSES = (
    ("NodeDiedError", "node {address} died or left the cluster"),
    (
        "ActorUnavailableError",
        "node {address} stopped answering: the machine is off or off the network, or its Ray processes died",
    ),
    (
        "ActorDiedError",
        "the worker process on node {address} ended: the node died or left, or the process was killed",
    ),
    (
        "RayActorError",
        "the worker process on node {address} ended: the node died or left, or the process was killed",
    ),
    ("OwnerDiedError", "photo bytes on their way to node {address} were lost"),
    ("ObjectLostError", "photo bytes on their way to node {address} were lost"),
    ("RaySystemError", "Ray lost its connection to node {address}"),
)


def lost_words(exc: BaseException, address: str) -> str:
    """Why a remote worker is gone, in words: which node, what happened, what becomes of its
    photos (the pool requeues them and restarts the worker); the exception's own text goes to the
    debug log."""
    names = {t.__name__ for t in type(exc).__mro__}
    said = next(
        (words.format(address=address) for name, words in _LOSSES if name in names),
        f"lost the worker on node {address}: Ray raised {type(exc).__name__}, the debug log has its text",
    )
    return f"{said}; its photos are requeued"
