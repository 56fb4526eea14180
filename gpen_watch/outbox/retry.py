"""Sending a set-aside file through again: from failed/ back into its inbox, under its own name.

A retry is a drop: the file goes back to where it was dropped, the watcher sees it, and it gets a
new job like any photo dropped again after its failure (``Journal.claim_batch`` repeats a failure
only to copies that waited for it). The failed job is taken off the Failed page (``Hidden.RETRIED``)
and keeps its history. Its error file stays in failed/ until the new try has ended, so a crash or
a stop in between never leaves the user without the reason: once the new result is committed or
the file is set aside again (the new error file taking the old one's name),
``failed.clear_retried`` removes it.

Order, for a kill at any step: the journal records the retry before the file moves, and the move
is one link then the removal of the failed/ name (or, across file systems, a copy to a hidden temp
name in the inbox, flushed, linked into place, the temp name and then the failed/ name removed).
The start-up recovery (``finish_or_undo``, before the watcher's scan) finishes or undoes each step:

* killed before the file reached the inbox: a temp copy (whole or half written) is removed, the
  file is still in failed/, and the failure goes back on the Failed page;
* killed once the inbox has the file but failed/ still does too (a second link to it, or a whole
  copy): the failed/ name is removed once the two are proved to be the same photo (same inode,
  or same size and bytes), and the scan takes the inbox copy as the retry meant;
* the inbox holds a different file of that name (dropped since): both stay, and the failure goes
  back on the Failed page.

Nothing is removed that could be the only copy of a photo.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from gpen_watch.base.errors import GpenWatchError
from gpen_watch.base.fsutil import remove_quietly
from gpen_watch.journal.journal import Job, Journal
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


@dataclass
class RetriesRecovered:
    """What the start-up recovery did with the retries the last run was stopped in."""

    finished: int = 0  # in the inbox and failed/ both: failed/'s name removed
    undone: int = 0  # never reached the inbox: back on the Failed page
    temps_removed: int = 0  # hidden temp copies in the inbox


def temp_copy(dst: Path, job_id: int) -> Path:
    """The hidden name in the inbox a retry across file systems copies to (the watcher leaves it)."""
    return dst.with_name(f".{dst.name}.gpen-retry-{job_id}")


def finish_or_undo(journal: Journal) -> RetriesRecovered:
    """At start-up, before the watcher's scan: finish or undo each retry the last run was killed
    in, so that its photo is in one place (see the module docstring)."""
    report = RetriesRecovered()
    for job in journal.retries_pending():
        try:
            _recover_one(journal, job, report)
        except OSError as exc:
            log.warning("run %d: could not finish its retry after a restart: %s", job.id, exc)
    if report.finished or report.undone or report.temps_removed:
        log.info(
            "retries the last run was stopped in: %d finished, %d undone, %d temp copies removed",
            report.finished,
            report.undone,
            report.temps_removed,
        )
    return report


def _recover_one(journal: Journal, job: Job, report: RetriesRecovered) -> None:
    kept, dst = job.original_path, job.source
    if kept is None:
        return
    report.temps_removed += _drop_temp(temp_copy(dst, job.id), kept, dst)
    if not _is_file(kept):
        return  # moved: the inbox has it (the scan takes it), or the user took it away
    later = [j for j in journal.named(os.fspath(kept), FAILURES) if j.id > job.id and j.original_path == kept]
    if later:
        # Tried again and set aside again under the same name before the kill: it is that run's.
        journal.hide(job.id, Hidden.RETRY_ENDED, f"tried again as run {later[0].id} ({later[0].state})")
        return
    if not os.path.lexists(dst):
        journal.unhide(job.id, "the retry did not happen (the service stopped first)")
        report.undone += 1
    elif _same_photo(kept, dst):
        os.unlink(kept)
        fsync_dir(kept.parent)
        journal.log_event(job.id, "retry-finished", f"finished after a restart: {dst} is the same file")
        log.info("retry: %s was already in its inbox; its copy in failed/ is removed", dst)
        report.finished += 1
    else:
        journal.unhide(job.id, f"the retry did not happen: its inbox holds another file at {dst}")
        log.warning(
            "retry of %s did not happen: its inbox holds another file of that name; both are kept, "
            "and the failure is back on the Failed page",
            kept,
        )
        report.undone += 1


def _drop_temp(tmp: Path, kept: Path, dst: Path) -> int:
    """Remove the retry's temp copy when another whole copy exists: the inbox name linked to it,
    or the file in failed/ it was being copied from. 1 if removed."""
    if not _is_file(tmp):
        return 0
    if not (_is_file(dst) and os.path.samefile(tmp, dst)) and not _is_file(kept):
        log.warning(
            "%s: left in place: it may be the only copy of %s, which is no longer in failed/", tmp, kept.name
        )
        return 0
    os.unlink(tmp)
    fsync_dir(tmp.parent)
    return 1


def _is_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def _same_photo(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` are one file (same device and inode) or two with the same bytes;
    only then may one of them be removed. A link or other non-file is never the same."""
    sa, sb = os.lstat(a), os.lstat(b)
    if not (stat.S_ISREG(sa.st_mode) and stat.S_ISREG(sb.st_mode)):
        return False
    if (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino):
        return True
    if sa.st_size != sb.st_size:
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            chunk = fa.read(1 << 20)
            if chunk != fb.read(1 << 20):
                return False
            if not chunk:
                return True


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
            fsync_dir(src.parent)
        return
    # Another file system: a hidden temp name the watcher leaves alone, then one rename.
    tmp = temp_copy(dst, job_id)
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
    fsync_dir(src.parent)
