"""The Activity page's reads: one line per run (a job) with its events, newest activity first.

Every page is a bounded read on an index, whatever the journal holds. The runs are found by
walking the events newest first (their own key) and keeping each run at its latest event only, one
probe of ``events_job`` per event walked; a page walks at most ``SCAN_EVENTS`` of them, so even a
stretch of events that all belong to runs shown on earlier pages costs a fixed amount (the next
page then starts where the walk stopped). The failures alone are a keyset page off
``jobs_state_finished`` by finish time, as the Failed page's: a failure is rare among 100,000
runs, and walking the events for them would read all of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpen_watch.journal.queries import JournalQueries
from gpen_watch.journal.records import Event, Job, job_from_row
from gpen_watch.journal.states import FAILURES

# Events one page walks at most, and one read of that walk.
SCAN_EVENTS = 4000
SCAN_CHUNK = 400
# Events listed under one run; a run retried over and over keeps its newest ones (its page has all).
EVENTS_PER_RUN = 40
_TOP = 1 << 62
# Most runs one page may ask for.
MAX_PAGE = 200


@dataclass(frozen=True)
class RunActivity:
    """One run on the Activity page: its job, its latest event, and its steps."""

    job: Job
    last_id: int  # its latest event's id
    last_time: float
    events: tuple[Event, ...]  # oldest first, the newest EVENTS_PER_RUN of them
    events_total: int
    # The newest redo of this run (its result was restored again), None if there is none.
    redone_by: int | None = None


@dataclass(frozen=True)
class ActivityPage:
    runs: list[RunActivity]
    # The next page's ``before``: an event id (every run) or (finished, id) (failures); None: last.
    more: int | tuple[float, int] | None


class ActivityQueries(JournalQueries):
    """The Activity page's reads (``JournalBrowser`` has them)."""

    def run_activity(self, before: int | None = None, limit: int = 48) -> ActivityPage:
        """Runs whose latest event is older than the event ``before``, newest activity first."""
        limit = _bounded(limit)
        picked: list[tuple[int, int]] = []  # (event id, job id)
        key = before if before is not None else _TOP
        walked = 0
        more: int | None = None
        while len(picked) < limit:
            chunk = min(SCAN_CHUNK, SCAN_EVENTS - walked)
            if chunk <= 0:
                more = key  # walked enough for one page: the next one goes on from here
                break
            rows = self._read(
                "SELECT e.id, e.job_id, e.id = (SELECT MAX(l.id) FROM events AS l WHERE l.job_id = e.job_id)"
                " FROM events AS e WHERE e.id < ? ORDER BY e.id DESC LIMIT ?",
                (key, chunk),
            )
            for event_id, job_id, latest in rows:
                key = event_id
                if latest:
                    picked.append((event_id, job_id))
                    if len(picked) == limit:
                        break
            walked += len(rows)
            if len(rows) < chunk and len(picked) < limit:
                break  # the oldest event was reached
        if len(picked) == limit:
            more = picked[-1][0]
        return ActivityPage(self._runs([job_id for _, job_id in picked]), more)

    def failed_activity(self, before: tuple[float, int] | None = None, limit: int = 48) -> ActivityPage:
        """Failed and unsupported runs, the last to fail first, those shown on the Failed page
        and those retried or dismissed since alike."""
        limit = _bounded(limit)
        finished, last_id = before if before is not None else (float("inf"), 0)
        rows = []
        for state in FAILURES:
            # One bounded read per state, merged: an IN list would sort every failure.
            rows += self._read(
                "SELECT id, finished FROM jobs INDEXED BY jobs_state_finished WHERE state = ?"
                " AND finished <= ? AND (finished < ? OR id < ?) ORDER BY finished DESC, id DESC LIMIT ?",
                (str(state), finished, finished, last_id, limit),
            )
        rows.sort(key=lambda r: (r[1], r[0]), reverse=True)
        rows = rows[:limit]
        more = (rows[-1][1], rows[-1][0]) if len(rows) == limit else None
        return ActivityPage(self._runs([r[0] for r in rows]), more)

    def _runs(self, ids: Sequence[int]) -> list[RunActivity]:
        """The runs ``ids`` (in that order) with their events and redos: three reads on indexes."""
        if not ids:
            return []
        marks = ", ".join("?" * len(ids))
        jobs = {
            r["id"]: job_from_row(r) for r in self._read(f"SELECT * FROM jobs WHERE id IN ({marks})", ids)
        }
        events: dict[int, list[Event]] = {}
        totals: dict[int, int] = {}
        for r in self._read(
            "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY job_id ORDER BY id DESC) AS n,"
            f" COUNT(*) OVER (PARTITION BY job_id) AS total FROM events WHERE job_id IN ({marks}))"
            " WHERE n <= ? ORDER BY job_id, id",
            (*ids, EVENTS_PER_RUN),
        ):
            events.setdefault(r["job_id"], []).append(
                Event(r["job_id"], r["time"], r["kind"], r["worker"], r["detail"])
            )
            totals[r["job_id"]] = r["total"]
        last_ids = {
            r[0]: r[1]
            for r in self._read(
                f"SELECT job_id, MAX(id) FROM events WHERE job_id IN ({marks}) GROUP BY job_id", ids
            )
        }
        redone = {
            r[0]: r[1]
            for r in self._read(
                f"SELECT redo_of, MAX(id) FROM jobs WHERE redo_of IN ({marks}) GROUP BY redo_of", ids
            )
        }
        out = []
        for job_id in ids:
            job = jobs.get(job_id)
            if job is None:
                continue
            steps = events.get(job_id, [])
            out.append(
                RunActivity(
                    job=job,
                    last_id=last_ids.get(job_id, 0),
                    last_time=steps[-1].time if steps else job.created,
                    events=tuple(steps),
                    events_total=totals.get(job_id, 0),
                    redone_by=redone.get(job_id),
                )
            )
        return out


def _bounded(limit: int) -> int:
    return max(1, min(int(limit), MAX_PAGE))
