"""The control commands of a review on the dashboard: flags and stars on runs (``mark``) and one
action on many runs at once (``bulk``: redo with one set of settings, pick, reject, needs another
look, clear the flag, and on failures retry or dismiss). A redo of a photo redoes its copies (the
same photo dropped again under other names) with it.

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
from gpen_watch.journal.states import FAILURES, MAX_STARS, SUCCEEDED, Mark
from gpen_watch.outbox import naming, redo, retry
from gpen_watch.service.running import Running

log = logging.getLogger(__name__)

MAX_NOTE = 200
# What the dashboard's marks and bulk actions name, as the journal's flags (None: cleared).
FLAGS: dict[str, Mark | None] = {
    "accepted": Mark.ACCEPTED,
    "rejected": Mark.REJECTED,
    "look": Mark.LOOK,
    "none": None,
}
BULK_FLAGS: dict[str, Mark | None] = {
    "accept": Mark.ACCEPTED,
    "reject": Mark.REJECTED,
    "look": Mark.LOOK,
    "unmark": None,
}


def mark_command(run: Running, request: dict[str, Any]) -> dict[str, Any]:
    """Flag (``mark``: accepted, rejected, look, none) and rate (``stars``: 0 to 5, 0 clearing it)
    the runs ``ids``, either or both; "reviewed" notes that their pages were seen."""
    ids = _ids(request)
    what, note, stars = request.get("mark"), request.get("note"), request.get("stars")
    note = str(note)[:MAX_NOTE].strip() or None if note else None
    if ids is None:
        return {"ok": False, "error": f"ids must be a list of at most {BULK_MAX} run ids"}
    if what == "reviewed":
        return {"ok": True, "marked": run.journal.set_reviewed(ids)}
    if what is None and stars is None:
        return {"ok": False, "error": "say a mark (accepted, rejected, look or none) or stars (0 to 5)"}
    if what is not None and what not in FLAGS:
        return {"ok": False, "error": "a mark is accepted, rejected, look, none or reviewed"}
    if stars is not None and (
        isinstance(stars, bool) or not isinstance(stars, int) or not 0 <= stars <= MAX_STARS
    ):
        return {"ok": False, "error": f"stars are a whole number from 0 (none) to {MAX_STARS}"}
    marked = run.journal.set_mark(ids, FLAGS[str(what)], note) if what is not None else 0
    if stars is not None:
        marked = max(marked, run.journal.set_stars(ids, stars))
    if not marked:
        return {"ok": False, "error": "only a restored photo can be marked (this run has no result)"}
    return {"ok": True, "marked": marked}


def bulk_command(run: Running, request: dict[str, Any]) -> dict[str, Any]:
    ids = _ids(request)
    if ids is None:
        return {"ok": False, "error": f"ids must be a list of at most {BULK_MAX} run ids"}
    action = request.get("action")
    if action in BULK_FLAGS:
        marked = run.journal.set_mark(ids, BULK_FLAGS[str(action)], request.get("note"))
        return {"ok": True, "done": marked, "skipped": len(ids) - marked}
    if action == "redo":
        return bulk_redo(run, ids, dict(request.get("settings") or {}))
    if action in ("retry", "dismiss"):
        return bulk_failures(run, ids, str(action))
    return {"ok": False, "error": "the action is redo, accept, reject, look, unmark, retry or dismiss"}


def bulk_redo(run: Running, ids: list[int], settings: dict[str, Any]) -> dict[str, Any]:
    queue: list[tuple[Job, Path]] = []
    refused: list[str] = []
    checked: dict[str, str | None] = {}  # per inbox: the settings' refusal, or None
    for job in with_copies(run, ids):
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


def with_copies(run: Running, ids: list[int]) -> list[Job]:
    """The runs ``ids`` with a result, each with the copies of its photo (``copy_group``): a redo
    of a photo is a redo of its copies too. Failures and runs without a result are left out."""
    runs: dict[int, Job] = {}
    for job_id in ids:
        job = run.journal.get(job_id)
        if job is None or job.state not in SUCCEEDED or job.output is None or job.id in runs:
            continue  # a failure in the selection, or one already here as a copy: nothing to add
        for member in run.journal.copy_group(job):
            runs.setdefault(member.id, member)
    return list(runs.values())


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
