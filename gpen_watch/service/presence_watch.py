"""The service's inboxes and outboxes on drives and shares that can go away, and come back.

An unplugged drive or an unmounted share leaves either nothing or a bare mount point (an empty
folder of the disk under it). Neither is an empty inbox whose photos were deleted, nor an outbox to
write into: while a folder is away its photos wait, queued, and nothing is claimed for it; when it
is back, work resumes by itself. ``platform.presence`` tells the two apart through each folder's
anchor (its mount point when it was last there); the anchors are kept in the service's state
folder, so that a folder already away when the service starts is still recognised.

Only the service loop's thread calls ``check``; the outbox asks ``away`` (handed to it as a
``platform.presence.Away``) before it moves an original or makes a folder.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from gpen_watch.config import Config
from gpen_watch.outbox import naming
from gpen_watch.platform import paths, presence

log = logging.getLogger(__name__)

STATE_FILE = "presence.json"
# How often the loop looks again while nothing asks (claims look at once, every time).
CHECK_S = 2.0


@dataclass(frozen=True)
class Change:
    folder: Path
    role: str  # "inbox" or "outbox"
    reason: str | None  # None: back


def state_file() -> Path:
    return paths.state_dir() / STATE_FILE


def load_remembered(path: Path | None = None) -> presence.Anchors:
    """The mount point each folder was on when last seen, as earlier runs left them."""
    path = path or state_file()
    anchors = presence.Anchors()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        found = {Path(k): Path(v) for k, v in data.get("mount_points", {}).items()}
    except (OSError, ValueError, AttributeError):
        return anchors
    for folder, mount_point in found.items():
        anchors.remember(presence.Anchor(folder, mount_point, -1))
    return anchors


def away_at_start(anchors: presence.Anchors, folder: Path) -> str | None:
    """Why ``folder`` is away by what earlier runs remembered (its drive or share is not mounted
    where it was); None when nothing says so, as for a new folder that is simply to be made."""
    a = anchors.last(folder)
    if a is None or a.mount_point == Path(a.mount_point.anchor or "/"):
        return None
    if os.path.ismount(a.mount_point):
        return None
    return anchors.away(folder)


def _save(path: Path, anchors: Iterable[presence.Anchor]) -> None:
    data = {"mount_points": {os.fspath(a.folder): os.fspath(a.mount_point) for a in anchors}}
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("%s: could not remember where the folders are mounted: %s", path, exc)


def watched_folders(cfg: Config) -> dict[Path, str]:
    """Each inbox and each outbox (absolute), with its role."""
    found = {Path(os.path.abspath(i.path)): "inbox" for i in cfg.watch.inboxes}
    for inbox in cfg.watch.inboxes:
        found.setdefault(naming.outbox_root(cfg, inbox), "outbox")
    found.setdefault(Path(os.path.abspath(cfg.watch.outbox)), "outbox")
    return found


class PresenceWatch:
    """Which of the service's folders are away now, and the sentence that says why."""

    def __init__(
        self, cfg: Config, path: Path | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.cfg = cfg
        self.path = path or state_file()
        self._clock = clock
        self.folders = watched_folders(cfg)
        self.anchors = load_remembered(self.path)
        # The folders away at the last check, with why: what the log and the status said.
        self.away_at_check: dict[Path, str] = {}
        self._saved: dict[Path, Path] = {}
        self._next = 0.0

    def configure(self, cfg: Config) -> None:
        """New settings: the folders they name (``service.reload``)."""
        self.cfg, self.folders = cfg, watched_folders(cfg)
        self.away_at_check = {f: r for f, r in self.away_at_check.items() if f in self.folders}
        self._next = 0.0

    def check(self, *, now: bool = False) -> list[Change]:
        """Look at every folder (every ``CHECK_S``, or at once with ``now``); what changed."""
        if not now and self._clock() < self._next:
            return []
        self._next = self._clock() + CHECK_S
        changes: list[Change] = []
        for folder, role in self.folders.items():
            reason = self.anchors.away(folder)
            if reason is None:
                a = presence.anchor(folder)
                if a is not None:
                    self.anchors.remember(a)
            if (reason is None) == (folder in self.away_at_check):
                changes.append(Change(folder, role, reason))
                self._say(folder, role, reason)
            if reason is None:
                self.away_at_check.pop(folder, None)
            else:
                self.away_at_check[folder] = reason
        self._keep()
        return changes

    def _say(self, folder: Path, role: str, reason: str | None) -> None:
        if reason is None:
            log.info("%s %s is back: work resumes", role, folder)
        elif role == "inbox":
            log.warning("inbox %s is away: %s; its photos wait in the queue until it is back", folder, reason)
        else:
            log.error("outbox %s is away: %s; photos wait in their inboxes until it is back", folder, reason)

    def _keep(self) -> None:
        mounts = {}
        for folder in self.folders:
            a = self.anchors.last(folder)
            if a is not None:
                mounts[folder] = a.mount_point
        if mounts != self._saved:
            self._saved = mounts
            anchors = [a for f in self.folders if (a := self.anchors.last(f)) is not None]
            _save(self.path, anchors)

    def away(self, folder: Path) -> str | None:
        """Why ``folder`` (an inbox, an outbox, any folder under them) is away, looked at now; None
        when it is there or was never seen (``platform.presence.Away``)."""
        return self.anchors.away(Path(os.path.abspath(folder)))

    def inbox_away(self, inbox: os.PathLike[str] | str) -> str | None:
        """Why ``inbox`` is away, looked at now; None when it is there."""
        return self.away(Path(inbox))

    def outbox_away(self, root: os.PathLike[str] | str) -> str | None:
        """Why the outbox ``root`` is away, looked at now; None when it is there."""
        return self.away(Path(root))

    def away_inboxes(self) -> set[str]:
        """The configured inboxes that are away now, as the journal may name them."""
        found: set[str] = set()
        for inbox in self.cfg.watch.inboxes:
            if self.inbox_away(inbox.path) is not None:
                found |= {os.fspath(inbox.path), os.path.abspath(inbox.path)}
        return found

    def away_outboxes(self) -> dict[Path, str]:
        """The outboxes that are away now, with why (looked at now)."""
        found = {}
        for folder, role in self.folders.items():
            if role == "outbox" and (reason := self.outbox_away(folder)) is not None:
                found[folder] = reason
        return found

    def outbox_problem(self, waiting: int) -> str | None:
        """The status's sentence for the outboxes away at the last check (``waiting``: queued)."""
        parts = [
            f"outbox {folder} is away: {reason}; {waiting} photo(s) wait"
            for folder, reason in self.away_at_check.items()
            if self.folders.get(folder) == "outbox"
        ]
        return "; ".join(parts) or None
