"""The control commands of a review on the dashboard: marks on runs (``mark``) and one action on
many runs at once (``bulk``: redo with one set of settings, accept, needs another look, clear the
mark, and on failures retry or dismiss).

A bulk redo of hundreds of photos queues in one journal transaction. Each photo's original is
checked to be where its run left it, with the size it had; the single-photo redo also
reads it through to compare its content, which for 500 photos would take minutes, so a bulk redo
leaves that to the restorer, which refuses a file it cannot decode as it does any other.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from gpen_watch.base.errors import ConfigError
from gpen_watch.journal.journal import Job
from gpen_watch.journal.review import BULK_MAX
from gpen_watch.journal.states import FAILURES, JobState, Mark
from gpen_watch.outbox import naming, redo, retry
from gpen_watch.service.running import Running

log = logging.getLogger(__name__)

MAX_NOTE = 200


def mark_command(run: Running, request: dict[str, Any]) -> dict[str, Any]:
    ids = _ids(request)
    what, note = request.get("mark"), request.get("note")
    note = str(note)[:MAX_NOTE].strip() or None if note else None
    if ids is None:
        return {"ok": False, "error": f"ids must be a list of at most {BULK_MAX} run ids"}
    if what == "reviewed":
        return {"ok": True, "marked": run.journal.set_reviewed(ids)}
    marks = {"accepted": Mark.ACCEPTED, "look": Mark.LOOK, "none": None}
    if what not in marks:
        return {"ok": False, "error": "a mark is accepted, look, none or reviewed"}
    marked = run.journal.set_mark(ids, marks[str(what)], note)
    if not marked:
        return {"ok": False, "error": "only a restored photo can be marked (this run has no result)"}
    return {"ok": True, "marked": marked}


def bulk_command(run: Running, request: dict[str, Any]) -> dict[str, Any]:
    ids = _ids(request)
    if ids is None:
        return {"ok": False, "error": f"ids must be a list of at most {BULK_MAX} run ids"}
    action = request.get("action")
    if action in ("accept", "look", "unmark"):
        mark = {"accept": Mark.ACCEPTED, "look": Mark.LOOK, "unmark": None}[str(action)]
        marked = run.journal.set_mark(ids, mark, request.get("note"))
        return {"ok": True, "done": marked, "skipped": len(ids) - marked}
    if action == "redo":
        return bulk_redo(run, ids, dict(request.get("settings") or {}))
    if action in ("retry", "dismiss"):
        return bulk_failures(run, ids, str(action))
    return {"ok": False, "error": "the action is redo, accept, look, unmark, retry or dismiss"}


def bulk_redo(run: Running, ids: list[int], settings: dict[str, Any]) -> dict[str, Any]:
    queue: list[tuple[Job, Path]] = []
    refused: list[str] = []
    checked: dict[str, str | None] = {}  # per inbox: the settings' refusal, or None
    for job_id in ids:
        job = run.journal.get(job_id)
        if job is None or job.state != JobState.DONE:
            continue  # a failure or an older run in the selection: nothing to redo
        inbox = str(naming.find_inbox(run.cfg, job.inbox))
        if inbox not in checked:
            # The settings and the model files they need, once per inbox (the same for its photos).
            try:
                own = redo.redo_config(run.cfg, job, settings)
                if run.gate is not None:  # an engine that loads model files (a stand-in loads none)
                    redo.check_models(job, own, settings)
                checked[inbox] = None
            except (ConfigError, redo.RedoRefused) as exc:
                checked[inbox] = str(exc).removeprefix(f"{job.rel.name}: ")
        if checked[inbox] is not None:
            refused.append(f"{job.rel.name}: {checked[inbox]}")
            continue
        try:
            queue.append((job, redo.original_of(job, read=False)))
        except redo.RedoRefused as exc:
            refused.append(str(exc))
    queued = run.journal.add_redos(queue, settings) if queue else []
    if queued:
        run.maybe_queued = True
        log.info(
            "redo of %d photo(s) asked from the dashboard (runs %d-%d)",
            len(queued),
            queued[0].id,
            queued[-1].id,
        )
    return {
        "ok": True,
        "queued": len(queued),
        "first": queued[0].id if queued else None,
        "last": queued[-1].id if queued else None,
        "refused": refused[:50],
        "refused_count": len(refused),
    }


def bulk_failures(run: Running, ids: list[int], action: str) -> dict[str, Any]:
    inboxes = [Path(i.path) for i in run.cfg.watch.inboxes]
    done, refused = 0, []
    for job_id in ids:
        job = run.journal.get(job_id)
        if job is None or job.state not in FAILURES or job.hidden is not None:
            continue
        try:
            if action == "retry":
                retry.send_back(run.journal, job.id, inboxes)
                run.maybe_queued = True
            else:
                retry.dismiss(run.journal, job.id)
            done += 1
        except retry.RetryRefused as exc:
            refused.append(str(exc))
    return {"ok": True, "done": done, "refused": refused[:50], "refused_count": len(refused)}


def _ids(request: dict[str, Any]) -> list[int] | None:
    ids = request.get("ids")
    if (
        not isinstance(ids, list)
        or len(ids) > BULK_MAX
        or not all(isinstance(i, int) and i >= 0 for i in ids)
    ):
        return None
    return list(dict.fromkeys(ids))
