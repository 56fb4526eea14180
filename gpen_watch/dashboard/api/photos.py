"""What the API says of a photo: its state, its result and the report of its faces, as JSON, read
from the journal and the photo's views. No path on the service's machine is ever in an answer:
a photo is named by its id, its inbox by its number, its result by its file name."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from gpen_watch.config import Config, SettingsUsed
from gpen_watch.dashboard import views
from gpen_watch.journal.browse import JournalBrowser
from gpen_watch.journal.records import Job
from gpen_watch.journal.states import ACTIVE, JobState
from gpen_watch.journal.submissions import Submitted

BASE = "/api/v1"


def inbox_number(cfg: Config, inbox: Path) -> int | None:
    key = os.path.normcase(os.path.abspath(inbox))
    for i, candidate in enumerate(cfg.watch.inboxes):
        if os.path.normcase(os.path.abspath(candidate.path)) == key:
            return i
    return None


def result_run(journal: JournalBrowser, job: Job) -> Job | None:
    """The run whose output is this photo's result now: its newest done run (a redo replaces the
    first), its own copy of another photo's result, or for the same photo sent again under the
    same name, that first photo's result. None while it has none."""
    if job.state == JobState.DONE or (job.state == JobState.DUPLICATE and job.output is not None):
        return journal.current_run(job)
    if job.state == JobState.DUPLICATE and job.duplicate_of is not None:
        first = journal.get(job.duplicate_of)
        return journal.current_run(first) if first is not None else None
    return None


def photo_json(cfg: Config, journal: JournalBrowser, job: Job, sub: Submitted | None) -> dict[str, Any]:
    run = result_run(journal, job)
    result = None
    if run is not None and run.output is not None:
        result = {"url": f"{BASE}/photos/{job.id}/result", "name": run.output.name, "run": run.id}
    return {
        "id": job.id,
        "name": job.rel.as_posix(),
        "inbox": inbox_number(cfg, job.inbox),
        "batch": sub.batch if sub is not None else None,
        "state": str(job.state),
        "final": job.state not in ACTIVE,
        "settings": {str(k): str(v) for k, v in job.settings.items()} if not job.is_redo else {},
        "created": job.created,
        "finished": job.finished,
        "faces": (run or job).faces,
        "error": job.error,
        "notes": list((run or job).notes),
        "result": result,
        "report": f"{BASE}/photos/{job.id}/report",
        "events": f"{BASE}/photos/{job.id}/events",
    }


def report_json(journal: JournalBrowser, views_root: Path, job: Job) -> dict[str, Any]:
    """The photo's faces as its worker found them (each with its box in the photo's pixels, the
    detector's score, whether it was restored and why not), the settings it was restored with and
    the time each stage took. ``faces`` is None when its previews are no longer kept
    (dashboard.views_mb keeps the newest photos')."""
    run = result_run(journal, job) or job
    found = views.photo_views(views_root, run.id)
    faces = None
    if found is not None:
        sx = found.source_width / found.width if found.width and found.source_width else 1.0
        sy = found.source_height / found.height if found.height and found.source_height else 1.0
        faces = [
            {
                "index": f.index,
                "box": [
                    round(f.box[0] * sx),
                    round(f.box[1] * sy),
                    round(f.box[2] * sx),
                    round(f.box[3] * sy),
                ],
                "score": f.score,
                "restored": f.restored,
                "reason": f.reason,
            }
            for f in found.faces
        ]
    used = SettingsUsed.from_json(run.used)
    return {
        "id": job.id,
        "run": run.id,
        "state": str(run.state),
        "faces_restored": run.faces,
        "faces": faces,
        "width": found.source_width if found is not None else None,
        "height": found.source_height if found is not None else None,
        "used": None
        if used is None
        else {
            "restore.model": used.model,
            "restore.strength": used.strength,
            "restore.faces": used.faces,
            "restore.upscale": used.upscale,
            "output.format": used.format,
        },
        "timings": dict(run.timings),
        "notes": list(run.notes),
        "error": run.error,
    }
