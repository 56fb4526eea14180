"""Restoring a done photo again with other settings: which original it starts from, which
settings it may change, and what they are for its inbox.

A redo is a job of its own (``Journal.add_redo``) that reads the original where the first run left
it (archived, or kept in the inbox), restores it with the redo's settings over its inbox's, and
replaces the first result at the same outbox name in one rename (``commit.place_output``): there
is never a second file beside it, nor a moment with neither. Its original stays where it is.

A redo asked "beside" (``BESIDE``: the photo page's "Redo with another model") replaces nothing:
its result goes under a name of its own beside the first (``beside_name``), never over a file,
and the two are compared until the user keeps one (``outbox.keep``).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpen_watch.base.errors import ConfigError, GpenWatchError
from gpen_watch.catalog.registry import model_label
from gpen_watch.config import Config, inbox_config, set_value, validate
from gpen_watch.journal.journal import Job, hash_file
from gpen_watch.journal.records import describe_settings
from gpen_watch.journal.states import SUCCEEDED, JobState, Original
from gpen_watch.modelstore import needs, terms
from gpen_watch.outbox import naming
from gpen_watch.platform import program
from gpen_watch.restore.api import face_ids_refusal

# The settings a redo may change (the options `gpen-watch redo` takes), and "face_ids": the faces
# to restore, by the numbers the photo's page shows (empty: none, the original's own pixels).
REDO_SETTINGS = (
    "restore.strength",
    "restore.model",
    "restore.fidelity",
    "restore.faces",
    "restore.upscale",
    "output.format",
)
FACE_IDS = "face_ids"
# A redo whose result goes beside the current one, to be compared (true), not over it.
BESIDE = "beside"


class RedoRefused(GpenWatchError):
    """This photo cannot be restored again now; the message says why and what to do."""


def original_of(job: Job, *, read: bool = True) -> Path:
    """The original a redo of the done ``job`` restores, checked to be the very file it restored
    (``read=False``: by its size alone, for a bulk redo that must not read hundreds of files)."""
    name = job.rel.name
    if job.state == JobState.DUPLICATE and job.output is None:
        raise RedoRefused(
            f"{name}: this drop was the same photo under the same name; its result is its first run's, "
            f"run {job.duplicate_of}: redo that one"
        )
    if job.state not in SUCCEEDED:
        raise RedoRefused(f"{name}: only a restored photo can be redone (this one is {job.state})")
    if job.original == Original.DELETED:
        raise RedoRefused(
            f"{name}: its original was deleted after it was restored (output.originals = delete), "
            "so nothing can be redone; drop the original into an inbox again to restore it anew"
        )
    if job.original == Original.ARCHIVED and job.original_path is not None:
        path = job.original_path
    elif job.original in (Original.KEPT, Original.LEFT):
        path = job.original_path or job.source
    else:
        raise RedoRefused(f"{name}: its original is not kept anywhere gpen-watch knows ({job.original})")
    if not path.is_file():
        raise RedoRefused(f"{name}: its original is no longer at {path} (moved or deleted); nothing to redo")
    if os.path.getsize(path) != job.size or (read and hash_file(path) != job.sha256):
        raise RedoRefused(f"{name}: {path} has changed since it was restored; drop it into an inbox instead")
    return path


def check_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """The redo's settings, refused with the same sentence `--set` gives for a bad value."""
    for key in settings:
        if key not in (*REDO_SETTINGS, FACE_IDS, BESIDE):
            raise ConfigError(f"{key}: a redo changes only {', '.join(REDO_SETTINGS)} and the faces")
    if settings.get(BESIDE) not in (None, True):
        raise ConfigError(f"{BESIDE}: true (the result goes beside the current one), or left out")
    ids = settings.get(FACE_IDS)
    if ids is not None and (
        not isinstance(ids, list) or not all(isinstance(i, int) and 0 <= i < 10_000 for i in ids)
    ):
        raise ConfigError("face ids must be face numbers as the photo's page shows them (0, 1, 2 ...)")
    return settings


def beside(job: Job) -> bool:
    """Whether ``job`` is a redo whose result goes beside the current one (``BESIDE``)."""
    return job.is_redo and job.settings.get(BESIDE) is True


def beside_name(first: Path, job: Job) -> str:
    """The name a beside redo's result takes next to ``first`` (the photo's result): its model,
    "portrait (GFPGAN-v1.4).jpg", or its run, "portrait (run 12).jpg", where the model is the
    same; a name taken already gets the next free one when it is placed."""
    model = job.settings.get("restore.model")
    label = model_label(str(model)) if model else f"run {job.id}"
    return naming.truncate_name(f"{first.stem} ({label}){first.suffix}")


def face_ids(job: Job) -> tuple[int, ...] | None:
    """The faces a redo restores, as picked (None: every face its settings choose)."""
    ids = job.settings.get(FACE_IDS) if job.is_redo else None
    return None if ids is None else tuple(int(i) for i in ids)


def settings_label(job: Job) -> str:
    """Whose settings a worker restores ``job`` with, for its messages (FileJob.settings_label):
    a redo's own; "" for the photo's inbox's."""
    return f"this redo's settings ({describe_settings(job.settings)})" if job.is_redo else ""


def check_face_ids(job: Job, ids: Sequence[int], found: int | None) -> str:
    """Refuse face numbers the photo of the done ``job`` does not have (``found``: how many faces
    its detector found, from its views; None when those are not kept). The note for the reply
    when they cannot be checked now, "" when they were."""
    if found is not None:
        refusal = face_ids_refusal(job.rel.name, found, ids)
        if refusal:
            raise RedoRefused(f"{refusal}; nothing was queued")
        return ""
    if not ids:
        return ""  # no face picked: the original's own pixels, whatever faces it has
    return (
        f"{job.rel.name}: which faces it has is not known here (its views are no longer kept, see "
        "dashboard.views_mb), so the face numbers were not checked; if it has no such face, the "
        "redo fails and its result stays as it was"
    )


def check_models(job: Job, own: Config, settings: dict[str, Any]) -> None:
    """Refuse a redo whose settings (``own``: its inbox's with the redo's on top) need a model file
    that is not here, naming every one: queued, it would fail on a worker with the first of them."""
    found = needs.check(own.restore, deep=False)
    if not found.missing:
        return
    parts = []
    specs = found.missing_specs()
    if specs:
        files = " and ".join(f"{s.filename} ({s.name}, {s.size_text})" for s in specs)
        one = len(specs) == 1
        waiting = found.awaiting
        get = (
            f"`{terms.accept_command(waiting)}` accepts the terms {'it is' if one else 'they are'} downloaded "
            f"under, or `{program.command('models paid-work')}` uses models for paid work"
            if waiting
            else f"`{program.command('models fetch ' + ' '.join(s.name for s in specs))}` gets {'it' if one else 'them'}"
        )
        parts.append(
            f"{files}, which {'is' if one else 'are'} in none of {', '.join(map(str, found.folders))} ({get})"
        )
    parts += [
        f"{f.need.custom} ({needs.custom_setting(f.need)}), which does not exist"
        for f in found.missing
        if f.need.spec is None
    ]
    raise RedoRefused(
        f"{job.rel.name}: this redo's settings ({describe_settings(settings)}) need {'; and '.join(parts)}; "
        "nothing was queued"
    )


def redo_config(cfg: Config, job: Job, settings: dict[str, Any]) -> Config:
    """The settings of ``job``'s inbox with the redo's on top, checked like the TOML file's."""
    own = copy.deepcopy(inbox_config(cfg, naming.find_inbox(cfg, job.inbox)))
    for key, value in check_settings(settings).items():
        if key not in (FACE_IDS, BESIDE):
            set_value(own, key, value)
    return validate(own)
