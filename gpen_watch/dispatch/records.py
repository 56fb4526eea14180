"""What the fault policy keeps per worker (``WorkerRecord``), the states a worker goes through, and
the actions the policy asks the pool to carry out."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpen_watch.base.strenum import StrEnum
from gpen_watch.dispatch import protocol as P
from gpen_watch.dispatch.devices import WorkerSlot
from gpen_watch.dispatch.tasks import Task
from gpen_watch.gpu.nvml import GpuSample
from gpen_watch.restore.api import ModelKey


class WorkerState(StrEnum):
    """A worker's state, as `status` shows it (READY as "idle" or "busy": ``status_row``)."""

    STARTING = "starting"
    READY = "ready"
    STOPPING = "stopping"
    BACKOFF = "restarting"
    ERROR = "error"
    RETIRED = "retired"
    STOPPED = "stopped"
    # Not started, or stopped by files it could not load: the service's model gate holds it until
    # every file it needs is there (service.model_gate), then starts it.
    WAITING_FOR_MODELS = "waiting for model files"


_S = WorkerState
# Every move a worker makes, and only these (``WorkerRecord.move`` refuses any other: a bug of
# ours). Any state may go to STOPPED: the pool was stopped, or killed with everything in it.
TRANSITIONS: dict[WorkerState, frozenset[WorkerState]] = {
    # spawned; the spawn itself failed; held for its model files.
    _S.STOPPED: frozenset({_S.STARTING, _S.BACKOFF, _S.WAITING_FOR_MODELS}),
    # said it is ready; its start failed (tried again, stopped by an error or for its model
    # files, retired with its device).
    _S.STARTING: frozenset({_S.READY, _S.BACKOFF, _S.ERROR, _S.RETIRED, _S.STOPPED}),
    # asked to finish and exit; died while working (restarted).
    _S.READY: frozenset({_S.STOPPING, _S.BACKOFF, _S.STOPPED}),
    _S.STOPPING: frozenset({_S.STOPPED}),
    # its back-off is over; another spawn failed.
    _S.BACKOFF: frozenset({_S.STARTING, _S.BACKOFF, _S.STOPPED}),
    # another try (resume, or its model files changed); its model files are awaited.
    _S.ERROR: frozenset({_S.BACKOFF, _S.WAITING_FOR_MODELS, _S.STOPPED}),
    _S.RETIRED: frozenset({_S.BACKOFF, _S.STOPPED}),
    # its files are there: started (first start) or tried again (after a failed load).
    _S.WAITING_FOR_MODELS: frozenset({_S.STARTING, _S.BACKOFF, _S.STOPPED}),
}

ALIVE = (WorkerState.STARTING, WorkerState.READY, WorkerState.STOPPING)
# States in which a worker is, or will soon be, able to take work.
COMING = (WorkerState.STARTING, WorkerState.READY, WorkerState.BACKOFF)


class TransitionError(ValueError):
    """A move ``TRANSITIONS`` does not list: a bug of gpen-watch, never the user's."""


# --- what the pool is asked to do -----------------------------------------------------------------


@dataclass(frozen=True)
class Spawn:
    index: int


@dataclass(frozen=True)
class Kill:
    """Kill the worker, collect what it said, then report its exit (``on_exit``)."""

    index: int
    reason: str


@dataclass(frozen=True)
class Send:
    index: int
    msg: P.ToWorker


Action = Spawn | Kill | Send


@dataclass(eq=False)
class Flight:
    task: Task
    taken: bool = False


@dataclass(eq=False)
class WorkerRecord:
    """What the policy knows about one worker slot."""

    slot: WorkerSlot
    state: WorkerState = WorkerState.STOPPED
    pid: int | None = None
    flights: dict[int, Flight] = field(default_factory=dict)
    started_at: float = 0.0
    last_msg_at: float = 0.0
    # When the worker last finished an image, or went from idle to busy.
    last_progress_at: float = 0.0
    # The restorer's own progress count as last reported in a heartbeat.
    progress_seen: int = 0
    # Its restorer's count of photos past decoding, from the last heartbeat (-1: not said).
    restoring_said: int = -1
    restart_at: float = 0.0
    start_failures: int = 0
    crash_streak: int = 0  # crashes since the last finished image
    restarts: int = 0
    done: int = 0
    faces: int = 0
    # Photos the worker's restorer wants in hand at once (it says so when ready; 0: not said).
    read_ahead: int = 0
    # What its restorer loaded (model, detector, mask, device, precision), as it said when ready.
    loaded: str = ""
    # The model sets its restorer holds, least recently used first (it says so on each change).
    model_sets: tuple[ModelKey, ...] = ()
    # The device its restorer chose where the slot said "auto" ("Apple GPU (mps)", "cpu").
    device_label: str = ""
    # The threads its restorer really runs, as it said when ready (0: the slot's): a cluster
    # node's actor may be confined to fewer cores than its Ray node counts.
    threads: int = 0
    node: str = ""
    # What runs its networks, and why that is not what was asked for, as it said when ready; and
    # the last note the parent logged for it (a restart saying the same note again is not logged).
    engine: str = ""
    engine_note: str = ""
    note_logged: str = ""
    # Its machine's GPUs, from its last heartbeat (cluster workers only).
    gpus: tuple[GpuSample, ...] = ()
    # The photos its restorer holds and where each is, from its last heartbeat.
    photos: tuple[P.PhotoAt, ...] = ()
    # The worker's memory budget (MB, 0: not said) and its highest resident memory when each stage
    # of a photo ended, from its results (this process only: cleared when it is restarted).
    memory_budget_mb: int = 0
    rss_mb: dict[str, float] = field(default_factory=dict)
    # Running an isolated task: nothing else is sent until it finishes.
    exclusive: bool = False
    fatal: P.Fatal | None = None
    kill_reason: str | None = None
    error: str | None = None
    # Its going was logged (a crash, or the first failed start): the failed starts that follow are
    # at debug until it is ready again, so a node away for an hour is not an error every 30 s.
    said_gone: bool = False
    # In ERROR because its model files could not be loaded (the service retries when they change).
    model_error: bool = False

    def move(self, to: WorkerState) -> None:
        """The one way a worker's state changes: to a state ``TRANSITIONS`` allows from its own."""
        if to is not self.state and to not in TRANSITIONS[self.state]:
            raise TransitionError(f"worker {self.slot.name}: no move from {self.state} to {to}")
        self.state = to


def photo_rows(w: WorkerRecord) -> list[dict[str, Any]]:
    """The photos a worker's restorer holds, as its last heartbeat said, for the status: only
    those it still has (a result may have come since), by the name the user dropped."""
    rows = []
    for at in w.photos:
        flight = w.flights.get(at.key)
        if flight is None:
            continue
        p = at.progress
        name = Path(flight.task.job.src).name
        rows.append({"job_id": at.key, "name": name, "stage": str(p.stage), "done": p.done, "total": p.total})
    return rows


def status_row(w: WorkerRecord, in_flight_cap: int, now: float) -> dict[str, Any]:
    """One worker as the pool's snapshot (and so the status) shows it; what its process said
    (what it loaded, its engine, its photos) only while one runs."""
    alive = w.state in ALIVE
    state = ("busy" if w.flights else "idle") if w.state == WorkerState.READY else str(w.state)
    return {
        "name": w.slot.name,
        "device": w.device_label or w.slot.label,
        "state": state,
        "pid": w.pid if alive else None,
        "threads": w.threads or w.slot.threads,
        "in_flight": len(w.flights),
        "in_flight_cap": in_flight_cap,
        "done": w.done,
        "faces": w.faces,
        "loaded": w.loaded if alive else "",
        "engine": w.engine if alive else "",
        "engine_note": w.engine_note if alive else "",
        "model_sets": [dataclasses.asdict(k) for k in w.model_sets] if alive else [],
        "node": w.node,
        "gpus": [dataclasses.asdict(g) for g in w.gpus] if alive else [],
        "photos": photo_rows(w) if alive else [],
        "restarts": w.restarts,
        "memory_budget_mb": w.memory_budget_mb or None,
        "rss_mb": dict(w.rss_mb),
        "last_seen_s": round(now - w.last_msg_at, 1) if alive else None,
        "error": w.error,
    }
