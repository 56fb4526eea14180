"""Results as a review queue: the photos a filter matches, each once as its newest done run (or
its failure), in the order a person chose, a numbered page at a time, with the photos before and
after any one of them in that order.

Every read is one SQL statement whose WHERE clause is built here from a ``ReviewFilter`` (fixed
fragments and bound values, never text from a request); the costs on a journal of 100,000 runs
are in docs/benchmarks.md (``python -m benchmarks.review``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gpen_watch.base.strenum import StrEnum
from gpen_watch.journal.queries import JournalQueries
from gpen_watch.journal.records import Job, job_from_row
from gpen_watch.journal.states import FAILURES, SUCCEEDED, JobState, Mark, sql_in

# The most a page shows, and the most runs one bulk action over "every match" takes.
PAGE_MAX = 200
BULK_MAX = 10_000


class Outcome(StrEnum):
    RESTORED = "restored"  # done, with at least one face restored
    NO_FACE = "noface"  # done, nothing restored (no face, or none picked)
    REDONE = "redone"  # done by a redo
    COPY = "copy"  # a copy of another photo's result (the same photo dropped again elsewhere)
    FAILED = "failed"  # failed or unsupported, still on the Failed page


class Review(StrEnum):
    UNREVIEWED = "unreviewed"  # no flag and no stars yet
    REVIEWED = "reviewed"  # a flag or stars
    ACCEPTED = "accepted"  # picked
    REJECTED = "rejected"
    LOOK = "look"  # flagged "needs another look"


class Sort(StrEnum):
    NEWEST = "newest"
    OLDEST = "oldest"
    NAME = "name"
    FACES = "faces"  # most faces first
    IDENTITY = "identity"  # the largest identity change first (docs/identity.md)


# Each order as (its key's SQL terms, descending?): one direction for every term, so "the run
# after this one" is one row-value comparison on the same terms.
_ORDERS: dict[Sort, tuple[tuple[str, ...], bool]] = {
    Sort.NEWEST: (("j.finished", "j.id"), True),
    Sort.OLDEST: (("j.finished", "j.id"), False),
    Sort.NAME: (("j.rel COLLATE NOCASE", "j.id"), False),
    Sort.FACES: (("COALESCE(j.faces, 0)", "j.finished", "j.id"), True),
    # A run with no face measured (none restored, or the check did not run) comes after every
    # measured one: -1 is below any distance.
    Sort.IDENTITY: (("COALESCE(j.identity, -1)", "j.finished", "j.id"), True),
}

# The runs Results holds (``jobs.listed``, kept by the schema's triggers): each photo's newest done
# run (or its copy of another photo's result), and each failure still on the Failed page.
_SHOWN = "j.listed = 1"
_RESULT = f"j.state IN {sql_in(SUCCEEDED)}"
# A run of a photo that is a copy: the copy itself, or a redo of one (``redo_of`` is in the filter
# index, so only the redos among the listed runs are looked up).
_COPY = (
    f"(j.state = '{JobState.DUPLICATE}' OR (j.redo_of IS NOT NULL AND EXISTS"
    f" (SELECT 1 FROM jobs AS f WHERE f.id = j.photo AND f.state = '{JobState.DUPLICATE}')))"
)


@dataclass(frozen=True)
class ReviewFilter:
    """What Results shows; every field empty shows every photo, newest first."""

    text: str = ""  # part of the file's name (or of its folder in the inbox), any case
    outcome: Outcome | None = None
    inbox: str | None = None  # an inbox folder, as the journal records it
    since: float | None = None  # finished at or after (epoch seconds)
    until: float | None = None  # finished before
    faces_min: int | None = None
    faces_max: int | None = None
    review: Review | None = None
    stars_min: int | None = None  # rated at least this many stars
    # Only runs with a face that may not look like the same person (its identity distance over
    # restore.identity_threshold when it was restored).
    flagged: bool = False
    # Only these runs (the photos of one person: ``journal.people``); None: any.
    runs: frozenset[int] | None = None
    batch: str | None = None  # sent together through the API (an upload on the dashboard): its batch name
    sort: Sort = Sort.NEWEST

    def where(self) -> tuple[str, list[Any]]:
        """The WHERE clause and its bound values."""
        terms, args = [_SHOWN], list[Any]()
        if self.text:
            escaped = self.text.replace("!", "!!").replace("%", "!%").replace("_", "!_")
            terms.append("j.rel LIKE ? ESCAPE '!'")
            args.append(f"%{escaped}%")
        if self.outcome == Outcome.RESTORED:
            terms.append(f"{_RESULT} AND j.faces > 0")
        elif self.outcome == Outcome.NO_FACE:
            terms.append(f"{_RESULT} AND COALESCE(j.faces, 0) = 0")
        elif self.outcome == Outcome.REDONE:
            terms.append(f"j.state = '{JobState.DONE}' AND j.redo_of IS NOT NULL")
        elif self.outcome == Outcome.COPY:
            terms.append(_COPY)
        elif self.outcome == Outcome.FAILED:
            terms.append(f"j.state IN {sql_in(FAILURES)}")
        if self.inbox is not None:
            terms.append("j.inbox = ?")
            args.append(self.inbox)
        if self.since is not None:
            terms.append("j.finished >= ?")
            args.append(self.since)
        if self.until is not None:
            terms.append("j.finished < ?")
            args.append(self.until)
        if self.faces_min is not None:
            terms.append("COALESCE(j.faces, 0) >= ?")
            args.append(self.faces_min)
        if self.faces_max is not None:
            terms.append("COALESCE(j.faces, 0) <= ?")
            args.append(self.faces_max)
        if self.review == Review.UNREVIEWED:
            terms.append("j.reviewed IS NULL AND j.mark IS NULL")
        elif self.review == Review.REVIEWED:
            terms.append("(j.reviewed IS NOT NULL OR j.mark IS NOT NULL)")
        elif self.review == Review.ACCEPTED:
            terms.append(f"j.mark = '{Mark.ACCEPTED}'")
        elif self.review == Review.REJECTED:
            terms.append(f"j.mark = '{Mark.REJECTED}'")
        elif self.review == Review.LOOK:
            terms.append(f"j.mark = '{Mark.LOOK}'")
        if self.stars_min is not None:
            terms.append("j.stars >= ?")
            args.append(self.stars_min)
        if self.flagged:
            terms.append("j.flagged > 0")
        if self.runs is not None:
            terms.append("j.id IN (SELECT value FROM json_each(?))")
            args.append(json.dumps(sorted(self.runs)))
        if self.batch is not None:
            # Of a photo's runs (its redos too), the first is the one the batch recorded; a photo
            # sent again under its own name (no result of its own) shows as the photo it is.
            terms.append(
                "COALESCE(j.photo, j.id) IN (SELECT s.job_id FROM submissions AS s WHERE s.batch = ?"
                " UNION SELECT COALESCE(d.photo, d.id) FROM submissions AS s JOIN jobs AS x ON x.id = s.job_id"
                f" JOIN jobs AS d ON d.id = x.duplicate_of WHERE s.batch = ? AND x.state = '{JobState.DUPLICATE}'"
                " AND x.output IS NULL)"
            )
            args += [self.batch, self.batch]
        return " AND ".join(f"({t})" for t in terms), args

    def count_index(self) -> str:
        """The index a count of the matches reads: the filter index, which holds every column a
        filter reads (no row is read); for one person's photos, their runs by id."""
        return "" if self.runs is not None else "INDEXED BY jobs_listed_filter"

    def order(self, reverse: bool = False) -> str:
        keys, desc = _ORDERS[self.sort]
        direction = "DESC" if desc != reverse else "ASC"
        return ", ".join(f"{k} {direction}" for k in keys)


@dataclass(frozen=True)
class ReviewPage:
    jobs: list[Job]
    total: int  # runs the filter matches
    page: int  # 1-based
    pages: int
    size: int


@dataclass(frozen=True)
class Neighbours:
    """Where one run stands in a filter's order: the runs either side, and its place."""

    previous: Job | None
    next: Job | None
    position: int  # 1-based; 0 when the run itself no longer matches (it was just marked)
    total: int
    # Up to ``around`` runs on each side (``ReviewQueries.neighbours``), the nearest first: the
    # photo page's filmstrip.
    before: tuple[Job, ...] = ()
    after: tuple[Job, ...] = ()


class ReviewQueries(JournalQueries):
    """The review queue's reads (``JournalBrowser`` has them)."""

    def review_count(self, f: ReviewFilter) -> int:
        where, args = f.where()
        return int(self._read(f"SELECT COUNT(*) FROM jobs AS j {f.count_index()} WHERE {where}", args)[0][0])

    def review_page(self, f: ReviewFilter, page: int = 1, size: int = 48) -> ReviewPage:
        """Page ``page`` (1-based, clamped to the last) of the runs ``f`` matches."""
        size = max(1, min(int(size), PAGE_MAX))
        total = self.review_count(f)
        pages = max(1, math.ceil(total / size))
        page = max(1, min(int(page), pages))
        where, args = f.where()
        rows = self._read(
            f"SELECT j.* FROM jobs AS j WHERE {where} ORDER BY {f.order()} LIMIT ? OFFSET ?",
            [*args, size, (page - 1) * size],
        )
        return ReviewPage([job_from_row(r) for r in rows], total, page, pages, size)

    def review_ids(self, f: ReviewFilter, limit: int = BULK_MAX) -> list[int]:
        """The ids of every run ``f`` matches, in its order (at most ``limit``)."""
        where, args = f.where()
        rows = self._read(
            f"SELECT j.id FROM jobs AS j WHERE {where} ORDER BY {f.order()} LIMIT ?", [*args, limit]
        )
        return [int(r[0]) for r in rows]

    def neighbours(self, f: ReviewFilter, job: Job, around: int = 1) -> Neighbours:
        """The runs before and after ``job`` in ``f``'s order (``around`` on each side), whether or
        not ``job`` still matches ``f`` (marking a photo under "unreviewed" must not lose the way
        to the next)."""
        keys, desc = _ORDERS[f.sort]
        row = self._read(f"SELECT {', '.join(keys)} FROM jobs AS j WHERE j.id = ?", (job.id,))
        if not row:
            return Neighbours(None, None, 0, self.review_count(f))
        key = list(row[0])
        where, args = f.where()
        terms = ", ".join(keys)
        marks = ", ".join("?" * len(keys))
        later, earlier = ("<", ">") if desc else (">", "<")
        n = max(1, min(int(around), PAGE_MAX))

        def step(op: str, reverse: bool) -> tuple[Job, ...]:
            # The row-value comparison alone does not bound the index scan; its first term does.
            found = self._read(
                f"SELECT j.* FROM jobs AS j WHERE {where} AND {keys[0]} {op}= ? AND ({terms}) {op} ({marks})"
                f" ORDER BY {f.order(reverse)} LIMIT ?",
                [*args, key[0], *key, n],
            )
            return tuple(job_from_row(r) for r in found)

        before = int(
            self._read(
                f"SELECT COUNT(*) FROM jobs AS j {f.count_index()} WHERE {where}"
                f" AND ({terms}) {earlier} ({marks})",
                [*args, *key],
            )[0][0]
        )
        matches = bool(self._read(f"SELECT 1 FROM jobs AS j WHERE {where} AND j.id = ?", [*args, job.id]))
        previous, following = step(earlier, reverse=True), step(later, reverse=False)
        return Neighbours(
            previous=previous[0] if previous else None,
            next=following[0] if following else None,
            position=before + 1 if matches else 0,
            total=self.review_count(f),
            before=previous,
            after=following,
        )

    def copy_sources(self, jobs: Iterable[Job]) -> dict[int, Job]:
        """For each of ``jobs`` that is a run of a copy (a photo dropped again elsewhere, given a
        copy of the first one's result), the newest run of the photo it copied, by the job's id."""
        photos = {j.id: j.photo_id for j in jobs}
        if not photos:
            return {}
        rows = self._read(
            f"SELECT id, duplicate_of FROM jobs WHERE id IN (SELECT value FROM json_each(?))"
            f" AND state = '{JobState.DUPLICATE}' AND duplicate_of IS NOT NULL",
            (json.dumps(sorted(set(photos.values()))),),
        )
        copied = {int(r[0]): int(r[1]) for r in rows}
        sources: dict[int, Job] = {}
        for first in set(copied.values()):
            origin = self.get(first)
            if origin is not None:
                sources[first] = self.current_run(origin) or origin
        return {
            job_id: sources[copied[photo]]
            for job_id, photo in photos.items()
            if photo in copied and copied[photo] in sources
        }

    def progress(self, first: int, last: int) -> dict[str, int]:
        """How the runs ``first`` to ``last`` (one bulk action's) stand: runs per state."""
        counts = {str(s): 0 for s in JobState}
        for state, n in self._read(
            "SELECT state, COUNT(*) FROM jobs WHERE id BETWEEN ? AND ? GROUP BY state", (first, last)
        ):
            counts[state] = n
        return counts
