"""Start-up recovery: bring the journal and the folders back in line after a stop or a crash.

Run once at start-up, before any work is dispatched:

* A job still queued/running with a commit token: if the final file exists with the token's inode
  and size, it is our complete output -> the job is finished, not redone (a leftover temp name is
  removed). If instead the temp file still has the token's inode and size, it was complete and
  flushed before the token was written -> it is published now and the job finished. Otherwise
  nothing was published.
* Every other job left running is requeued, however often: the parent never decodes a photo, so
  no photo can bring the service down (photos that crash workers are given up by the pool).
* Ended jobs whose original was not yet handled (or whose move/delete was interrupted) get it
  handled now: done/duplicate per ``output.originals``, failed/unsupported set aside in failed/.
  A move that had already linked the file into the archive just removes the inbox name.
* Temp files (``.*.gpen-tmp-<id>``) in the outbox, failed and archive folders whose job is not
  running are deleted: they are unfinished worker output or copies, never the only copy of anything.
* Retries the stop came in the middle of are finished or undone (``retry.finish_or_undo``): the
  photo ends in its inbox or in failed/, never both, and a temp copy in the inbox is removed.
* A keep of one of a photo's two results that the stop cut short is finished
  (``keep.finish_pending``): its file steps check by inode what is done already.
"""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from gpen_watch.base.errors import GpenWatchError, OutputError
from gpen_watch.config import Config
from gpen_watch.journal.journal import Job, Journal
from gpen_watch.journal.states import JobState, Original
from gpen_watch.outbox import durable, keep, naming, retry
from gpen_watch.outbox.commit import drop_replaced, place_output
from gpen_watch.outbox.moves import OriginalOutcome
from gpen_watch.outbox.originals import handle_original
from gpen_watch.platform import presence

log = logging.getLogger(__name__)


@dataclass
class Recovery:
    finished: list[int] = field(default_factory=list)
    requeued: int = 0
    originals: int = 0
    temps_removed: int = 0
    # Originals that could not leave the inbox (read-only inbox...): recorded "left", not retried.
    left: list[OriginalOutcome] = field(default_factory=list)
    retries: retry.RetriesRecovered = field(default_factory=retry.RetriesRecovered)


def _same_file(path: Path, ino: int | None, size: int | None) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_ino == ino and st.st_size == size


def _resume_commit(journal: Journal, job: Job) -> Path | None:
    """Finish a job whose output was (or can be) published before the crash; None if it cannot."""
    if job.output is None:
        return None  # a token without a name: nothing was published; the job is requeued
    final = job.output
    # A redo's worker wrote beside the name it was given to reuse (the result it redoes); its
    # token may name another (a new format's extension, or beside that result).
    of = journal.get(job.redo_of) if job.redo_of is not None else None
    firsts = [final] + ([of.output] if of is not None and of.output is not None else [])
    tmps = [naming.tmp_path(name, job.id) for name in firsts]
    tmp = next((t for t in tmps if _same_file(t, job.commit_ino, job.commit_size)), None)
    note = "finished after a restart (output was complete)"
    if _same_file(final, job.commit_ino, job.commit_size):
        for left in tmps:
            if os.path.lexists(left) and os.path.samefile(left, final):
                os.unlink(left)
                durable.fsync_dir(final.parent)
    elif tmp is not None:
        placed = place_output(
            journal,
            job,
            tmp,
            os.lstat(tmp),
            faces=job.faces or 0,
            timings=job.timings,
            notes=job.notes,
            used=job.used,
        )
        if placed is None:
            return None
        final = placed
    else:
        return None
    # A redo in another format: the result it replaces, if the crash came before that went.
    drop_replaced(job, final, of.output if of is not None else None)
    journal.finish(job.id, final, job.faces or 0, job.timings, [*job.notes, note], job.used)
    return final


def clean_stale_temps(journal: Journal, cfg: Config) -> int:
    """Delete our temp files whose job is not running, under every folder the service writes to."""
    removed = 0
    for root in naming.service_dirs(cfg):
        if not root.is_dir():
            continue
        for dirpath, _dirnames, filenames in os.walk(root):  # does not follow symlinks
            for name in filenames:
                job_id = naming.tmp_job_id(name)
                if job_id is None:
                    continue
                job = journal.get(job_id)
                if job is not None and job.state == JobState.RUNNING:
                    continue
                path = Path(dirpath) / name
                try:
                    if stat.S_ISREG(os.lstat(path).st_mode):
                        os.unlink(path)
                        removed += 1
                except FileNotFoundError:
                    pass
    return removed


def recover(journal: Journal, cfg: Config, away: presence.Away = presence.present) -> Recovery:
    """Bring journal and folders back in line after a stop or crash (see the module docstring).

    Call once at start-up, before dispatching: it also requeues the jobs left running. ``away``
    says which folders are on a drive or share that is not there now: an original in an inbox
    that is away waits for it.
    """
    report = Recovery()
    try:
        keep.finish_pending(journal)  # a keep of one of two results a crash cut short
    except (OSError, GpenWatchError) as exc:
        log.warning("could not finish keeping one of two results after a restart: %s", exc)
    for job in journal.committing():
        try:
            if _resume_commit(journal, job) is not None:
                report.finished.append(job.id)
        except (OSError, OutputError) as exc:
            log.warning("run %d: could not finish its commit after a restart: %s", job.id, exc)
    # No attempt limit here: the parent never decodes a photo, so no photo can take the service
    # down, and a job in flight across a few restarts or reboots must not be given up for that.
    # Photos that crash workers are counted and given up by the pool.
    report.requeued = journal.requeue_running("the service stopped while this run was running")
    for job in journal.pending_originals():
        try:
            outcome = handle_original(journal, job.id, cfg, away)
            report.originals += 1
            if outcome.action == Original.LEFT:
                report.left.append(outcome)
        except (OSError, OutputError) as exc:
            log.warning("run %d: could not handle the original %s: %s", job.id, job.source, exc)
    report.temps_removed = clean_stale_temps(journal, cfg)
    report.retries = retry.finish_or_undo(journal)
    return report
