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
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from gpen_watch.base.errors import ConfigError, OutputError
from gpen_watch.base.fsutil import remove_quietly
from gpen_watch.config import InboxConfig
from gpen_watch.imaging.formats import denied_name
from gpen_watch.journal.records import AddResult
from gpen_watch.journal.states import JobState
from gpen_watch.journal.submissions import OWNER, SentFile, Submission, Submitted
from gpen_watch.outbox import duplicates, naming, sent
from gpen_watch.platform.files import publish_file
from gpen_watch.service import intake
from gpen_watch.service.running import Running

log = logging.getLogger(__name__)

COMMANDS = ("submit", "cancel")
CANCELLED = "cancelled through the API before it was restored"


def answer(run: Running, request: dict[str, Any]) -> dict[str, Any]:
    """One command: a cancel, or a submit alone (the loop takes the submits of a turn together)."""
    if request["cmd"] == "cancel":
        return cancel_command(run, request)
    return take_all(run, [request])[0]


def refused(status: int, error: str) -> dict[str, Any]:
    """A refusal the API answers with HTTP ``status`` and the sentence."""
    return {"ok": False, "status": status, "error": error}


def configured_inbox(run: Running, path: str) -> InboxConfig | None:
    key = os.path.normcase(os.path.abspath(path))
    for inbox in run.cfg.watch.inboxes:
        if os.path.normcase(os.path.abspath(inbox.path)) == key:
            return inbox
    return None


@dataclass
class Taking:
    """A photo received and checked, about to be recorded and renamed in."""

    request: dict[str, Any]
    root: Path
    rel: PurePosixPath
    sent: SentFile


def take_all(run: Running, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The replies to the submits of one turn of the loop, in their order. Every photo taken is
    recorded in one durable journal transaction (a photo's record must be on disk before its
    sender is told it was taken: one flush for all of them, not one each), then renamed in."""
    replies: list[dict[str, Any] | None] = [None] * len(requests)
    takings: list[tuple[int, Taking]] = []
    first: dict[tuple[str, str], int] = {}  # a key this turn already takes: the index taking it
    again: list[tuple[int, int]] = []
    chosen: set[Path] = set()
    for i, request in enumerate(requests):
        key = request.get("key")
        client = str(request.get("client") or OWNER)
        if key and (client, str(key)) in first:
            again.append((i, first[(client, str(key))]))
            continue
        found = _prepare(run, request, chosen)
        if isinstance(found, Taking):
            takings.append((i, found))
            chosen.add(found.sent.source)
            if key:
                first[(client, str(key))] = i
        else:
            replies[i] = found
    if takings:
        try:
            added = run.journal.add_sent([t.sent for _, t in takings])
        except Exception:
            log.exception("the journal did not record %d photo(s) sent through the API", len(takings))
            for i, t in takings:
                remove_quietly(t.sent.submission.upload)
                replies[i] = refused(
                    500, "the journal did not take the photo; nothing was kept: send it again"
                )
        else:
            for (i, t), result in zip(takings, added, strict=True):
                replies[i] = _finish(run, t, result)
    for i, j in again:
        replies[i] = _same_key(requests[i], requests[j], replies[j])
    return [r if r is not None else refused(500, "not answered") for r in replies]


def _same_key(
    request: dict[str, Any], earlier: dict[str, Any], reply: dict[str, Any] | None
) -> dict[str, Any]:
    """A request whose key another of the same turn carried: that one's photo, or 422."""
    remove_quietly(Path(str(request.get("upload", ""))))
    if reply is None or not reply.get("ok"):
        return reply or refused(500, "not answered")
    if request.get("request") != earlier.get("request"):
        return refused(422, _key_reused(request.get("key"), int(reply["id"]), str(reply["name"])))
    return {**reply, "again": True}


def _key_reused(key: object, photo: int, name: str) -> str:
    return (
        f"Idempotency-Key {key!r} was used for another request (another photo, name, inbox or "
        f"settings: photo {photo}, {name}); use a new key for a new photo"
    )


def _prepare(run: Running, request: dict[str, Any], chosen: set[Path]) -> Taking | dict[str, Any]:
    """The photo checked and given its name in the inbox, or the reply that refuses it."""
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
    if key:
        before = run.journal.submission_by_key(client, str(key))
        if before is not None:
            remove_quietly(upload)
            if before.request != str(request.get("request", "")):
                return refused(422, _key_reused(key, before.job.id, before.job.rel.name))
            return {"ok": True, "id": before.job.id, "name": before.job.rel.as_posix(), "again": True}
    settings = {str(k): str(v) for k, v in dict(request.get("settings") or {}).items()}
    rel = PurePosixPath(str(request.get("rel")))
    try:
        own = sent.check(run.cfg, inbox, settings)
        missing = sent.missing_models(own, settings) if run.gate is not None and settings else None
    except ConfigError as exc:
        remove_quietly(upload)
        return refused(400, str(exc))
    if missing:
        remove_quietly(upload)
        return refused(409, f"{rel.name}: {missing}; nothing was queued")
    root = Path(os.path.abspath(inbox.path))
    try:
        folder = root.joinpath(*rel.parts[:-1])
        naming.ensure_dir(folder, root)
        st = os.stat(upload)
        size = int(request["size"])
        if st.st_size != size:
            raise OutputError(f"{upload}: {st.st_size} bytes where {size} were received")
        final = naming.free_name(
            folder, rel.name, taken=lambda p: p in chosen or run.journal.source_in_use(p)
        )
    except (OSError, OutputError) as exc:
        remove_quietly(upload)
        log.warning("%s: could not take a photo sent through the API: %s", inbox.path, exc)
        return refused(507 if _no_room(exc) else 500, f"the inbox {inbox.path} did not take it: {exc}")
    sub = Submission(client, str(request.get("batch") or ""), key or None, str(request["request"]), upload)
    return Taking(
        request,
        root,
        rel,
        SentFile(
            final, root, final.relative_to(root), size, st.st_mtime, str(request["sha256"]), settings, sub
        ),
    )


def _finish(run: Running, t: Taking, added: AddResult) -> dict[str, Any]:
    """Rename the recorded photo in and treat it as an arrival; its reply."""
    root, rel, upload = t.root, t.rel, t.sent.submission.upload
    try:
        placed = _place(run, added.job.id, upload, t.sent.source, root)
    except OSError as exc:
        log.warning("%s: could not rename a photo sent through the API into %s: %s", upload, root, exc)
        return refused(507 if _no_room(exc) else 500, f"the inbox {root} did not take it: {exc}")
    if placed is None:
        return refused(500, f"the photo could not be renamed into {t.sent.source.parent}")
    # No flush of the folder here: the record is, and a rename the disk lost is made again at the
    # next start (finish_uploads), so the reply never waits for a second flush.
    intake.recorded(run, placed, added, supported=not denied_name(placed.name))
    log.info("%s: received through the API (%s)", placed, t.sent.submission.client)
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
