"""The control commands the service loop answers (``answer``), from the CLI's control channel and
the dashboard alike: status, pause and resume, and what a person asks of one photo: restore a done
photo again (redo), send a failure through again (retry), take one off the Failed page (dismiss).
Those find the photo a name or id means and say why not in the reply."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from gpen_watch.base.errors import ConfigError
from gpen_watch.journal.journal import Job
from gpen_watch.journal.states import FAILURES, SUCCEEDED, Hidden
from gpen_watch.outbox import keep, redo, retry
from gpen_watch.service import report, review
from gpen_watch.service.running import Running

log = logging.getLogger(__name__)


def matches_json(jobs: list[Job]) -> list[dict[str, Any]]:
    """The candidates of an ambiguous name, for the CLI to list with their ids."""
    return [
        {"id": j.id, "name": j.rel.name, "inbox": str(j.inbox), "finished": j.finished, "reason": j.error}
        for j in jobs
    ]


def not_one(found: list[Job], target: str, what: str, page: str) -> dict[str, Any]:
    """The refusal when ``target`` names no photo, or several (listed, for the user to pick an id)."""
    if not found:
        return {"ok": False, "error": f"no {what} is called {target!r}; {page} lists them"}
    return {
        "ok": False,
        "error": f"{len(found)} {what}s are called {target!r}; give the run id of the one you mean",
        "matches": matches_json(found),
    }


def failures_named(run: Running, target: str) -> list[Job]:
    """The failures ``target`` names: an id, or a file name (or path) as the user sees it."""
    if target.isdigit():
        job = run.journal.get(int(target))
        return [job] if job is not None and job.state in FAILURES else []
    return [j for j in run.journal.named(target, FAILURES) if j.hidden in (None, Hidden.DISMISSED)]


def retry_command(run: Running, request: dict[str, Any]) -> dict[str, Any]:
    inboxes = [Path(i.path) for i in run.cfg.watch.inboxes]
    if request.get("all"):
        jobs = [j for j in run.journal.failures_shown() if j.original_path is not None]
        sent, refused = [], []
        for job in jobs:
            try:
                sent.append(str(retry.send_back(run.journal, job.id, inboxes)))
            except retry.RetryRefused as exc:
                refused.append(str(exc))
        return {"ok": True, "sent": sent, "refused": refused}
    target = str(request.get("target", ""))
    found = failures_named(run, target)
    if len(found) != 1:
        return not_one(found, target, "failed photo", "the Failed page")
    try:
        where = retry.send_back(run.journal, found[0].id, inboxes)
    except retry.RetryRefused as exc:
        return {"ok": False, "error": str(exc)}
    return {"ok": True, "sent": [str(where)], "refused": []}


def dismiss_command(run: Running, request: dict[str, Any]) -> dict[str, Any]:
    try:
        retry.dismiss(run.journal, int(request.get("id", -1)))
    except (retry.RetryRefused, ValueError, TypeError) as exc:
        return {"ok": False, "error": str(exc)}
    return {"ok": True}


def photos_named(run: Running, target: str) -> list[Job]:
    """The restored photos ``target`` names, one job each: the newest run with a result of each
    (a done run, or a copy of another photo's result under its own name)."""
    if target.isdigit():
        job = run.journal.get(int(target))
        return [job] if job is not None and job.state in SUCCEEDED and job.output is not None else []
    newest: dict[str, Job] = {}
    for job in run.journal.named(target, SUCCEEDED):
        if job.output is not None:
            newest.setdefault(str(job.output), job)  # named() gives the newest first
    return list(newest.values())


def redo_command(run: Running, request: dict[str, Any]) -> dict[str, Any]:
    target = str(request.get("target", ""))
    found = photos_named(run, target)
    if len(found) != 1:
        return not_one(found, target, "restored photo", "the Results page")
    job = found[0]
    settings = dict(request.get("settings") or {})
    if request.get("beside"):
        settings[redo.BESIDE] = True
        if len(run.journal.results_of(job)) > 1:
            return {
                "ok": False,
                "error": f"{job.rel.name} has two results to compare already: keep one of them first "
                "(its page's Compare)",
            }
    if request.get("face_ids") is not None:
        settings[redo.FACE_IDS] = list(request["face_ids"])
        settings.setdefault("restore.faces", "all")  # the faces picked, whatever the inbox chooses
    note = ""
    try:
        own = redo.redo_config(run.cfg, job, settings)
        if redo.FACE_IDS in settings:
            faces = run.views.faces_found(job.id) if run.views is not None else None
            note = redo.check_face_ids(job, settings[redo.FACE_IDS], faces)
        if run.gate is not None:  # an engine that loads model files (a stand-in loads none)
            redo.check_models(job, own, settings)
        original = redo.original_of(job)
    except (ConfigError, redo.RedoRefused) as exc:
        return {"ok": False, "error": str(exc)}
    # The copies of this photo (dropped again under other names) are redone with it: each has the
    # same content, so the same settings suit it, and the photo is restored once for them all
    # (Journal.add_redos); one whose original is gone says so.
    copies: list[tuple[Job, Path]] = []
    left: list[str] = []
    # A redo beside to compare is this photo's alone (its copies keep the one result they have).
    for other in [] if redo.BESIDE in settings else run.journal.copy_group(job):
        if other.id != job.id:
            try:
                copies.append((other, redo.original_of(other, read=False)))
            except redo.RedoRefused as exc:
                left.append(str(exc))
    again, *also = run.journal.add_redos([(job, original), *copies], settings)
    run.maybe_queued = True
    log.info("redo of %s asked (run %d from %s)", job.rel.name, again.id, original)
    if also:
        names = ", ".join(str(c.rel) for c in also)
        note = " ".join(
            filter(
                None,
                (note, f"Its copies are redone with it (restored once, each given the result): {names}."),
            )
        )
    if left:
        note = " ".join(filter(None, (note, "Not redone: " + "; ".join(left) + ".")))
    reply = {
        "ok": True,
        "id": again.id,
        "of": job.id,
        "name": job.rel.name,
        "output": str(job.output),
        "copies": [c.id for c in also],
    }
    return {**reply, "note": note} if note else reply


def answer(run: Running, request: dict[str, Any]) -> dict[str, Any]:
    """The reply to a control command the service loop answers (``daemon.QUEUED_COMMANDS`` but
    reload, which replaces the loop's own state)."""
    cmd = request["cmd"]
    if cmd == "mark":
        return review.mark_command(run, request)
    if cmd == "bulk":
        return review.bulk_command(run, request)
    if cmd == "redo":
        return redo_command(run, request)
    if cmd == "retry":
        reply = retry_command(run, request)
        run.maybe_queued = True
        return reply
    if cmd == "dismiss":
        return dismiss_command(run, request)
    if cmd == "keep":
        return keep_command(run, request)
    if cmd == "pause":
        return pause_command(run)
    if cmd == "resume":
        return resume_command(run)
    return {"ok": True, **report.build_status(run).to_json()}


def keep_command(run: Running, request: dict[str, Any]) -> dict[str, Any]:
    """Keep one of a photo's two results (``outbox.keep``): ``kept`` and ``other``, run ids."""
    try:
        kept_id, other_id = int(request.get("kept", -1)), int(request.get("other", -1))
        done = keep.keep(run.journal, run.cfg, kept_id, other_id)
    except (keep.KeepRefused, ValueError, TypeError) as exc:
        return {"ok": False, "error": str(exc)}
    except OSError as exc:
        log.error("keeping run %s over run %s failed: %s", request.get("kept"), request.get("other"), exc)
        return {"ok": False, "error": f"could not keep that result: {exc.strerror or exc}"}
    log.info("run %d kept over run %d, at %s", done.kept, done.other, done.to)
    return {
        "ok": True,
        "kept": done.kept,
        "other": done.other,
        "output": done.to,
        "other_file": done.other_to,
    }


def pause_command(run: Running) -> dict[str, Any]:
    """``said``: the reply in words, for the CLI and the dashboard ("already paused" when it was)."""
    pool = run.pool
    in_flight = pool.in_flight()
    finish = f"; {in_flight} image(s) in flight will finish" if in_flight else ""
    if run.paused:
        return {"ok": True, "in_flight": in_flight, "changed": False, "said": f"already paused{finish}"}
    run.paused = True
    pool.pause()
    log.info("paused: no new work; %d image(s) in flight finish", in_flight)
    return {"ok": True, "in_flight": in_flight, "changed": True, "said": f"paused{finish}"}


def resume_command(run: Running) -> dict[str, Any]:
    """Resume, and try at once what waits for a retry: the user may have just fixed it (the
    outbox, an originals folder, the network for a model download), paused or not."""
    was_paused = run.paused
    run.paused = False
    run.maybe_queued = True
    run.hold_until = 0.0  # the user says the outbox is fixed: try it now, not at the next retry
    run.originals.retry_soon()  # the same for originals waiting for their folder
    run.pool.resume()
    standby = run.standby.reply
    if standby:  # the schedule or the battery still keeps new photos waiting: no override
        run.pool.pause()
    if run.gate is not None:
        run.gate.retry_now()
    if not was_paused and standby:
        return {"ok": True, "changed": False, "said": f"not paused by you, but {standby}"}
    if not was_paused:
        said = (
            "not paused (it was already running); what waited for a retry (the outbox, originals, "
            "model downloads, stopped workers) is tried again now"
        )
        return {"ok": True, "changed": False, "said": said}
    log.info("resumed%s", f"; {standby}" if standby else "")
    return {"ok": True, "changed": True, "said": f"resumed; {standby}" if standby else "resumed"}
