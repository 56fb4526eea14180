"""Deciding when a file has finished arriving.

A copy in progress keeps changing size or mtime; once both have stayed the same for
``settle_seconds`` the file is taken - provided it can be opened (Windows holds a file locked while
Explorer copies it). An empty file waits longer (``EMPTY_FILE_GRACE_SECONDS``): copiers create the
file first and may stall before the first byte. ``SettleTracker`` is the pure part: fed
observations and a clock, it says which paths are due for a final check, so it is tested without
sleeping.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gpen_watch.base.fsutil import READ_NOFOLLOW_FLAGS

# How long a file must stay empty (0 bytes) and unchanged before it is taken (and, being empty,
# set aside as unsupported). A copy tool creates its file before it writes anything: Explorer and
# Finder copying a big file, a copy from a slow network share or a sleeping laptop's mount, may
# stall for seconds before the first byte, and the normal settle time (1 s) would take the empty
# file meanwhile. Once it has any content, the normal settle time applies again. A constant, not a
# setting: nothing is gained by taking an empty file sooner, and the cost of waiting is only that
# a truly empty file is reported half a minute later.
EMPTY_FILE_GRACE_SECONDS = 30.0


@dataclass
class _Seen:
    size: int
    mtime: float
    since: float  # clock time when this (size, mtime) was first seen


class SettleTracker:
    """Tracks files that are still arriving.

    Use: ``observe`` on every event or scan hit; when ``due()`` lists a path, stat it again and
    call ``confirm``: True means unchanged for the whole settle time (the path is then dropped
    from the tracker and should be taken); False means it changed and the wait starts over.
    ``next_due()`` tells a loop how long it may sleep. An empty file's settle time is
    ``max(settle_seconds, empty_grace_seconds)``.
    """

    def __init__(
        self,
        settle_seconds: float,
        clock: Callable[[], float] = time.monotonic,
        empty_grace_seconds: float = EMPTY_FILE_GRACE_SECONDS,
    ) -> None:
        if settle_seconds < 0 or empty_grace_seconds < 0:
            raise ValueError("settle_seconds and empty_grace_seconds must not be negative")
        self.settle_seconds = settle_seconds
        self.empty_settle_seconds = max(settle_seconds, empty_grace_seconds)
        self._clock = clock
        self._seen: dict[Path, _Seen] = {}

    def _wait(self, seen: _Seen) -> float:
        return self.settle_seconds if seen.size else self.empty_settle_seconds

    def observe(self, path: Path, size: int, mtime: float) -> None:
        """Record the current size and mtime; a change restarts the quiet period."""
        seen = self._seen.get(path)
        if seen is None or seen.size != size or seen.mtime != mtime:
            self._seen[path] = _Seen(size, mtime, self._clock())

    def postpone(self, path: Path) -> None:
        """Start the quiet period over without a change (e.g. the file is still locked)."""
        seen = self._seen.get(path)
        if seen is not None:
            seen.since = self._clock()

    def forget(self, path: Path) -> None:
        self._seen.pop(path, None)

    def forget_under(self, folder: Path) -> list[Path]:
        """Drop every tracked path inside ``folder`` (it was deleted or moved away)."""
        prefix = str(folder) + os.sep
        gone = [p for p in self._seen if p == folder or str(p).startswith(prefix)]
        for p in gone:
            del self._seen[p]
        return gone

    def due(self) -> list[Path]:
        """Paths whose last change is at least their settle time old: stat them and ``confirm``."""
        now = self._clock()
        return [p for p, s in self._seen.items() if s.since + self._wait(s) <= now]

    def confirm(self, path: Path, size: int, mtime: float) -> bool:
        """True (and the path is dropped) if it is unchanged and its quiet period is over."""
        seen = self._seen.get(path)
        if seen is None:
            return False
        if seen.size != size or seen.mtime != mtime:
            self._seen[path] = _Seen(size, mtime, self._clock())
            return False
        if self._clock() - seen.since < self._wait(seen):
            return False
        del self._seen[path]
        return True

    def next_due(self) -> float | None:
        """Clock time at which the earliest tracked path becomes due, or None when idle."""
        if not self._seen:
            return None
        return min(s.since + self._wait(s) for s in self._seen.values())

    def __contains__(self, path: object) -> bool:
        return path in self._seen

    def __len__(self) -> int:
        return len(self._seen)


# Windows: another process holds the file (a copy in progress).
_SHARING_VIOLATIONS = (32, 33)


def open_check(path: os.PathLike[str] | str) -> Literal["ok", "locked", "unreadable", "gone"]:
    """Try to open the file for reading, the last test before a settled file is taken.

    "locked": held by a writer (Windows sharing violation), try again later. "unreadable": it can
    never be read as things stand (permissions); it is taken anyway so the worker fails it with the
    reason and it is set aside, not left waiting unseen. Opens without following symlinks or
    blocking, and closes at once.
    """
    try:
        fd = os.open(path, READ_NOFOLLOW_FLAGS)
    except FileNotFoundError:
        return "gone"
    except PermissionError as exc:
        if getattr(exc, "winerror", None) in _SHARING_VIOLATIONS:
            return "locked"
        return "unreadable"
    except OSError as exc:
        if exc.errno in (errno.EBUSY, errno.ETXTBSY, errno.EAGAIN):
            return "locked"
        return "unreadable"
    os.close(fd)
    return "ok"
