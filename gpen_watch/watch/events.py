"""What the watcher passes around: the changes watchdog reports (turned into path changes for the
settle thread, without any I/O on watchdog's threads) and the arrivals it reports once a file has
settled."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from watchdog.events import FileClosedNoWriteEvent, FileOpenedEvent, FileSystemEvent, FileSystemEventHandler

from gpen_watch.base.strenum import StrEnum
from gpen_watch.config import InboxConfig


class Change(StrEnum):
    """What a watchdog event means for the settle thread."""

    PATH = "path"  # a file appeared or changed: watch it settle
    DIR = "dir"  # a folder appeared (moved or copied in): its files arrive too
    GONE = "gone"  # deleted, or moved away or renamed: the old name is gone


@dataclass(frozen=True)
class PathChange:
    """A path the settle thread looks at again, and what happened to it."""

    change: Change
    path: Path


class InboxPresence(StrEnum):
    """Whether an inbox's folder is there to be watched."""

    WATCHED = "watched"
    AWAY = "away"  # its drive or share is unplugged or unmounted: its files wait, none is gone


@dataclass(frozen=True)
class InboxState:
    """How one inbox is watched now, for the status, the dashboard and the job side.

    ``reason``: "" while watched, else why it is away (one sentence, from platform.presence).
    ``mode``: "events" (the OS reports changes) or "polling" (the watcher lists the folder itself),
    ``mode_reason`` says why polling ("network share (cifs)", the inotify watch limit, the
    setting). ``waiting_download``: cloud placeholders seen there now, never read.
    ``next_rescan_s``: seconds until its next full rescan.
    """

    root: Path
    presence: InboxPresence
    reason: str
    mode: str
    mode_reason: str
    waiting_download: int
    next_rescan_s: float


@dataclass(frozen=True)
class Arrival:
    """A file that finished arriving in an inbox.

    ``supported`` is False for files named as something that is never a photo (a document, an
    archive...): they are still reported, to be recorded and set aside as unsupported, never
    silently dropped. Every other file is a candidate whatever its extension: the content decides.
    """

    path: Path
    inbox: InboxConfig
    rel: Path
    size: int
    mtime: float
    supported: bool = True


class Handler(FileSystemEventHandler):
    """Turns watchdog events into path changes for the settle thread (no I/O here)."""

    def __init__(self, put: Callable[[PathChange], None]) -> None:
        self._put = put

    def dispatch(self, event: FileSystemEvent) -> None:
        # Opens and read-only closes are our own hashing and the workers' reads: not changes.
        if isinstance(event, (FileOpenedEvent, FileClosedNoWriteEvent)):
            return
        src = Path(os.fsdecode(event.src_path))
        if event.event_type == "moved":
            dest = Path(os.fsdecode(event.dest_path))
            self._put(PathChange(Change.GONE, src))  # the old name is gone...
            self._put(
                PathChange(Change.DIR if event.is_directory else Change.PATH, dest)
            )  # ...the new one arrives
        elif event.event_type == "deleted":
            self._put(PathChange(Change.GONE, src))
        elif event.is_directory:
            if event.event_type == "created":
                self._put(PathChange(Change.DIR, src))
        else:
            self._put(PathChange(Change.PATH, src))
