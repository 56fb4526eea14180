"""Sending a set-aside file through again: from failed/ back into its inbox, under its own name.

A retry is a drop: the file goes back to where it was dropped, the watcher sees it, and it gets a
new job like any photo dropped again after its failure (``Journal.claim_batch`` repeats a failure
only to copies that waited for it). The failed job is taken off the Failed page (``Hidden.RETRIED``)
and keeps its history. Its error file stays in failed/ until the new try has ended, so a crash or
a stop in between never leaves the user without the reason: once the new result is committed or
the file is set aside again (the new error file taking the old one's name),
``failed.clear_retried`` removes it.

Order, for a kill at any step: the journal records the retry before the file moves, and the move
is one link or rename (or, across file systems, a copy to a hidden temp name, flushed, then linked
into the inbox, and the original removed). Killed before the move: the file is still in failed/
with nothing in its inbox, and the start-up recovery (``undo_unmoved``) puts the failure back on
the Failed page. Killed after: the inbox has the file, which the start-up scan takes.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
from pathlib import Path

from gpen_watch.base.errors import GpenWatchError
from gpen_watch.base.fsutil import remove_quietly
from gpen_watch.journal.journal import Journal
from gpen_watch.journal.states import FAILURES, Hidden, Original
from gpen_watch.outbox.durable import fsync_dir, fsync_file
from gpen_watch.platform.files import link_no_clobber

log = logging.getLogger(__name__)


class RetryRefused(GpenWatchError):
    """This failure cannot be sent through again now; the message says why and what to do."""


def send_back(journal: Journal, job_id: int, inboxes: list[Path]) -> Path:
    """Move the set-aside file of failed job ``job_id`` back to its inbox; the path it went to."""
    job = journal.get(job_id)
    if job is None or job.state not in FAILURES:
        raise RetryRefused(f"run {job_id} did not fail; only a failed run can be retried")
    name = job.rel.name
    if job.original != Original.SET_ASIDE or job.original_path is None:
        where = {
            Original.LEFT: f"it was left in its inbox ({job.source}); it is tried again when you change it",
            Original.MISSING: "it was no longer in its inbox when it failed",
            Original.WAITING: "it is still waiting in its inbox for failed/ to take it",
        }.get(job.original or Original.MISSING, "it is not in failed/")
        raise RetryRefused(f"{name}: cannot retry: {where}")
    if job.inbox not in inboxes:
        raise RetryRefused(
            f"{name}: cannot retry: its inbox {job.inbox} is no longer watched; add it back to "
            "watch.inboxes, or drop the file from failed/ into another inbox"
        )
    kept = job.original_path
    if not kept.exists():
        raise RetryRefused(f"{name}: cannot retry: {kept} is no longer in failed/ (moved or deleted)")
    if os.path.lexists(job.source):
        raise RetryRefused(
            f"{name}: cannot retry: its inbox already holds a file at {job.source}; move that one away first"
        )
    journal.hide(job_id, Hidden.RETRIED, f"sent back to {job.source}")
    try:
        _move_into_inbox(kept, job.source, job_id)
    except OSError as exc:
        journal.log_event(job_id, "retry-failed", f"could not move {kept} to {job.source}: {exc}")
        raise RetryRefused(
            f"{name}: cannot move it back to {job.source} ({exc.strerror or exc}); it stays in failed/"
        ) from None
    log.info("retry: %s moved back to %s", kept, job.source)
    return job.source


def undo_unmoved(journal: Journal) -> int:
    """At start-up: failures marked retried whose file never left failed/ (the service was killed
    in between) go back on the Failed page. How many did."""
    undone = 0
    for job in journal.retries_pending():
        kept = job.original_path
        if kept is not None and kept.exists() and not os.path.lexists(job.source):
            journal.unhide(job.id, "the retry did not happen (the service stopped first)")
            undone += 1
    return undone


def dismiss(journal: Journal, job_id: int) -> None:
    """Take a failure off the Failed page; its file and error file stay in failed/."""
    if not journal.hide(job_id, Hidden.DISMISSED, "taken off the Failed page"):
        raise RetryRefused(f"run {job_id} is not on the Failed page; nothing to dismiss")


def _move_into_inbox(src: Path, dst: Path, job_id: int) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        linked = link_no_clobber(src, dst)  # never replaces a file dropped there meanwhile
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
    else:
        fsync_dir(dst.parent)
        if linked:
            os.unlink(src)
        return
    # Another file system: a hidden temp name the watcher leaves alone, then one rename.
    tmp = dst.with_name(f".{dst.name}.gpen-retry-{job_id}")
    try:
        shutil.copy2(src, tmp)
        fsync_file(tmp)
        if not link_no_clobber(tmp, dst):
            raise FileExistsError(errno.EEXIST, "file exists", os.fspath(dst))
        remove_quietly(tmp)
    except BaseException:
        remove_quietly(tmp)
        raise
    fsync_dir(dst.parent)
    os.unlink(src)
