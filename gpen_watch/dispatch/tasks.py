"""What the pool is handed (``Task``) and what it hands back (``PoolEvent``)."""

from __future__ import annotations

from dataclasses import dataclass

from gpen_watch.base.strenum import StrEnum
from gpen_watch.restore.api import FileJob, FileResult


@dataclass
class Task:
    """One image the pool is responsible for until it reports it done or given up."""

    key: int  # the journal's job id
    job: FileJob
    # Worker crashes/hangs charged to this image so far.
    attempts: int = 0
    # Run it alone on a worker: it was in flight when a worker died, or it ran out of memory.
    isolate: bool = False


class EventKind(StrEnum):
    DONE = "done"  # the result holds it
    GAVE_UP = "gave_up"  # the message says why
    RETRY = "retry"  # informational: the task is queued again, the message says why


@dataclass
class PoolEvent:
    """What happened to a task."""

    kind: EventKind
    task: Task
    worker: str
    result: FileResult | None = None
    message: str = ""
    # Where the worker runs, as it said when ready ("" for a worker on this machine).
    node: str = ""
    # A RETRY that charged the task an attempt (its worker died while restoring it), which the
    # journal counts too; an out-of-memory retry is not one.
    charged: bool = False
