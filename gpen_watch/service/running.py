"""What exists only while the service runs: the journal, the pool, the watcher, and the loop's flags.

``Service.run`` builds one ``Running`` once the journal is open and the pool exists, hands it to the
loop's steps (``intake``, ``work``, ``report``) and drops it when it returns: nothing outside a run
can reach a closed journal or a pool that is gone, and no step has to check that they exist.
Only the service loop's thread touches it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gpen_watch.base.fsutil import remove_quietly
from gpen_watch.config import Config
from gpen_watch.dispatch.pool import Pool, PoolEvent, Task
from gpen_watch.journal import Journal
from gpen_watch.journal.states import JobState
from gpen_watch.outbox.failed import fail as fail_and_set_aside
from gpen_watch.outbox.moves import OriginalOutcome
from gpen_watch.service.batch import BatchWatch
from gpen_watch.service.model_gate import ModelGate
from gpen_watch.service.originals_watch import OriginalsWatch
from gpen_watch.service.presence_watch import PresenceWatch
from gpen_watch.service.standby import Standby
from gpen_watch.service.throughput import ThroughputMeter
from gpen_watch.service.views import ViewsKeeper
from gpen_watch.watch.events import InboxState
from gpen_watch.watch.watcher import Watcher

if TYPE_CHECKING:
    from gpen_watch.cluster.membership import Membership

log = logging.getLogger(__name__)

# After the outbox refuses a write (full, read-only, gone), wait this long before trying again.
# The same for originals the archive or failed/ folder refused to take (they wait in the inbox).
OUTBOX_RETRY_S = 30.0


@dataclass
class WorkerRestart:
    """A restart of the workers under way (``service.reload``): the old pool finishes until
    ``deadline``, then ``make_pool`` makes the new one (a later reload replaces it with one on
    newer settings)."""

    make_pool: Callable[[], Pool]
    deadline: float
    started: float = field(default_factory=time.monotonic)


@dataclass
class Running:
    cfg: Config
    journal: Journal
    pool: Pool
    gate: ModelGate | None
    stop: threading.Event  # the service's stop flag (set from any thread)
    # Whether arrivals get the engine's header checks (see intake.refusal).
    header_checks: bool = True
    watcher: Watcher | None = None
    # cluster.address set: the Ray cluster's nodes as pool workers (imported only then).
    cluster: Membership | None = None
    # Where the workers write each photo's views, kept within dashboard.views_mb; None: no views.
    views: ViewsKeeper | None = None
    originals: OriginalsWatch = field(init=False)
    # Inboxes and outboxes on drives or shares that went away (service.presence_watch).
    presence: PresenceWatch = field(init=False)
    # Results done while their outbox was away: committed when it is back (jobs.commit_held).
    held: list[PoolEvent] = field(default_factory=list)
    # Each inbox's latest state from the watcher (away or watched, polling and why, placeholders).
    inbox_states: dict[Path, InboxState] = field(default_factory=dict)
    tp: ThroughputMeter = field(default_factory=ThroughputMeter)
    started: float = field(default_factory=time.monotonic)
    # The same moment by the wall clock, for people: the Overview's "since the service started".
    started_at: float = field(default_factory=time.time)
    workers_started: bool = False
    paused: bool = False  # by the user (pause); a standby is apart, and ends by itself
    # Outside workers.schedule, or on battery: no new claims (service.standby).
    standby: Standby = field(default_factory=Standby.from_environ)
    # Whether a claim may find queued jobs; saves a write transaction on every idle wake-up.
    maybe_queued: bool = True
    hold_until: float = 0.0  # no new claims before this (outbox trouble)
    problem: str | None = None
    # New settings restart the workers: the old pool finishing its photos (service.reload).
    restart: WorkerRestart | None = None
    # The batch under way, for the status (read from the journal when its counts change).
    batches: BatchWatch = field(init=False)

    def __post_init__(self) -> None:
        self.batches = BatchWatch(self.journal.path)
        self.presence = PresenceWatch(self.cfg)
        self.originals = OriginalsWatch(self.cfg, OUTBOX_RETRY_S, self.presence.away)

    def start_workers(self) -> None:
        self.workers_started = True
        self.maybe_queued = True
        self.pool.start()

    def in_standby(self) -> bool:
        """Whether a standby keeps new photos waiting, looked at again; as one begins the pool
        hands out nothing more (what the workers hold finishes), and as it ends work goes on,
        unless the user paused."""
        if self.standby.update(self.cfg.workers):
            self.maybe_queued = True
            if self.standby.on:
                self.pool.pause()
            elif not self.paused:
                self.pool.resume()
        return self.standby.on

    def job_ended(self) -> None:
        # A queued job with the same content as this one may be held back (Journal.claim_batch):
        # the next claim takes it, or ends it as a duplicate of this one.
        self.maybe_queued = True

    def ended(
        self,
        original: OriginalOutcome | None,
        *,
        faces: int | None = None,
        failed: bool = False,
        redo: bool = False,
        flagged: int = 0,
    ) -> None:
        """What follows a job's end in the journal, wherever it ended: note what became of its
        original (one its folder refused waits in the inbox and is retried), count it for the
        status (``faces``: restored with that many, ``flagged`` of them over the identity
        threshold; ``redo``: a redo, counted apart from the photos; ``failed``: a failure), and
        wake the claim (``job_ended``)."""
        self.originals.note(original)
        if faces is not None:
            self.tp.record(faces, redo=redo, flagged=flagged)
        if failed:
            self.tp.record_failure()
        self.job_ended()

    def fail(
        self,
        job_id: int,
        reason: str,
        kind: JobState = JobState.FAILED,
        *,
        tmp: Path | None = None,
        ours: bool = False,
        counted: bool = True,
    ) -> None:
        """End a job as failed or unsupported: the journal, its record in failed/ and its original
        (``outbox.failed.fail``), then ``ended``. ``counted``: in this run's failure count (a file
        set aside for its type on arrival, or for its output name, is not)."""
        outcome = fail_and_set_aside(
            self.journal, job_id, reason, self.cfg, kind=kind, tmp=tmp, ours=ours, away=self.presence.away
        )
        self.ended(outcome, failed=counted)

    def outbox_trouble(self, message: str) -> None:
        self.maybe_queued = True
        self.problem = f"outbox: {message}; retrying every {OUTBOX_RETRY_S:g} s"
        self.hold_until = time.monotonic() + OUTBOX_RETRY_S
        log.error("%s", self.problem)

    def requeue(self, tasks: list[Task], reason: str) -> None:
        self.maybe_queued = True
        for t in tasks:
            remove_quietly(t.job.dst)
            self.journal.move(t.key, JobState.QUEUED, reason)
        if tasks:
            log.info("%d run(s) handed back to the queue", len(tasks))
