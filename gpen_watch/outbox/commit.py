"""Finishing a job durably: temp output -> final name -> journal done -> original archived/kept/deleted.

The steps, in this order (``commit`` runs them all; each is also a function of its own):

1. ``prepare``: choose the output name (or reuse the one the journal already holds for the job),
   reserve it in the journal, create the folder. The worker writes to ``tmp_path(final, job id)``,
   ``.<name>.gpen-tmp-<id>`` in the same folder (``FileJob.dst``).
2. ``publish``: fsync the temp file; record in the journal (durably) the final name plus the temp
   file's inode and size - the *commit token* - with the worker's result; link the temp file to the
   final name (never overwriting: if the name was taken meanwhile, the next free one is used and
   recorded); fsync the folder; remove the temp name; fsync again.
3. ``Journal.finish``: the job is done (durable).
4. ``dispose_original``: only now is the original archived (moved, collision-safe, mirroring the
   subfolder), kept, or deleted - each recorded in the journal before and after. When the archive
   (or failed/) folder refuses the move for a reason that can clear (full, read-only, no
   permission, gone, I/O error), the original stays in the inbox as "waiting" and
   ``retry_waiting`` (the service, every 30 s and on ``resume``) moves it once the folder works.

Recovery rules (``recover``, run once at start-up before any work is dispatched):

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

The original is only touched if it is still the file the job restored (same size and mtime; for
delete, the same sha256 too). Otherwise it was replaced by a newer file, which is a job of its own.
"""

from __future__ import annotations

import datetime as dt
import errno
import logging
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpen_watch.config import Config
from gpen_watch.errors import OutputError
from gpen_watch.journal.journal import Job, Journal, hash_file
from gpen_watch.journal.states import ORIGINAL_FINAL, SUCCEEDED, JobState, Original
from gpen_watch.outbox import durable, naming
from gpen_watch.restore.api import FileJob, FileResult

log = logging.getLogger(__name__)

# What a destination folder says when it is full, read-only, not ours to write, gone or failing.
# These can clear (space freed, remounted, permissions fixed, drive back), so the move is retried.
FOLDER_TROUBLE = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO, errno.ENOENT}
)


@dataclass(frozen=True)
class OriginalOutcome:
    """What happened to the original: archived, kept, deleted, set-aside (in failed/), left (could
    not be moved: ``detail`` says why), waiting (still in the inbox: ``folder`` refused it for a
    reason that can clear, ``detail``; retried later), missing (no longer there), replaced (a
    different file is there now)."""

    action: Original
    path: Path | None = None
    detail: str = ""
    folder: Path | None = None


@dataclass(frozen=True)
class Waiting:
    """Originals still waiting for ``folder`` after a ``retry_waiting`` pass, and why."""

    folder: Path
    reason: str
    count: int


@dataclass(frozen=True)
class CommitOutcome:
    """``output`` is None when the job was no longer active and the result was discarded."""

    output: Path | None
    original: OriginalOutcome | None = None


@dataclass
class Recovery:
    finished: list[int] = field(default_factory=list)
    requeued: int = 0
    originals: int = 0
    temps_removed: int = 0
    # Originals that could not leave the inbox (read-only inbox...): recorded "left", not retried.
    left: list[OriginalOutcome] = field(default_factory=list)


def load_job(journal: Journal, job_id: int) -> Job:
    job = journal.get(job_id)
    if job is None:
        raise KeyError(f"no job {job_id} in {journal.path}")
    return job


# --- 1. prepare ---------------------------------------------------------------------------------


def prepare(journal: Journal, job_id: int, cfg: Config, *, today: dt.date | None = None) -> tuple[Path, Path]:
    """Reserve the output name for a claimed job and create its folder: returns (final, tmp).

    A job that already holds a name (requeued, or after a restart) keeps it, as long as it is
    still inside the configured outbox. Removes any temp file an earlier attempt left behind.
    """
    job = load_job(journal, job_id)
    inbox = naming.find_inbox(cfg, job.inbox)
    root = naming.outbox_root(cfg, inbox)
    final = job.output
    if final is None or not naming.inside(final, root):
        while True:
            final = naming.plan_output(
                cfg,
                inbox,
                job.rel,
                today=today,
                taken=lambda p: journal.output_reserved(p, exclude_job=job_id),
            )
            if journal.reserve_output(job_id, final):
                break
            if not journal.output_reserved(final, exclude_job=job_id):
                raise OutputError(f"{job.source}: job {job_id} is not active; cannot reserve an output")
    naming.ensure_dir(final.parent, root)
    tmp = naming.tmp_path(final, job_id)
    discard(tmp)
    return final, tmp


def file_job(journal: Journal, job_id: int, cfg: Config, *, scale: float = 1.0) -> FileJob:
    """``prepare`` and build the worker's FileJob (dst is the temp name)."""
    _, tmp = prepare(journal, job_id, cfg)
    job = load_job(journal, job_id)
    return FileJob(
        src=job.source, dst=tmp, format=cfg.output.format, jpeg_quality=cfg.output.jpeg_quality, scale=scale
    )


def discard(tmp: Path | None) -> None:
    """Remove a worker's temp output (failed, timed out, or no longer wanted)."""
    if tmp is None:
        return
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass


# --- 2. publish ---------------------------------------------------------------------------------


def publish(journal: Journal, job_id: int, result: FileResult) -> Path | None:
    """Make the worker's temp file (``result.dst``) the job's final output, durably.

    Returns the final path (the reserved one, or the next free name if another file took it), or
    None when the job is no longer active (then the temp file is left for the caller to discard).
    Raises OutputError if the temp file is missing or cannot be placed.
    """
    job = load_job(journal, job_id)
    if result.dst is None or job.output is None:
        raise OutputError(f"{job.source}: no output to publish for job {job_id} (was it prepared?)")
    tmp = Path(result.dst)
    try:
        durable.fsync_file(tmp)
        st = os.stat(tmp)
    except OSError as exc:
        raise OutputError(f"{tmp}: worker reported success but its output cannot be read: {exc}") from exc
    name = output_name(job.output.name, result.format)
    return _place_output(
        journal, job, tmp, st, faces=result.faces, timings=result.timings, notes=result.notes, name=name
    )


def output_name(name: str, fmt: str | None) -> str:
    """``name`` with the extension of the format the worker actually wrote.

    The name is chosen before the photo is decoded, from its extension; the content decides the
    format ("same"): a JPEG named .png is written as JPEG, an animated GIF as PNG. A result must not
    be named as something it is not, so the extension follows the content.
    """
    from gpen_watch.imaging.save import OUTPUT_SUFFIXES, matching_suffix

    if not fmt or fmt not in OUTPUT_SUFFIXES:
        return name  # unknown to us (a verbatim copy of a GIF...): the source's own name fits it
    stem, ext = os.path.splitext(name)
    return naming.truncate_name(stem + matching_suffix(fmt, ext))


def _place_output(
    journal: Journal,
    job: Job,
    tmp: Path,
    st: os.stat_result,
    *,
    faces: int,
    timings: dict[str, float],
    notes: list[str],
    name: str | None = None,
) -> Path | None:
    assert job.output is not None
    final = job.output

    def record(dst: Path) -> bool:
        return journal.begin_commit(job.id, dst, st.st_ino, st.st_size, faces, timings, notes)

    try:
        return durable.place(
            tmp,
            final.parent,
            name or final.name,
            before=record,
            taken=lambda p: journal.output_reserved(p, exclude_job=job.id),
        )
    except OSError as exc:
        raise OutputError(f"{final}: cannot move the result into place: {exc.strerror or exc}") from exc


# --- 4. originals -------------------------------------------------------------------------------


def _source_state(job: Job) -> str:
    """ "same" if the inbox file is still the one this job took, else "missing" or "changed"."""
    try:
        st = os.lstat(job.source)
    except FileNotFoundError:
        return "missing"
    if not stat.S_ISREG(st.st_mode) or st.st_size != job.size or st.st_mtime != job.mtime:
        return "changed"
    return "same"


def resume_move(journal: Journal, job: Job, marker: Original, action: Original) -> OriginalOutcome | None:
    """Finish a move that a crash interrupted (journal says ``marker`` with its destination)."""
    if job.original != marker or job.original_path is None:
        return None
    dest, src = job.original_path, job.source
    if os.path.lexists(dest):
        if os.path.lexists(src) and os.path.samefile(src, dest):
            os.unlink(src)  # linked into place, old name not yet removed
            durable.fsync_dir(src.parent)
        if not os.path.lexists(src):
            journal.set_original(job.id, action, dest)
            return OriginalOutcome(action, dest)
    return None


def move_original(
    journal: Journal,
    job: Job,
    directory: Path,
    root: Path,
    marker: Original,
    action: Original,
    taken: Callable[[Path], bool] | None = None,
) -> OriginalOutcome:
    """Move the original into ``directory`` (under ``root``) collision-safe, recording before and after.

    ``taken`` rules out further names (failed/ also needs ``<name>.error.txt`` free). If the file
    cannot be moved it stays where it is: "waiting" when the destination refused it for a reason
    that can clear (``FOLDER_TROUBLE``: ``retry_waiting`` tries again), otherwise "left" with the
    reason (a read-only inbox the original cannot leave, a name the folder cannot hold).
    """
    resumed = resume_move(journal, job, marker, action)
    if resumed is not None:
        return resumed
    state = _source_state(job)
    if state != "same":
        what = Original.MISSING if state == "missing" else Original.REPLACED
        journal.set_original(job.id, what)
        return OriginalOutcome(what)
    try:
        naming.ensure_dir(directory, root)
        planned = naming.free_name(directory, naming.truncate_name(job.source.name), taken)
        journal.set_original(job.id, marker, planned)
        dest = durable.move_no_clobber(job.source, directory, planned.name, job.id, taken=taken)
    except (OSError, OutputError) as exc:
        reason = _reason(exc)
        why = f"could not move it to {directory}: {reason}"
        if _folder_trouble(exc, job.source):
            was_waiting = job.original == Original.WAITING
            journal.set_original(job.id, Original.WAITING, directory)
            if not was_waiting:  # a retry that fails again adds nothing to the history
                journal.log_event(job.id, "original-waiting", why)
                log.warning(
                    "%s: %s; it waits in the inbox and is moved once the folder works", job.source, why
                )
            return OriginalOutcome(Original.WAITING, job.source, reason, folder=root)
        journal.set_original(job.id, Original.LEFT)
        journal.log_event(job.id, "original-left", why)
        log.warning("%s: %s; left in place", job.source, why)
        return OriginalOutcome(Original.LEFT, job.source, why)
    journal.set_original(job.id, action, dest)
    return OriginalOutcome(action, dest)


def _os_error(exc: BaseException) -> OSError | None:
    if isinstance(exc, OSError):
        return exc
    return exc.__cause__ if isinstance(exc.__cause__, OSError) else None


def _reason(exc: BaseException) -> str:
    os_exc = _os_error(exc)
    if os_exc is not None and os_exc.strerror:
        return os_exc.strerror
    return str(exc)


def _folder_trouble(exc: BaseException, source: Path) -> bool:
    """Whether the destination folder refused the move for a reason that can clear.

    Removing the original from the inbox is not the destination's trouble (a read-only inbox): such
    an original is left, as the keep policy would leave it. A name the folder can never hold, or a
    folder that leads out of its root, is not retried either.
    """
    os_exc = _os_error(exc)
    if os_exc is None or os_exc.errno not in FOLDER_TROUBLE:
        return False
    return not (os_exc.filename == os.fspath(source) and os_exc.filename2 is None)


def dispose_original(journal: Journal, job_id: int, cfg: Config) -> OriginalOutcome:
    """Apply ``output.originals`` to a done (or duplicate) job's original. Idempotent."""
    job = load_job(journal, job_id)
    if job.original is not None and job.original in ORIGINAL_FINAL:
        return OriginalOutcome(job.original, job.original_path)
    if job.state not in SUCCEEDED:
        raise ValueError(f"job {job_id} is {job.state}; originals are handled only after success")
    policy = cfg.output.originals
    inbox = naming.find_inbox(cfg, job.inbox)
    # A waiting original waits for the archive (only moves wait): that move is what is retried.
    if job.original in (Original.ARCHIVING, Original.WAITING) or (
        policy == "archive" and job.original is None
    ):
        root = naming.archive_root(cfg, inbox)
        return move_original(
            journal, job, naming.mirror_dir(root, job.rel.parent), root, Original.ARCHIVING, Original.ARCHIVED
        )
    if job.original == Original.DELETING or (policy == "delete" and job.original is None):
        return _delete_original(journal, job)
    journal.set_original(job.id, Original.KEPT, job.source)
    return OriginalOutcome(Original.KEPT, job.source)


def _delete_original(journal: Journal, job: Job) -> OriginalOutcome:
    state = _source_state(job)
    if state == "missing":
        action = Original.DELETED if job.original == Original.DELETING else Original.MISSING
        journal.set_original(job.id, action)
        return OriginalOutcome(action)
    # Deleting is the one step that cannot be undone: only the exact content that was restored.
    try:
        same = state == "same" and hash_file(job.source) == job.sha256
    except OSError:
        same = False
    if not same:
        journal.set_original(job.id, Original.REPLACED)
        return OriginalOutcome(Original.REPLACED)
    journal.set_original(job.id, Original.DELETING, job.source)
    try:
        os.unlink(job.source)
    except OSError as exc:
        why = f"could not delete it: {exc.strerror or exc}"
        journal.set_original(job.id, Original.LEFT)
        journal.log_event(job.id, "original-left", why)
        return OriginalOutcome(Original.LEFT, job.source, why)
    durable.fsync_dir(job.source.parent)
    journal.set_original(job.id, Original.DELETED)
    return OriginalOutcome(Original.DELETED)


# --- all steps ----------------------------------------------------------------------------------


def commit(journal: Journal, job_id: int, result: FileResult, cfg: Config) -> CommitOutcome:
    """Steps 2-4 for a successful FileResult: publish, finish, dispose of the original.

    If the job is no longer active (another attempt finished it), the temp file is discarded and
    ``output`` is None. OutputError (disk full, folder gone...) leaves the job running for the
    caller to requeue or fail; nothing in the inbox has been touched.
    """
    final = publish(journal, job_id, result)
    if final is None:
        discard(Path(result.dst) if result.dst else None)
        return CommitOutcome(None)
    journal.finish(job_id, final, result.faces, result.timings, result.notes)
    return CommitOutcome(final, dispose_original(journal, job_id, cfg))


# --- originals waiting for their folder ---------------------------------------------------------


def destination_root(cfg: Config, job: Job) -> Path:
    """The folder a job's original goes to: the archive after success, failed/ otherwise."""
    inbox = naming.find_inbox(cfg, job.inbox)
    if job.state in SUCCEEDED:
        return naming.archive_root(cfg, inbox)
    return naming.failed_root(naming.outbox_root(cfg, inbox))


def handle_original(journal: Journal, job_id: int, cfg: Config) -> OriginalOutcome:
    """Archive/keep/delete a done or duplicate job's original, set a failed one's aside."""
    from gpen_watch.outbox import failed  # failed imports this module

    job = load_job(journal, job_id)
    if job.state in SUCCEEDED:
        return dispose_original(journal, job_id, cfg)
    return failed.set_aside(journal, job_id, cfg)


def retry_waiting(
    journal: Journal, cfg: Config, on_outcome: Callable[[OriginalOutcome], None] | None = None
) -> tuple[int, list[Waiting]]:
    """Try again to move the originals waiting for their folder (oldest first).

    Returns how many were dealt with (moved, left, or found missing or replaced) and, per folder
    that still refuses, the reason and how many wait for it. After one refusal a folder is not
    tried again in the same pass: a thousand originals waiting for a full disk cost one attempt,
    not a thousand. The photos' results are already in the outbox; nothing is restored again.
    ``on_outcome`` hears of each original dealt with (the service counts those left in the inbox).
    """
    handled = 0
    blocked: dict[Path, list[Any]] = {}
    for job in journal.waiting_originals():
        root = destination_root(cfg, job)
        if root in blocked:
            blocked[root][1] += 1
            continue
        try:
            outcome = handle_original(journal, job.id, cfg)
        except (OSError, OutputError) as exc:
            outcome = OriginalOutcome(Original.WAITING, job.source, _reason(exc), folder=root)
            log.warning("job %d: could not handle the original %s: %s", job.id, job.source, exc)
        if outcome.action == Original.WAITING:
            blocked[root] = [outcome.detail, 1]
        else:
            handled += 1
            log.info("%s: %s %s", job.source, outcome.action, outcome.path or "")
            if on_outcome is not None:
                on_outcome(outcome)
    return handled, [Waiting(folder, reason, n) for folder, (reason, n) in blocked.items()]


# --- start-up recovery --------------------------------------------------------------------------


def _same_file(path: Path, ino: int | None, size: int | None) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_ino == ino and st.st_size == size


def _resume_commit(journal: Journal, job: Job) -> Path | None:
    """Finish a job whose output was (or can be) published before the crash; None if it cannot."""
    assert job.output is not None
    final, tmp = job.output, naming.tmp_path(job.output, job.id)
    note = "finished after a restart (output was complete)"
    if _same_file(final, job.commit_ino, job.commit_size):
        if os.path.lexists(tmp) and os.path.samefile(tmp, final):
            os.unlink(tmp)
            durable.fsync_dir(final.parent)
    elif _same_file(tmp, job.commit_ino, job.commit_size):
        placed = _place_output(
            journal, job, tmp, os.lstat(tmp), faces=job.faces or 0, timings=job.timings, notes=job.notes
        )
        if placed is None:
            return None
        final = placed
    else:
        return None
    journal.finish(job.id, final, job.faces or 0, job.timings, [*job.notes, note])
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


def recover(journal: Journal, cfg: Config) -> Recovery:
    """Bring journal and folders back in line after a stop or crash (see the module docstring).

    Call once at start-up, before dispatching: it also requeues the jobs left running.
    """
    from gpen_watch.outbox import failed  # failed imports this module

    report = Recovery()
    for job in journal.committing():
        try:
            if _resume_commit(journal, job) is not None:
                report.finished.append(job.id)
        except (OSError, OutputError) as exc:
            log.warning("job %d: could not finish its commit after a restart: %s", job.id, exc)
    # No attempt limit here: the parent never decodes a photo, so no photo can take the service
    # down, and a job in flight across a few restarts or reboots must not be given up for that.
    # Photos that crash workers are counted and given up by the pool.
    report.requeued = journal.requeue_running("the service stopped while this job was running")
    for job in journal.pending_originals():
        try:
            if job.state in SUCCEEDED:
                outcome = dispose_original(journal, job.id, cfg)
            else:
                outcome = failed.set_aside(journal, job.id, cfg)
            report.originals += 1
            if outcome.action == Original.LEFT:
                report.left.append(outcome)
        except (OSError, OutputError) as exc:
            log.warning("job %d: could not handle the original %s: %s", job.id, job.source, exc)
    report.temps_removed = clean_stale_temps(journal, cfg)
    return report
