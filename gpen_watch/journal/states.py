"""Named states of a job and of its original file, and the SQL that selects by them.

The journal stores both as text (``jobs.state``, ``jobs.original``); these enums are the only
spelling of those texts in the code, and ``sql_in`` builds the ``IN (...)`` lists from them so a
state cannot be misspelt in a query.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpen_watch.base.strenum import StrEnum


class JobState(StrEnum):
    """queued -> running -> done | failed | unsupported (or back to queued)."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    UNSUPPORTED = "unsupported"
    # Same content as a finished job: not restored again.
    DUPLICATE = "duplicate"
    # The file vanished (or was replaced) before it was processed.
    GONE = "gone"


ACTIVE = (JobState.QUEUED, JobState.RUNNING)
# Ended jobs whose file was dealt with (a gone job's file was not: seeing it again is a new drop).
SETTLED = (JobState.DONE, JobState.FAILED, JobState.UNSUPPORTED, JobState.DUPLICATE)
# Ended jobs that produced an output (their own, or the one they duplicate).
SUCCEEDED = (JobState.DONE, JobState.DUPLICATE)
# How a job can end without an output: the two kinds of failure record in failed/.
FAILURES = (JobState.FAILED, JobState.UNSUPPORTED)


class Original(StrEnum):
    """What happened to the original after its job ended (``jobs.original``; NULL: not yet)."""

    # In progress: recovery finishes these after a crash.
    ARCHIVING = "archiving"
    DELETING = "deleting"
    SETTING_ASIDE = "setting-aside"
    # Outcomes.
    ARCHIVED = "archived"
    KEPT = "kept"
    DELETED = "deleted"
    SET_ASIDE = "set-aside"
    # A read-only inbox would not let it go: it stays, not retried.
    LEFT = "left"
    MISSING = "missing"
    REPLACED = "replaced"
    # The archive or failed/ folder refused it for a reason that can clear: retried.
    WAITING = "waiting"


ORIGINAL_IN_PROGRESS = (Original.ARCHIVING, Original.DELETING, Original.SETTING_ASIDE)
ORIGINAL_FINAL = (
    Original.ARCHIVED,
    Original.KEPT,
    Original.DELETED,
    Original.SET_ASIDE,
    Original.LEFT,
    Original.MISSING,
    Original.REPLACED,
)
# Outcomes that leave the original where it was: seeing the same file there again is not a new
# drop. The in-progress markers count too (recovery finishes them), and so does "waiting".
ORIGINAL_IN_PLACE = (Original.KEPT, Original.LEFT, Original.WAITING, *ORIGINAL_IN_PROGRESS)


def sql_in(values: Iterable[StrEnum]) -> str:
    """``('a', 'b')`` for an SQL ``IN``; the values are enum members, never user text."""
    return "(" + ", ".join(f"'{v.value}'" for v in values) + ")"
