"""A photo sent through the HTTP API: the settings it may bring, checked as ``--set`` checks them,
and the temp name it is written under in its inbox until it is whole.

The settings are a redo's (model, strength, which faces, upscale, format: ``redo.REDO_SETTINGS``),
on top of its inbox's; the model is named, never a file on the service's machine. The temp name
starts with a dot and ends in ``.part``: the watcher leaves both alone (``watch.filters``), so a
photo is taken only once it is renamed in, whole.
"""

from __future__ import annotations

import copy
import re
import secrets
from collections.abc import Mapping
from pathlib import Path

from gpen_watch.base.errors import ConfigError
from gpen_watch.catalog.registry import FACE_MODEL_NAMES
from gpen_watch.config import Config, InboxConfig, inbox_config, set_value, validate
from gpen_watch.journal.records import describe_settings
from gpen_watch.modelstore import needs, terms
from gpen_watch.outbox.redo import REDO_SETTINGS
from gpen_watch.platform import program

SENT_SETTINGS = REDO_SETTINGS
UPLOAD_PREFIX = ".gpen-upload-"
_UPLOAD_RE = re.compile(r"^\.gpen-upload-[0-9a-f]{32}\.part$")


def upload_name() -> str:
    """A fresh temp name for a photo being received (hidden and partial: never an arrival)."""
    return f"{UPLOAD_PREFIX}{secrets.token_hex(16)}.part"


def is_upload_name(name: str) -> bool:
    return _UPLOAD_RE.match(name) is not None


def check(cfg: Config, inbox: InboxConfig, settings: Mapping[str, str]) -> Config:
    """The settings a photo sent with ``settings`` into ``inbox`` gets; ConfigError with the
    sentence ``--set`` gives for a bad value, or naming what may be set."""
    for key in settings:
        if key not in SENT_SETTINGS:
            raise ConfigError(f"{key}: a photo sent through the API sets only {', '.join(SENT_SETTINGS)}")
    model = settings.get("restore.model")
    if model is not None and model not in FACE_MODEL_NAMES:
        raise ConfigError(
            f"restore.model: {model!r} is not a model gpen-watch knows; name one of {', '.join(FACE_MODEL_NAMES)} "
            "(a model file on the service's machine is set in its own settings, not by a request)"
        )
    own = copy.deepcopy(inbox_config(cfg, inbox))
    for key, value in settings.items():
        set_value(own, key, value)
    return validate(own)


def missing_models(own: Config, settings: Mapping[str, str]) -> str | None:
    """Why a photo with these settings would wait for model files that are not here, or None."""
    found = needs.check(own.restore, deep=False)
    if not found.missing:
        return None
    specs = found.missing_specs()
    files = ", ".join(f"{s.filename} ({s.name}, {s.size_text})" for s in specs) or ", ".join(
        str(f.need.custom) for f in found.missing
    )
    if found.awaiting:
        # Downloaded only once their terms are accepted there (modelstore.terms).
        fetch = f"; `{terms.accept_command(found.awaiting)}` on the service's machine accepts their terms"
    elif specs:
        fetch = f"; `{program.command('models fetch ' + ' '.join(s.name for s in specs))}` on the service's machine gets them"
    else:
        fetch = ""
    return f"its settings ({describe_settings(dict(settings))}) need {files}, which are not on the service's machine{fetch}"


def upload_path(root: Path) -> Path:
    """Where a photo for the inbox ``root`` is received: a temp name in the inbox itself, on its
    file system, so that renaming it in is one step."""
    return root / upload_name()
