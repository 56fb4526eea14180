"""The Activity page: one line per run (a photo, or a redo of one) with what became of it, its
journal events folded under it, newest activity first; ``?only=failed`` for the failures alone.

A run's outcome is said in the words a person uses ("restored 3 faces", "no face", "failed: ...",
"redone", "waiting", "restoring"), never as the journal's internal steps (claimed, output-reserved,
committing...), which are listed under it for whoever wants them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aiohttp import web

from gpen_watch.journal.activity import ActivityQueries, RunActivity
from gpen_watch.journal.browse import Keyset
from gpen_watch.journal.states import Hidden, JobState

PAGE_SIZE = 48
FAILED = "failed"


@dataclass(frozen=True)
class ActivityView:
    """What an Activity URL asks for: every run or the failures alone, and from where."""

    only_failed: bool = False
    before_event: int | None = None  # every run: the runs whose latest event is below this one
    before_failure: Keyset | None = None  # failures: those that ended before this one

    @property
    def first_page(self) -> bool:
        return self.before_event is None and self.before_failure is None

    @property
    def query(self) -> str:
        """The filter as the page's own links and its live stream carry it."""
        return "?only=failed" if self.only_failed else ""


def activity_view(query: Mapping[str, str]) -> ActivityView:
    """The view an Activity URL names; a 400 with a sentence for what no link of ours sends."""
    only = query.get("only")
    if only not in (None, "", FAILED):
        raise web.HTTPBadRequest(text="only must be 'failed' (or left out for every run).\n")
    before = query.get("before")
    if only == FAILED:
        key = Keyset.parse(before) if before is not None else None
        if before is not None and key is None:
            raise web.HTTPBadRequest(text="before must be a page key from this dashboard.\n")
        return ActivityView(True, before_failure=key)
    if before is not None and (not before.isdigit() or len(before) > 18):
        raise web.HTTPBadRequest(text="before must be a number.\n")
    return ActivityView(False, before_event=int(before) if before is not None else None)


@dataclass(frozen=True)
class RunLine:
    """One line of the page."""

    id: int
    name: str
    time: float
    kind: str  # the outcome's class: done, noface, failed, redone, waiting, restoring, copy, gone
    outcome: str
    redo: bool
    run: RunActivity


def outcome(run: RunActivity) -> tuple[str, str]:
    """(kind, words) of what became of a run."""
    job = run.job
    if job.state == JobState.QUEUED:
        return "waiting", "waiting to be tried again" if job.attempts else "waiting"
    if job.state == JobState.RUNNING:
        return "restoring", "restoring" + (f" (try {job.attempts})" if job.attempts > 1 else "")
    if job.state == JobState.DONE:
        faces = job.faces or 0
        words = f"restored {faces} face{'' if faces == 1 else 's'}" if faces else "no face: copied through"
        if run.redone_by is not None:
            return "redone", f"{words}; redone (run {run.redone_by})"
        return ("done" if faces else "noface"), words
    if job.state in (JobState.FAILED, JobState.UNSUPPORTED):
        head = "failed" if job.state == JobState.FAILED else "not a photo it can read"
        words = f"{head}: {job.error or 'no reason recorded'}"
        after = {Hidden.RETRIED: "retried", Hidden.RETRY_ENDED: "retried", Hidden.DISMISSED: "dismissed"}
        if job.hidden is not None:
            words += f" ({after[job.hidden]})"
        return "failed", words
    if job.state == JobState.DUPLICATE:
        return "copy", "same content as an earlier photo: its result copied"
    return "gone", f"gone: {job.error or 'the file left the inbox first'}"


def lines(runs: list[RunActivity], by_finish: bool) -> list[RunLine]:
    out = []
    for run in runs:
        kind, words = outcome(run)
        job = run.job
        when = job.finished if by_finish and job.finished is not None else run.last_time
        out.append(RunLine(job.id, job.rel.name, when, kind, words, job.is_redo, run))
    return out


def activity_context(journal: ActivityQueries, view: ActivityView) -> dict[str, Any]:
    if view.only_failed:
        key = view.before_failure
        page = journal.failed_activity((key.finished, key.id) if key else None, PAGE_SIZE)
        more = Keyset(*page.more).token if isinstance(page.more, tuple) else None
    else:
        page = journal.run_activity(view.before_event, PAGE_SIZE)
        more = str(page.more) if isinstance(page.more, int) else None
    older = None
    if more is not None:
        older = "/activity?" + ("only=failed&" if view.only_failed else "") + f"before={more}"
    return {
        "rows": lines(page.runs, by_finish=view.only_failed),
        "older": older,
        "view": view,
        "first_page": view.first_page,
        "stamp": stamper(),
    }


def stamp(epoch: float | None, now: float | None = None) -> str:
    """A moment with its date when it was not today: "14:03:22", "yesterday 14:03",
    "Tue 2 Dec 14:03" this year, "2 Dec 2025 14:03" before."""
    return stamper(now)(epoch)


def stamper(now: float | None = None) -> Callable[[float | None], str]:
    """``stamp`` with today worked out once, for a page of a few hundred moments."""
    today = datetime.fromtimestamp(time.time() if now is None else now).date()

    def one(epoch: float | None) -> str:
        if epoch is None:
            return ""
        t = datetime.fromtimestamp(epoch)
        if t.date() == today:
            return t.strftime("%H:%M:%S")
        hm = t.strftime("%H:%M")
        if (today - t.date()).days == 1:
            return f"yesterday {hm}"
        if t.year == today.year:
            return f"{t.strftime('%a')} {t.day} {t.strftime('%b')} {hm}"
        return f"{t.day} {t.strftime('%b')} {t.year} {hm}"

    return one
