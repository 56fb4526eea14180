"""The service's inboxes and outbox: checked before it starts, made when missing.

A path that names a file, or sits under one, is the user's mistake (`--inbox photo.jpg`): it gets a
sentence naming the path and the setting, not mkdir's FileExistsError.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from gpen_watch.base.errors import ConfigError, OutputError
from gpen_watch.config import Config
from gpen_watch.service.presence_watch import away_at_start, load_remembered

log = logging.getLogger(__name__)


def service_folders(cfg: Config) -> list[tuple[Path, str]]:
    """Each folder the service needs at start, with what it is for (as the user set it)."""
    found = [(inbox.path, "inbox (--inbox, watch.inboxes)") for inbox in cfg.watch.inboxes]
    return [*found, (cfg.watch.outbox, "outbox (--outbox, watch.outbox)")]


def check_service_folders(cfg: Config) -> None:
    """Raise ConfigError or OutputError, saying what to change, for a folder that cannot be used."""
    outbox = Path(os.path.abspath(cfg.watch.outbox))
    for inbox in cfg.watch.inboxes:
        if Path(os.path.abspath(inbox.path)) == outbox:
            raise ConfigError(
                f"{inbox.path} is both an inbox and the outbox: the service never takes its own "
                "results, so nothing there would be restored; choose another --outbox"
            )
    anchors = load_remembered()
    for folder, role in service_folders(cfg):
        if away_at_start(anchors, Path(os.path.abspath(folder))) is None:
            _check_folder(folder, role)


def prepare_service_folders(cfg: Config) -> None:
    """Check the folders, then make the missing ones."""
    check_service_folders(cfg)
    anchors = load_remembered()
    for folder, role in service_folders(cfg):
        if (why := away_at_start(anchors, Path(os.path.abspath(folder)))) is not None:
            # Making it would make it on the disk under the mount point: it waits for its drive.
            log.warning(
                "%s: the %s is away: %s; it is used again once its drive or share is mounted "
                "(to use a folder on this disk instead, give another path)",
                folder,
                role,
                why,
            )
            continue
        if folder.is_dir():
            continue
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f"{folder}: cannot create the {role}: {exc.strerror or exc}") from exc
        log.info("created %s", folder)


def _check_folder(folder: Path, role: str) -> None:
    if folder.is_dir():
        return
    if folder.exists():
        raise ConfigError(f"{folder}: the {role} is a file, not a folder; give a folder")
    existing = folder.parent
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"{folder}: cannot create the {role}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputError(f"{folder}: cannot create the {role}: {existing} is not writable")
