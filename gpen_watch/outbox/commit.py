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
4. ``originals.dispose_original``: only now is the original archived (moved, collision-safe, mirroring the
   subfolder), kept, or deleted - each recorded in the journal before and after. When the archive
   (or failed/) folder refuses the move for a reason that can clear (full, read-only, no
   permission, gone, I/O error), the original stays in the inbox as "waiting" and
   ``originals.retry_waiting`` (the service, every 30 s and on ``resume``) moves it once the
   folder works.

Start-up recovery after a crash at any of these steps is ``recovery.recover``.

What happens to originals is ``originals`` (and ``moves`` for the move itself).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpen_watch.base.errors import ConfigError, OutputError
from gpen_watch.base.fsutil import remove_quietly
from gpen_watch.config import Config, inbox_config, profile_note
from gpen_watch.imaging.formats import OUTPUT_SUFFIXES, matching_suffix
from gpen_watch.journal.faces import FaceRow
from gpen_watch.journal.journal import Job, Journal
from gpen_watch.journal.records import describe_settings
from gpen_watch.outbox import durable, failed, folders, naming, redo
from gpen_watch.outbox.moves import OriginalOutcome
from gpen_watch.outbox.originals import dispose_original
from gpen_watch.platform import presence
from gpen_watch.restore.api import FileJob, FileResult


@dataclass(frozen=True)
class CommitOutcome:
    """``output`` is None when the job was no longer active and the result was discarded."""

    output: Path | None
    original: OriginalOutcome | None = None


# --- 1. prepare ---------------------------------------------------------------------------------


def prepare(
    journal: Journal,
    job_id: int,
    cfg: Config,
    *,
    today: dt.date | None = None,
    away: presence.Away = presence.present,
) -> tuple[Path, Path]:
    """Reserve the output name for a claimed job and create its folder: returns (final, tmp).

    A job that already holds a name (requeued, or after a restart) keeps it, as long as it is
    still inside the configured outbox. Removes any temp file an earlier attempt left behind.
    """
    job = journal.require(job_id)
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
                raise OutputError(f"{job.source}: run {job_id} is not active; cannot reserve an output")
    folders.make_output_dir(journal, job_id, final.parent, root, away)
    tmp = naming.tmp_path(final, job_id)
    remove_quietly(tmp)
    return final, tmp


def file_job(
    journal: Journal, job_id: int, cfg: Config, *, scale: float = 1.0, away: presence.Away = presence.present
) -> FileJob:
    """``prepare`` and build the worker's FileJob (dst is the temp name)."""
    _, tmp = prepare(journal, job_id, cfg, away=away)
    job = journal.require(job_id)
    inbox = naming.find_inbox(cfg, job.inbox)
    own = own_config(cfg, job)
    return FileJob(
        src=job.source,
        dst=tmp,
        format=own.output.format,
        jpeg_quality=own.output.jpeg_quality,
        scale=scale,
        restore=own.restore if inbox.restore or job.is_redo or job.settings else None,
        note=profile_note(cfg, inbox),
        face_ids=redo.face_ids(job),
        settings_label=redo.settings_label(job) or sent_label(job),
        # The output folder's drive as it is now, just made or found: a worker that finds another
        # one there (the drive left, its bare mount point is left) writes nothing into it.
        dst_device=os.stat(tmp.parent).st_dev,
    )


def own_config(cfg: Config, job: Job) -> Config:
    """The settings ``job`` is restored with: its inbox's (the global ones if that inbox is no
    longer configured), with its own on top where it has some (a redo's, or those a photo was
    sent through the API with), checked as the TOML file's are. A photo's own settings that no
    longer pass (a reload changed what they sit on) fail that photo with the sentence why."""
    if not job.settings:
        return inbox_config(cfg, naming.find_inbox(cfg, job.inbox))
    try:
        return redo.redo_config(cfg, job, job.settings)
    except ConfigError as exc:
        raise OutputError(
            f"{job.rel.name}: its own settings ({describe_settings(job.settings)}) {exc}"
        ) from None


def sent_label(job: Job) -> str:
    """Whose settings a photo sent with its own is restored with, for the worker's messages."""
    return f"the settings it was sent with ({describe_settings(job.settings)})" if job.settings else ""


# --- 2. publish ---------------------------------------------------------------------------------


def publish(journal: Journal, job_id: int, result: FileResult) -> Path | None:
    """Make the worker's temp file (``result.dst``) the job's final output, durably.

    Returns the final path (the reserved one, or the next free name if another file took it), or
    None when the job is no longer active (then the temp file is left for the caller to discard).
    Raises OutputError if the temp file is missing or cannot be placed.
    """
    job = journal.require(job_id)
    if result.dst is None or job.output is None:
        raise OutputError(f"{job.source}: no output to publish for run {job_id} (was it prepared?)")
    tmp = Path(result.dst)
    try:
        durable.fsync_file(tmp)
        st = os.stat(tmp)
    except OSError as exc:
        raise OutputError(f"{tmp}: worker reported success but its output cannot be read: {exc}") from exc
    name = output_name(job.output.name, result.format)
    if result.checks:
        # Before the commit token: a crash after it leaves a run whose faces are kept.
        journal.record_faces(job_id, face_rows(result))
    return place_output(
        journal,
        job,
        tmp,
        st,
        faces=result.faces,
        timings=result.timings,
        notes=result.notes,
        name=name,
        used=used_json(result),
    )


def face_rows(result: FileResult) -> list[FaceRow]:
    """The engine's checks of each face (``FileResult.checks``) as the journal keeps them."""
    return [
        FaceRow(c.index, c.restored, c.detail, c.distance, c.flagged, c.descriptor) for c in result.checks
    ]


def used_json(result: FileResult) -> dict[str, Any] | None:
    """The settings the engine says it restored the photo with, as the journal keeps them."""
    return result.used.to_json() if result.used is not None else None


def output_name(name: str, fmt: str | None) -> str:
    """``name`` with the extension of the format the worker actually wrote.

    The name is chosen before the photo is decoded, from its extension; the content decides the
    format ("same"): a JPEG named .png is written as JPEG, an animated GIF as PNG. A result must not
    be named as something it is not, so the extension follows the content.
    """
    if not fmt or fmt not in OUTPUT_SUFFIXES:
        return name  # unknown to us (a verbatim copy of a GIF...): the source's own name fits it
    stem, ext = os.path.splitext(name)
    return naming.truncate_name(stem + matching_suffix(fmt, ext))


def place_output(
    journal: Journal,
    job: Job,
    tmp: Path,
    st: os.stat_result,
    *,
    faces: int,
    timings: dict[str, float],
    notes: list[str],
    name: str | None = None,
    used: dict[str, Any] | None = None,
) -> Path | None:
    final = job.output
    if final is None:
        raise OutputError(f"{job.source}: run {job.id} has no output name reserved (was it prepared?)")

    def record(dst: Path) -> bool:
        return journal.begin_commit(job.id, dst, st.st_ino, st.st_size, faces, timings, notes, used)

    side = redo.beside(job)
    if side:
        # Beside the photo's result, never over it or any file: compared until one is kept. (A
        # beside result recovery places again holds its own name already.)
        of = journal.get(job.redo_of) if job.redo_of is not None else None
        if of is None or of.output is None or final == of.output:
            name = redo.beside_name(final.parent / (name or final.name), job)
    elif job.is_redo and (name or final.name) == final.name:
        return _replace_output(tmp, final, record)

    try:
        placed = durable.place(
            tmp,
            final.parent,
            name or final.name,
            before=record,
            taken=lambda p: journal.output_reserved(p, exclude_job=job.id),
        )
    except OSError as exc:
        raise OutputError(f"{final}: cannot move the result into place: {exc.strerror or exc}") from exc
    if placed is not None:
        drop_replaced(job, placed, final)
    return placed


def drop_replaced(job: Job, placed: Path, first: Path | None) -> None:
    """A redo in another format is placed under another name than the result it replaces
    (``first``, the name it was given to reuse): that one goes once the new one is in place,
    leaving one result for the photo. Recovery calls it too, for a redo a crash cut off between
    placing its result and this."""
    if (
        first is None
        or placed == first
        or placed.parent != first.parent
        or not job.is_redo
        or redo.beside(job)
    ):
        return
    remove_quietly(first)
    durable.fsync_dir(first.parent)


def _replace_output(tmp: Path, final: Path, record: Callable[[Path], bool]) -> Path | None:
    """A redo's result over the first one, in one rename: a reader sees the old file or the new
    one, never neither. The commit token is recorded first, so after a crash recovery knows the
    final file for ours by its inode (``recovery._resume_commit``)."""
    if not record(final):
        return None
    try:
        os.replace(tmp, final)
        durable.fsync_dir(final.parent)
    except OSError as exc:
        raise OutputError(f"{final}: cannot put the new result in place: {exc.strerror or exc}") from exc
    return final


# --- all steps ----------------------------------------------------------------------------------


def commit(
    journal: Journal, job_id: int, result: FileResult, cfg: Config, away: presence.Away = presence.present
) -> CommitOutcome:
    """Steps 2-4 for a successful FileResult: publish, finish, dispose of the original.

    If the job is no longer active (another attempt finished it), the temp file is discarded and
    ``output`` is None. OutputError (disk full, folder gone...) leaves the job running for the
    caller to requeue or fail; nothing in the inbox has been touched.
    """
    final = publish(journal, job_id, result)
    if final is None:
        if result.dst:
            remove_quietly(result.dst)
        return CommitOutcome(None)
    journal.finish(job_id, final, result.faces, result.timings, result.notes, used_json(result))
    outcome = CommitOutcome(final, dispose_original(journal, job_id, cfg, away))
    failed.clear_retried(journal, journal.require(job_id))  # a retried failure's old error file
    return outcome
