"""Which observer watches each inbox, OS events or polling, and why.

OS events (inotify, FSEvents, ReadDirectoryChangesW) see only the changes this machine makes: a
photo another computer copies onto an SMB or NFS share, or one a FUSE process (sshfs, rclone)
serves, raises none here. With ``watch.polling = "auto"`` such inboxes are polled by themselves;
an inbox whose OS watch cannot be made (the inotify watch limit) is polled too. Either way the
periodic full rescan still runs, as Syncthing does: events, plus a rescan on a randomised interval.

The two observers are shared by all inboxes; ``Observers`` knows which inbox is on which.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from watchdog.events import FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver, ObservedWatch
from watchdog.observers.polling import PollingObserverVFS

from gpen_watch.platform.mounts import Volume

log = logging.getLogger(__name__)

EVENTS = "events"
POLLING = "polling"

RAISE_LIMIT = (
    "raise it with `sudo sysctl fs.inotify.max_user_watches=524288`, and for good with a line "
    "`fs.inotify.max_user_watches=524288` in a file under /etc/sysctl.d/"
)


@dataclass(frozen=True)
class Mode:
    """How one inbox is watched: ``kind`` EVENTS or POLLING, ``reason`` why polling ("" for events)."""

    kind: str
    reason: str = ""


def choose(setting: str, volume: Volume | None) -> Mode:
    """The mode ``watch.polling`` (``setting``) asks for an inbox on ``volume`` (None: unknown)."""
    if setting == "always":
        return Mode(POLLING, "watch.polling = always")
    if setting == "never" or volume is None or not volume.network:
        return Mode(EVENTS)
    if volume.fs_type.lower().startswith("fuse"):
        return Mode(POLLING, f"FUSE filesystem ({volume.fs_type})")
    return Mode(POLLING, f"network share ({volume.fs_type})")


def watch_failure(exc: OSError) -> str:
    """Why an OS watch could not be made, as the status shows it beside "polling"."""
    if exc.errno == errno.ENOSPC:
        return f"the inotify watch limit is reached (fs.inotify.max_user_watches); {RAISE_LIMIT}"
    if exc.errno == errno.EMFILE:
        return (
            "too many inotify instances or open files (fs.inotify.max_user_instances, "
            f"fs.inotify.max_user_watches); {RAISE_LIMIT}"
        )
    return f"OS events could not be set up ({exc.strerror or exc})"


class Observers:
    """The OS's observer and a polling one, started once; inboxes are put on either."""

    def __init__(
        self,
        handler: FileSystemEventHandler,
        poll_interval: float,
        native: Callable[[], BaseObserver] | None = None,
    ) -> None:
        self._handler = handler
        self.poll_interval = poll_interval
        self._native = (native or Observer)()
        # lstat: never follow a symlinked folder (loops, escaping the inbox).
        self._polling = PollingObserverVFS(stat=os.lstat, listdir=os.scandir, polling_interval=poll_interval)
        self._watches: dict[Path, tuple[BaseObserver, ObservedWatch]] = {}
        for obs in (self._native, self._polling):
            obs.daemon = True

    def start(self) -> None:
        # Started before anything is scheduled, so that a watch that cannot be made raises from
        # schedule() for that inbox alone rather than from start() for all of them.
        self._native.start()
        self._polling.start()

    def stop(self) -> None:
        self._native.stop()
        self._polling.stop()

    def join(self, timeout: float) -> None:
        self._native.join(timeout)
        self._polling.join(timeout)

    def watch(self, root: Path, recursive: bool, wanted: Mode) -> Mode:
        """Watch ``root`` the ``wanted`` way; the mode in effect (polling when events fail)."""
        self.unwatch(root)
        if wanted.kind == EVENTS:
            try:
                self._schedule(self._native, root, recursive)
                return wanted
            except OSError as exc:
                mode = Mode(POLLING, watch_failure(exc))
                log.warning(
                    "inbox %s: cannot be watched with OS events: %s; polling it every %g s instead",
                    root,
                    mode.reason,
                    self.poll_interval,
                )
        else:
            mode = wanted
            log.info("inbox %s: polling it every %g s (%s)", root, self.poll_interval, mode.reason)
        try:
            self._schedule(self._polling, root, recursive)
        except OSError as exc:
            # The full rescan still finds every file, only later.
            log.warning("inbox %s: cannot be polled (%s); relying on its full rescans", root, exc)
        return mode

    def unwatch(self, root: Path) -> None:
        """Stop watching ``root`` (its old watch died with an unmount, or it is watched anew)."""
        entry = self._watches.pop(root, None)
        if entry is not None:
            # KeyError: watchdog dropped it already (its emitter stopped when the folder went).
            with contextlib.suppress(KeyError, OSError, RuntimeError):
                entry[0].unschedule(entry[1])

    def _schedule(self, observer: BaseObserver, root: Path, recursive: bool) -> Any:
        self._watches[root] = (observer, observer.schedule(self._handler, str(root), recursive=recursive))
