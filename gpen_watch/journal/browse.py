"""The journal read page by page, for the dashboard: per-inbox counts, the activity, the results and
the failures, newest first.

Every read here is a bounded query on an index (``jobs_state``, ``jobs_finished``, the events' own
key), never a whole-table load: with a hundred thousand jobs a page costs what a page of twenty
costs. Pages are keyset pages (``before``: the last row of the previous page), which stay cheap and
stable while new rows arrive at the top. The dashboard opens its own read-only connection (WAL lets
it read beside the service's writes).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gpen_watch.journal.activity import ActivityQueries
from gpen_watch.journal.batch import BatchQueries
from gpen_watch.journal.connection import connect, default_path
from gpen_watch.journal.people import PeopleQueries
from gpen_watch.journal.records import Event, Job, job_from_row
from gpen_watch.journal.review import ReviewQueries
from gpen_watch.journal.states import FAILURES, JobState, sql_in
from gpen_watch.journal.submissions import SubmissionQueries

# Most rows one page may ask for.
MAX_PAGE = 200


@dataclass(frozen=True)
class InboxCounts:
    inbox: str
    waiting: int = 0
    running: int = 0
    done_today: int = 0
    failed: int = 0  # set aside (failed or unsupported), ever


@dataclass(frozen=True)
class Keyset:
    """Where a page of jobs ordered by finish time ends: pass it back as ``before``."""

    finished: float
    id: int

    @property
    def token(self) -> str:
        return f"{self.finished!r}:{self.id}"

    @classmethod
    def parse(cls, text: str) -> Keyset | None:
        """None for anything that is not a key this module wrote (the dashboard's URLs carry it)."""
        when, sep, job_id = text.partition(":")
        if not sep or not job_id.isdigit() or len(text) > 64:
            return None
        try:
            finished = float(when)
        except ValueError:
            return None
        return cls(finished, int(job_id)) if math.isfinite(finished) else None


class JournalBrowser(ActivityQueries, BatchQueries, ReviewQueries, SubmissionQueries, PeopleQueries):
    """A read-only view of a journal file (the service keeps writing it)."""

    @classmethod
    def open(cls, path: os.PathLike[str] | str | None = None) -> JournalBrowser:
        path = Path(path) if path is not None else default_path()
        return cls(connect(path, readonly=True), path)

    def inbox_counts(self, inboxes: list[str]) -> list[InboxCounts]:
        """Counts for each of ``inboxes`` (in that order), and for any other inbox the journal
        still has waiting, failed or today's done photos of (one removed from the settings)."""
        waiting: dict[str, dict[str, int]] = {}
        for row in self._read(
            f"SELECT inbox, state, COUNT(*) FROM jobs WHERE state IN {sql_in((JobState.QUEUED, JobState.RUNNING))}"
            " GROUP BY inbox, state"
        ):
            waiting.setdefault(row[0], {})[row[1]] = row[2]
        failed = {
            row[0]: row[1]
            for row in self._read(
                f"SELECT inbox, COUNT(*) FROM jobs WHERE state IN {sql_in(FAILURES)} AND hidden IS NULL GROUP BY inbox"
            )
        }
        done = {
            row[0]: row[1]
            for row in self._read(
                # Photos done today as the status counts them: first runs, redos apart.
                f"SELECT inbox, COUNT(*) FROM jobs WHERE finished >= ? AND state = '{JobState.DONE}'"
                " AND redo_of IS NULL GROUP BY inbox",
                (self._midnight(),),
            )
        }
        names = list(dict.fromkeys([*inboxes, *sorted(set(waiting) | set(failed) | set(done))]))
        return [
            InboxCounts(
                name,
                waiting.get(name, {}).get(JobState.QUEUED, 0),
                waiting.get(name, {}).get(JobState.RUNNING, 0),
                done.get(name, 0),
                failed.get(name, 0),
            )
            for name in names
        ]

    def last_event_id(self) -> int:
        """The newest event's id (0: none): a page whose data changed has a newer one."""
        return int(self._read("SELECT COALESCE(MAX(id), 0) FROM events")[0][0])

    def results(self, before: Keyset | None = None, limit: int = 48) -> list[Job]:
        """Done jobs, the last finished first."""
        return self._finished_page((JobState.DONE,), before, limit)

    def failures(self, before: Keyset | None = None, limit: int = 50) -> list[Job]:
        """Failed and unsupported jobs (set aside) still shown (not retried or dismissed), the
        last first."""
        return self._finished_page(FAILURES, before, limit, shown_only=True)

    def events_of(self, job_id: int) -> list[Event]:
        return self.history(job_id)

    def _finished_page(
        self, states: Iterable[JobState], before: Keyset | None, limit: int, shown_only: bool = False
    ) -> list[Job]:
        # One bounded read per state off the (state, finished) index, merged here: an IN list
        # would make SQLite sort every row of those states. (finished, id) is the key; the range
        # on finished alone lets the index serve the order (id is its rowid tail).
        key = before or Keyset(float("inf"), 0)
        n = _bounded(limit)
        rows = []
        for state in states:
            rows += self._read(
                "SELECT * FROM jobs INDEXED BY jobs_state_finished WHERE state = ? AND finished <= ?"
                " AND (finished < ? OR id < ?)"
                + (" AND hidden IS NULL" if shown_only else "")
                + " ORDER BY finished DESC, id DESC LIMIT ?",
                (str(state), key.finished, key.finished, key.id, n),
            )
        rows.sort(key=lambda r: (r["finished"], r["id"]), reverse=True)
        return [job_from_row(r) for r in rows[:n]]


def next_key(page: list[Job]) -> Keyset | None:
    """The ``before`` of the page after ``page`` (None: it was the last)."""
    if not page or page[-1].finished is None:
        return None
    return Keyset(page[-1].finished, page[-1].id)


def _bounded(limit: int) -> int:
    return max(1, min(int(limit), MAX_PAGE))
