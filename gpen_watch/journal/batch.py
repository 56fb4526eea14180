"""The batch the overview's progress bar follows: every photo added since the queue was last
empty.

That is the one definition the journal can answer honestly for "what was dropped together": a
folder of 2,000 photos copied into an inbox over ten minutes, and the photo someone adds while
they are being restored, are one batch, because none of them could start before the others were
through. It ends when nothing is waiting or running; the next photo starts a new one.

The queue was last empty at the start of the unbroken stretch of time during which some job was
active (from its arrival to its end). The batch's first job is found by walking back from the
oldest job still active: any older job that ended after that one arrived overlapped it, so the
stretch began at the oldest such job's arrival at the latest; repeat until none overlaps. Each step
is a range read on ``jobs_finished`` of the jobs that ended since that arrival (the batch so far),
and the counts are ranges of the (state, id) index from the first job: both bounded by the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpen_watch.journal.queries import JournalQueries
from gpen_watch.journal.states import ACTIVE, FAILURES, JobState

# Steps of one walk back; a stretch built from more overlaps than this starts where the walk ends.
MAX_STEPS = 500


@dataclass(frozen=True)
class Batch:
    """The photos added since the queue was last empty, by what became of them so far."""

    first_id: int
    since: float  # when its first photo arrived
    total: int
    waiting: int  # queued or running
    done: int  # photos restored or without a face (first runs)
    failed: int  # failed or unsupported
    other: int  # copies of an earlier result, files that went away
    redos: int = 0  # redos done, apart from the photos (as "done" counts everywhere)

    @property
    def ended(self) -> int:
        return self.total - self.waiting


class BatchQueries(JournalQueries):
    """The overview's batch (``JournalBrowser`` has it)."""

    # (the oldest active job, the batch's first job) when last asked: the stretch before that
    # job is known, so the next walk stops as soon as it reaches it (an open overview asks every
    # second, and a long stretch would otherwise be walked again each time).
    _batch_known: tuple[int, int] | None = None

    def current_batch(self) -> Batch | None:
        """The batch under way; None when nothing is waiting or running."""
        oldest = None
        for state in ACTIVE:  # the oldest active job, off the (state, id) index
            row = self._read("SELECT MIN(id) FROM jobs WHERE state = ?", (str(state),))[0][0]
            if row is not None and (oldest is None or row < oldest):
                oldest = int(row)
        if oldest is None:
            self._batch_known = None
            return None
        known = self._batch_known if self._batch_known and self._batch_known[0] <= oldest else None
        first = self._walk_back(oldest, known)
        self._batch_known = (oldest, first)
        # One range count per state on its (state, id) index: no row of the batch is read.
        counts = {
            state: int(
                self._read("SELECT COUNT(*) FROM jobs WHERE state = ? AND id >= ?", (str(state), first))[0][0]
            )
            for state in JobState
        }
        since = float(self._read("SELECT created FROM jobs WHERE id = ?", (first,))[0][0])

        def of(states: tuple[JobState, ...]) -> int:
            return sum(counts[s] for s in states)

        # The redos among them, off the redo_of index (only redos are in it).
        redos = int(
            self._read(
                f"SELECT COUNT(*) FROM jobs WHERE redo_of IS NOT NULL AND id >= ? AND state = '{JobState.DONE}'",
                (first,),
            )[0][0]
        )
        waiting = of(ACTIVE)
        done = of((JobState.DONE,)) - redos
        failed = of(FAILURES)
        total = sum(counts.values())
        return Batch(
            first, since, total, waiting, done, failed, total - waiting - done - redos - failed, redos
        )

    def batch_start(self, job_id: int | None = None) -> int | None:
        """The first run of the batch run ``job_id`` arrived in (None: the newest photo's batch,
        under way or not); None when there is no such run. A redo starts no batch: the newest
        photo's is that of the newest first run, whatever was redone since."""
        if job_id is None:
            row = self._read("SELECT MAX(id) FROM jobs WHERE redo_of IS NULL")[0][0]
            if row is None:
                return None
            job_id = int(row)
        elif not self._read("SELECT 1 FROM jobs WHERE id = ?", (job_id,)):
            return None
        return self._walk_back(job_id)

    def batch_before(self, first: int) -> int | None:
        """The first run of the batch before the one that began at run ``first``; None if none."""
        row = self._read("SELECT MAX(id) FROM jobs WHERE redo_of IS NULL AND id < ?", (first,))[0][0]
        return self._walk_back(int(row)) if row is not None else None

    def _walk_back(self, first: int, known: tuple[int, int] | None = None) -> int:
        """The first run of the stretch run ``first`` arrived in (the module's docstring); with
        ``known`` (a run, and where its stretch began), the walk stops on reaching that run."""
        for _ in range(MAX_STEPS):
            if known is not None and first <= known[0]:
                # It overlapped the stretch walked before, which began at known[1].
                return min(first, known[1])
            created = self._read("SELECT created FROM jobs WHERE id = ?", (first,))[0][0]
            older = self._read(
                # A run with no end yet (still waiting or being restored) overlaps every later one.
                "SELECT MIN(id) FROM jobs INDEXED BY jobs_finished WHERE (finished > ? OR finished IS NULL)"
                " AND id < ?",
                (created, first),
            )[0][0]
            if older is None:
                break
            first = int(older)
        return first
