"""Whether a folder that lives on a drive or a share is there.

An inbox or outbox on a USB drive or a mounted share can go away while the service runs. What is
left behind is either nothing (the folder is missing) or, worse, the bare mount point: an empty
folder of the parent file system that looks like an empty inbox and would take an outbox's writes.
An :class:`Anchor` remembers where the folder was when it was last there, so that a bare mount
point is recognised as "away" rather than as an empty folder.

Pure ``stat``/``os.path.ismount`` calls, which mean the same on Linux, macOS and Windows; nothing
here opens or lists a user's file beyond the mount point's own entries.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Anchor:
    """Where a folder was when it was last present."""

    folder: Path
    mount_point: Path  # the nearest ancestor-or-self that is a mount point
    device: int  # st_dev of the folder


def mount_point_of(folder: Path) -> Path:
    """The nearest ancestor-or-self of ``folder`` that is a mount point (the root at the latest)."""
    here = Path(os.path.abspath(folder))
    while True:
        if os.path.ismount(here):
            return here
        parent = here.parent
        if parent == here:
            return here
        here = parent


def anchor(folder: Path) -> Anchor | None:
    """Where ``folder`` is now; None when it is not there (missing, unreadable, not a folder)."""
    try:
        st = os.stat(folder)
    except (OSError, ValueError):
        return None
    if not stat.S_ISDIR(st.st_mode):
        return None
    return Anchor(Path(os.path.abspath(folder)), mount_point_of(folder), st.st_dev)


def _bare(mount_point: Path) -> str:
    try:
        with os.scandir(mount_point) as entries:
            empty = next(entries, None) is None
    except OSError:
        empty = False
    what = "an empty folder" if empty else "a plain folder"
    return f"the drive or share holding it is not mounted (its mount point {mount_point} is {what} now)"


def _unmounted(last: Anchor | None) -> bool:
    """Whether ``last``'s mount point (not the root) exists but is no longer a mount point."""
    if last is None or last.mount_point == Path(last.mount_point.anchor or "/"):
        return False
    return os.path.isdir(last.mount_point) and not os.path.ismount(last.mount_point)


def _still_mounted(last: Anchor | None) -> bool:
    """Whether the very file system ``last`` was on is still mounted where it was."""
    if last is None or last.device < 0:  # -1: remembered from an earlier run, its device unknown
        return False
    try:
        return os.stat(last.mount_point).st_dev == last.device and (
            os.path.ismount(last.mount_point) or last.mount_point == Path(last.mount_point.anchor or "/")
        )
    except OSError:
        return False


def away_reason(folder: Path, last: Anchor | None) -> str | None:
    """None when ``folder`` is present (and still on ``last``'s mount), or was deleted from a file
    system that is still there; else one sentence why not.

    A folder that exists but whose anchored mount point is no longer a mount point is away: it is
    the bare mount point (or a folder of the file system under it), never an empty inbox to scan or
    an outbox to write into.
    """
    try:
        st = os.stat(folder)
    except FileNotFoundError:
        if _unmounted(last):
            assert last is not None
            return _bare(last.mount_point)
        if _still_mounted(last):
            return None  # its drive is there: the folder itself was deleted, and is to be made again
        return "it is not there (unplugged drive or disconnected share?)"
    except NotADirectoryError:
        return "it is not there (unplugged drive or disconnected share?)"
    except (OSError, ValueError) as e:
        return f"it cannot be read: {getattr(e, 'strerror', None) or e}"
    if not stat.S_ISDIR(st.st_mode):
        return "it cannot be read: it is a file, not a folder"
    if _unmounted(last):
        assert last is not None
        return _bare(last.mount_point)
    return None


# Why a folder is away now, or None when it is there: what the outbox asks before it moves an
# original or makes a folder (``Anchors.away``; ``present`` where nothing can be away).
Away = Callable[[Path], "str | None"]


def present(folder: Path) -> str | None:
    """Never away: for callers that hold no anchors (tools, tests of other things)."""
    return None


@dataclass
class Anchors:
    """The anchors one service knows, by folder (``service.presence_watch`` keeps them): what
    lets code far from it (moving an original) tell a folder that is away from a deleted file."""

    known: dict[Path, Anchor] = field(default_factory=dict)

    def remember(self, a: Anchor) -> None:
        """Keep ``a`` as the last place its folder was seen."""
        self.known[a.folder] = a

    def last(self, folder: Path) -> Anchor | None:
        return self.known.get(Path(os.path.abspath(folder)))

    def away(self, folder: Path) -> str | None:
        """``away_reason`` against the anchor remembered for ``folder``; None when it is present,
        or when no anchor is known: a folder never seen is not away (it may be yet to make)."""
        last = self.last(folder)
        return None if last is None else away_reason(folder, last)
