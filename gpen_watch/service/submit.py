"""Photos sent through the HTTP API, into the journal: the control commands ``submit`` and
``cancel`` the service loop answers, and the start-up step that finishes what a crash cut off.

The dashboard's thread receives a photo into a hidden temp name in its inbox (``outbox.sent``) and
asks the loop to take it. The loop, the one writer of the journal's jobs, then (1) answers a
repeated Idempotency-Key with the photo it gave before, (2) records the job with its settings and
its submission in one durable transaction, under a free name in the inbox (never one a file or a
job holds), (3) renames the temp file to that name without replacing anything, and (4) treats it
as the watcher's arrival would be treated (``intake.recorded``). The watcher sees the renamed file
later and finds it known. A crash between (2) and (3) is finished by ``finish_uploads`` at the next
start; the temp files of uploads that never reached (2) are removed then.
"""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path, PurePosixPath
from typing import Any

from gpen_watch.base.errors import ConfigError, OutputError
from gpen_watch.base.fsutil import remove_quietly
from gpen_watch.config import InboxConfig
from gpen_watch.imaging.formats import denied_name
from gpen_watch.journal.states import JobState
from gpen_watch.journal.submissions import OWNER, Submission, Submitted
from gpen_watch.outbox import duplicates, naming, sent
from gpen_watch.outbox.durable import fsync_dir
from gpen_watch.platform.files import publish_file
from gpen_watch.service import intake
from gpen_watch.service.running import Running

log = logging.getLogger(__name__)

COMMANDS = ("submit", "cancel")
CANCELLED = "cancelled through the API before it was restored"


def answer(run: Running, request: dict[str, Any]) -> dict[str, Any]:
    if request["cmd"] == "cancel":
        return cancel_command(run, request)
    return submit_command(run, request)


def refused(status: int, error: str) -> dict[str, Any]:
    """A refusal the API answers with HTTP ``status`` and the sentence."""
    return {"ok": False, "status": status, "error": error}


def configured_inbox(run: Running, path: str) -> InboxConfig | None:
    key = os.path.normcase(os.path.abspath(path))
    for inbox in run.cfg.watch.inboxes:
        if os.path.normcase(os.path.abspath(inbox.path)) == key:
            return inbox
    return None


def submit_command(run: Running, request: dict[str, Any]) -> dict[str, Any]:
    upload = Path(str(request.get("upload", "")))
    inbox = configured_inbox(run, str(request.get("inbox", "")))
    if (
        inbox is None
        or upload.parent != Path(os.path.abspath(inbox.path))
        or not sent.is_upload_name(upload.name)
    ):
        if sent.is_upload_name(upload.name):
            remove_quietly(upload)
        return refused(409, "that inbox is no longer watched (the settings changed); send the photo again")
    client, key = str(request.get("client") or OWNER), request.get("key")
    asked = str(request.get("request", ""))
    if key:
        before = run.journal.submission_by_key(client, str(key))
        if before is not None:
            remove_quietly(upload)
            if before.request != asked:
                return refused(
                    422,
                    f"Idempotency-Key {key!r} was used for another request (another photo, name, inbox or "
                    f"settings: photo {before.job.id}, {before.job.rel.name}); use a new key for a new photo",
                )
            return {"ok": True, "id": before.job.id, "name": before.job.rel.as_posix(), "again": True}
    settings = {str(k): str(v) for k, v in dict(request.get("settings") or {}).items()}
    try:
        own = sent.check(run.cfg, inbox, settings)
        missing = sent.missing_models(own, settings) if run.gate is not None and settings else None
    except ConfigError as exc:
        remove_quietly(upload)
        return refused(400, str(exc))
    if missing:
        remove_quietly(upload)
        return refused(409, f"{PurePosixPath(str(request.get('rel'))).name}: {missing}; nothing was queued")
    try:
        return _take(run, inbox, upload, request, settings, client)
    except (OSError, OutputError) as exc:
        remove_quietly(upload)
        log.warning("%s: could not take a photo sent through the API: %s", inbox.path, exc)
        return refused(507 if _no_room(exc) else 500, f"the inbox {inbox.path} did not take it: {exc}")


def _take(
    run: Running,
    inbox: InboxConfig,
    upload: Path,
    request: dict[str, Any],
    settings: dict[str, str],
    client: str,
) -> dict[str, Any]:
    root = Path(os.path.abspath(inbox.path))
    rel = PurePosixPath(str(request["rel"]))
    folder = root.joinpath(*rel.parts[:-1])
    naming.ensure_dir(folder, root)
    st = os.stat(upload)
    size, sha = int(request["size"]), str(request["sha256"])
    if st.st_size != size:
        raise OutputError(f"{upload}: {st.st_size} bytes where {size} were received")
    final = _free(run, folder, rel.name)
    sub = Submission(
        client, str(request.get("batch") or ""), request.get("key") or None, str(request["request"]), upload
    )
    added = run.journal.add(
        final, root, final.relative_to(root), size, st.st_mtime, sha, settings=settings, submission=sub
    )
    placed = _place(run, added.job.id, upload, final, root)
    if placed is None:
        return refused(500, f"the photo could not be renamed into {folder}")
    fsync_dir(placed.parent)
    intake.recorded(run, placed, added, supported=not denied_name(placed.name))
    log.info("%s: received through the API (%s)", placed, client)
    name = placed.relative_to(root).as_posix()
    reply: dict[str, Any] = {
        "ok": True,
        "id": added.job.id,
        "name": name,
        "again": False,
        "status": added.status,
    }
    notes = []
    if name != rel.as_posix():
        notes.append(f"{rel.name} was taken in the inbox, so it is called {placed.name}")
    first = added.duplicate_of
    if added.status == "duplicate" and first is not None:
        why = duplicates.settings_differ(run.cfg, run.journal.require(added.job.id), first)
        same = f"the same photo as photo {first.id} ({first.rel.name})"
        notes.append(f"{same}, but {why}" if why else f"{same}: its result is copied under this name")
    return {**reply, "note": "; ".join(notes)} if notes else reply


def _free(run: Running, folder: Path, name: str) -> Path:
    """The first of ``name``, ``name (1)``... that no file occupies and no job holds."""
    return naming.free_name(folder, name, taken=run.journal.source_in_use)


def _place(run: Running, job_id: int, upload: Path, final: Path, root: Path) -> Path | None:
    """Rename ``upload`` to ``final`` without replacing a file; if one took that name meanwhile,
    to the next free one, recorded. The path it got, or None (the job is then gone)."""
    target = final
    for _ in range(naming.MAX_COLLISIONS):
        try:
            publish_file(upload, target)
        except FileExistsError:
            target = _free(run, final.parent, final.name)
            continue
        except OSError as exc:
            run.journal.move(job_id, JobState.GONE, f"could not be renamed into the inbox: {exc}")
            remove_quietly(upload)
            raise
        if target != final:
            run.journal.placed(job_id, target, target.relative_to(root))
        return target
    run.journal.move(job_id, JobState.GONE, "no free name in the inbox")
    return None


def _no_room(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def cancel_command(run: Running, request: dict[str, Any]) -> dict[str, Any]:
    """Take back a photo sent through the API that is still queued: its file leaves the inbox and
    its job ends as gone. One that a worker has, or that has ended, is not cancelled."""
    job_id = int(request.get("id", -1))
    client = str(request.get("client") or OWNER)
    found = run.journal.submission_of(job_id)
    if found is None or (client != OWNER and found.client != client):
        return refused(404, f"no photo {job_id} was sent with this token")
    job = found.job
    if job.state != JobState.QUEUED:
        what = "a worker is restoring it" if job.state == JobState.RUNNING else f"it has ended ({job.state})"
        return refused(409, f"photo {job_id} ({job.rel.name}) cannot be cancelled: {what}")
    try:
        os.unlink(job.source)
    except FileNotFoundError:
        pass
    except OSError as exc:
        return refused(
            500, f"photo {job_id} ({job.rel.name}) stays queued: its file could not be removed: {exc}"
        )
    run.journal.move(job_id, JobState.GONE, CANCELLED)
    log.info("%s: %s", job.source, CANCELLED)
    return {"ok": True, "id": job_id, "state": str(JobState.GONE)}


def finish_uploads(run: Running) -> None:
    """At start, before the watcher's scan: rename in the photos whose record a crash left without
    their file, and remove the temp files of uploads that were never recorded."""
    waiting: set[Path] = set()
    for s in run.journal.uploads_to_finish():
        if s.upload is not None and os.path.lexists(s.upload):
            waiting.add(s.upload)
            _finish_one(run, s)
    for inbox in run.cfg.watch.inboxes:
        try:
            names = os.listdir(inbox.path)
        except OSError:
            continue
        for name in names:
            path = Path(os.path.abspath(inbox.path)) / name
            if sent.is_upload_name(name) and path not in waiting:
                remove_quietly(path)
                log.info("%s: removed the temp file of an upload cut off by the last stop", path)


def _finish_one(run: Running, s: Submitted) -> None:
    assert s.upload is not None
    root = Path(os.path.abspath(s.job.inbox))
    try:
        placed = _place(run, s.job.id, s.upload, s.job.source, root)
    except OSError as exc:
        log.warning("%s: could not finish the upload of %s: %s", s.upload, s.job.source, exc)
        return
    if placed is not None:
        log.info("%s: the upload a stop cut off between its record and its rename is in the inbox", placed)
