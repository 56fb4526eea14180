"""Messages between the service and its cluster bridge (``bridge_main``), as typed dataclasses.

The bridge is the one process that talks to Ray on the service's behalf; the service never imports
ray. Worker traffic is the pool's own ``protocol`` messages, tagged with the worker they are for
(``wid``: the worker's name and which start of it, so a late message from a worker the service has
already given up on is never taken for its successor's).

service -> bridge (``ToBridge``)
    StartWorker(wid, slot, node_id)  create the actor of one remote GPU (or CPU) on that node
    ToRemote(wid, msg)               a pool message for that worker (Jobs, Stop)
    KillWorker(wid)                  end it now
    Close()                          shut down the Ray connection and exit

bridge -> service (``FromBridge``)
    Connected(address, own_node)     ray.init worked; own_node: the service machine's Ray node id
    Refused(message)                 the cluster cannot be reached or refused us; the bridge exits
    Nodes(nodes)                     the cluster's live nodes, every few seconds (also its heartbeat)
    FromRemote(wid, msg)             a worker's message (Ready, Took, Result, Heartbeat, Fatal, Bye)
    Ended(wid, clean)                that worker is gone (clean: it said Bye after a Stop)
    Log(level, logger, message)      the bridge's log records (``protocol.Log``)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from gpen_watch.config import ClusterConfig, RestoreConfig
from gpen_watch.dispatch import protocol as P


@dataclass(frozen=True)
class BridgeArgs:
    """Everything the bridge needs; pickled to it by the spawn context."""

    cluster: ClusterConfig
    restore: RestoreConfig
    factory: str
    heartbeat_s: float
    log_level: int = logging.INFO
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RemoteSlot:
    """Where one remote worker runs: a node (by its address) and what it offers gpen-watch."""

    address: str  # the node's IP, stable across its restarts (its Ray node id is not)
    gpu: int | None  # which of its GPUs (an index for names only: Ray picks the device), None: CPU
    threads: int


@dataclass(frozen=True)
class NodeInfo:
    """One live node, as Ray's node table has it."""

    node_id: str
    address: str
    host: str
    gpus: int
    cpus: int
    cpu_offered: bool


@dataclass(frozen=True)
class StartWorker:
    wid: str
    slot: RemoteSlot
    node_id: str
    env: dict[str, str]


@dataclass(frozen=True)
class ToRemote:
    wid: str
    msg: P.ToWorker


@dataclass(frozen=True)
class KillWorker:
    wid: str


@dataclass(frozen=True)
class Close:
    pass


@dataclass(frozen=True)
class Connected:
    address: str
    own_node: str


@dataclass(frozen=True)
class Refused:
    message: str


@dataclass(frozen=True)
class Nodes:
    nodes: tuple[NodeInfo, ...]


@dataclass(frozen=True)
class FromRemote:
    wid: str
    msg: P.FromWorker


@dataclass(frozen=True)
class Ended:
    wid: str
    clean: bool


ToBridge = StartWorker | ToRemote | KillWorker | Close
FromBridge = Connected | Refused | Nodes | FromRemote | Ended | P.Log
