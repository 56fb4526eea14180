"""Setting aside files that could not be restored: ``failed/`` beside the outbox.

The original moves to ``failed/<subfolders>/<name>`` (collision-safe) and ``<name>.error.txt``
beside it says why, when, after how many attempts, and which job. If the original cannot be moved
(read-only inbox), it stays where it is, the error file says so, and the journal records "left".
If failed/ itself refuses it (full, read-only...), it waits in the inbox ("waiting") and the move,
with its error file, is retried once the folder works (``originals.retry_waiting``); meanwhile the
service's status says so.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from pathlib import Path

from gpen_watch.base.errors import OutputError
from gpen_watch.base.fsutil import remove_quietly
from gpen_watch.config import Config
from gpen_watch.journal.journal import Job, Journal
from gpen_watch.journal.states import FAILURES, ORIGINAL_FINAL, Hidden, JobState, Original
from gpen_watch.outbox import durable, folders, naming
from gpen_watch.outbox.moves import OriginalOutcome, move_original
from gpen_watch.platform import presence

log = logging.getLogger(__name__)

ERROR_SUFFIX = ".error.txt"


def error_file(dest: Path) -> Path:
    return dest.with_name(dest.name + ERROR_SUFFIX)


def error_text(job: Job, where: str) -> str:
    when = dt.datetime.fromtimestamp(job.finished or job.created).strftime("%Y-%m-%d %H:%M:%S")
    what = (
        "not a photo gpen-watch can read"
        if job.state == JobState.UNSUPPORTED
        else "gpen-watch could not restore it"
    )
    return (
        f"{job.source.name}: {what}.\n"
        f"\n"
        f"Reason:   {job.error or 'unknown'}\n"
        f"Kind:     {job.state}\n"
        f"From:     {job.source}\n"
        f"When:     {when}\n"
        f"Attempts: {job.attempts}\n"
        f"Run:      {job.id}\n"
        f"Original: {where}\n"
    )


def set_aside(
    journal: Journal, job_id: int, cfg: Config, away: presence.Away = presence.present
) -> OriginalOutcome:
    """Move a failed/unsupported job's original to failed/ and write its error file. Idempotent.

    The journal records "setting-aside" with the destination before the move, so a crash in
    between is finished by ``commit.recover`` (which calls this again). Once it is set aside (or
    left, or missing), earlier failures of the same file that were retried lose their old error
    files (``clear_retried``).
    """
    outcome = _set_aside(journal, job_id, cfg, away)
    if outcome.action != Original.WAITING:
        clear_retried(journal, journal.require(job_id))
    return outcome


def clear_retried(journal: Journal, job: Job) -> None:
    """After a job of ``job``'s file ended: remove the error files its retried failures left in
    failed/ (``outbox.retry``), unless this very job's error file now has that name."""
    own = error_file(job.original_path) if job.original_path is not None else None
    for old in journal.retried(job.source):
        if old.id == job.id:
            continue
        if old.original_path is not None and error_file(old.original_path) != own:
            remove_quietly(error_file(old.original_path))
        journal.hide(old.id, Hidden.RETRY_ENDED, f"tried again as run {job.id} ({job.state})")


def _set_aside(journal: Journal, job_id: int, cfg: Config, away: presence.Away) -> OriginalOutcome:
    job = journal.require(job_id)
    if job.is_redo:
        # A redo that failed: its original is the archived (or kept) one, and the first result
        # stays; the photo's page and the Failed page say why. Nothing moves into failed/.
        journal.set_original(job.id, Original.KEPT, job.source)
        return OriginalOutcome(Original.KEPT, job.source)
    if job.state not in FAILURES:
        raise ValueError(f"job {job_id} is {job.state}; only failed or unsupported jobs are set aside")
    if job.original is not None and job.original in ORIGINAL_FINAL:
        return OriginalOutcome(job.original, job.original_path)
    inbox = naming.find_inbox(cfg, job.inbox)
    root = naming.failed_root(naming.outbox_root(cfg, inbox))
    directory = naming.mirror_dir(root, job.rel.parent)

    # The error file of an earlier failure of this file, retried: this failure's replaces it.
    stale = {error_file(old.original_path) for old in journal.retried(job.source) if old.original_path}

    def error_file_taken(p: Path) -> bool:
        return os.path.lexists(error_file(p)) and error_file(p) not in stale

    def write_beside(dest: Path) -> None:
        # Before the journal says "set aside": a crash in between leaves "setting aside", which
        # the restart finishes, this file included.
        _write_error_file(journal, job, error_file(dest), f"moved here as {dest.name}", directory, root)

    outcome = move_original(
        journal,
        job,
        directory,
        root,
        Original.SETTING_ASIDE,
        Original.SET_ASIDE,
        taken=error_file_taken,
        arrived=write_beside,
        away=away,
    )
    if outcome.action in (Original.WAITING, Original.SET_ASIDE):
        # Waiting: the error file goes beside the original once failed/ takes it, under the name
        # it gets then. Set aside: it was written beside it before the move was recorded.
        return outcome
    job = journal.require(job_id)
    if outcome.action in (Original.LEFT, Original.MISSING):
        if outcome.action == Original.LEFT:
            where = f"left in the inbox at {job.source} ({outcome.detail})"
        else:
            where = "no longer in the inbox (deleted or moved away before it could be set aside)"
        target = naming.free_name(directory, naming.truncate_name(job.source.name) + ERROR_SUFFIX)
    else:  # replaced: the inbox now holds a different file, which has a job of its own
        return outcome
    _write_error_file(journal, job, target, where, directory, root)
    return outcome


def _write_error_file(
    journal: Journal, job: Job, target: Path, where: str, directory: Path, root: Path
) -> None:
    try:
        naming.ensure_dir(directory, root)
        durable.write_text_durably(target, error_text(job, where), job.id)
    except (OSError, OutputError) as exc:
        log.warning("%s: could not write %s: %s", job.source, target, exc)
        journal.log_event(job.id, "error-file", f"could not write {target}: {exc}")


def fail(
    journal: Journal,
    job_id: int,
    reason: str,
    cfg: Config,
    kind: JobState = JobState.FAILED,
    tmp: Path | None = None,
    *,
    ours: bool = False,
    away: presence.Away = presence.present,
) -> OriginalOutcome | None:
    """End a job as failed/unsupported (durable), discard its temp output, set the original aside.

    ``ours``: a bug of gpen-watch or a library, not the photo's fault (``Journal.fail``). Returns
    None when the job was no longer active (nothing done).
    """
    if tmp is not None:
        remove_quietly(tmp)
    if not journal.fail(job_id, reason, kind, ours=ours):
        return None
    job = journal.require(job_id)
    folders.remove_left_empty(journal, job, naming.outbox_root(cfg, naming.find_inbox(cfg, job.inbox)))
    return set_aside(journal, job_id, cfg, away)
