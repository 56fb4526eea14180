"""Named states of a job and of its original file, the moves a job may make, and the SQL that
selects by them.

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


# Every move a job can make, and only these: ``Journal`` moves a job through ``check_move`` (an
# unlisted move is a bug of ours, refused before any SQL runs), and builds each move's
# ``WHERE state IN (...)`` from the states listed here (``sources``).
TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    # claimed; its file vanished or was replaced; ended before any worker saw it (a refusal on
    # arrival, a copy of a done twin, the repeat of a twin's failure, recovery of a commit).
    JobState.QUEUED: frozenset(
        {
            JobState.RUNNING,
            JobState.GONE,
            JobState.DONE,
            JobState.DUPLICATE,
            JobState.FAILED,
            JobState.UNSUPPORTED,
        }
    ),
    # handed back (crash, timeout, stop, outbox trouble); ended with its result or failure.
    JobState.RUNNING: frozenset(
        {JobState.QUEUED, JobState.DONE, JobState.DUPLICATE, JobState.FAILED, JobState.UNSUPPORTED}
    ),
    # Ended: a job never leaves these (the same file dropped again is a new job).
    JobState.DONE: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.UNSUPPORTED: frozenset(),
    JobState.DUPLICATE: frozenset(),
    JobState.GONE: frozenset(),
}


class TransitionError(ValueError):
    """A move the table does not list: a bug of gpen-watch, never the user's."""


def sources(to: JobState) -> tuple[JobState, ...]:
    """The states a job may move to ``to`` from, in the enum's order."""
    return tuple(s for s in JobState if to in TRANSITIONS[s])


def check_move(to: JobState, only_from: Iterable[JobState] | None = None) -> tuple[JobState, ...]:
    """The states ``Journal`` may move a job to ``to`` from: ``only_from`` (all of it listed in the
    table), or every state the table allows. TransitionError for a move it does not list."""
    allowed = sources(to)
    if only_from is None:
        if not allowed:
            raise TransitionError(f"no job may move to {to}")
        return allowed
    wanted = tuple(only_from)
    refused = [s for s in wanted if s not in allowed]
    if refused or not wanted:
        raise TransitionError(f"a job may not move from {', '.join(refused) or 'nowhere'} to {to}")
    return wanted


def failure_state(kind: str | None) -> JobState:
    """How a job that got no output ends: unsupported when the reason's kind says the file is not a
    photo gpen-watch can read (``ErrorKind.UNSUPPORTED``, a twin that ended so), else failed."""
    return JobState.UNSUPPORTED if kind == JobState.UNSUPPORTED.value else JobState.FAILED


# jobs.fault of a failure that was a bug of gpen-watch or a library, not the photo's (schema v4).
FAULT_OURS = "ours"

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


class Hidden(StrEnum):
    """Why a failure is no longer on the Failed page (``jobs.hidden``; NULL: it is)."""

    # Sent through again: its file went back to its inbox, and its old error file in failed/ goes
    # once the new try has ended (``outbox.retry``).
    RETRIED = "retried"
    RETRY_ENDED = "retry-ended"
    # The user took it off the page; its file and error file stay in failed/.
    DISMISSED = "dismissed"


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


class Mark(StrEnum):
    """The flag a person gave a run on the dashboard (``jobs.mark``; NULL: none yet)."""

    # A pick (the key P): the restorer keeps this result.
    ACCEPTED = "accepted"
    # A reject (the key X): this result is not to be used as it is.
    REJECTED = "rejected"
    # Needs another look, with a short note (``jobs.mark_note``).
    LOOK = "look"


# A rating a person gave a run, beside its flag (``jobs.stars``; NULL: none).
MAX_STARS = 5
