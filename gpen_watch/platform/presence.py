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
from dataclasses import dataclass
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


def away_reason(folder: Path, last: Anchor | None) -> str | None:
    """None when ``folder`` is present (and still on ``last``'s mount); else one sentence why not.

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


# The anchors this process knows, by folder: the service records each inbox's and outbox's here
# (service.presence_watch) so that code far from it (moving an original) can tell a folder that is
# away from a file that was deleted, without being handed the service's state.
_known: dict[Path, Anchor] = {}


def remember(a: Anchor) -> None:
    """Keep ``a`` as the last place its folder was seen."""
    _known[a.folder] = a


def last_anchor(folder: Path) -> Anchor | None:
    return _known.get(Path(os.path.abspath(folder)))


def away(folder: Path) -> str | None:
    """``away_reason`` against the anchor remembered for ``folder``; None when it is present, or
    when no anchor is remembered: a folder never seen here is not away (it may be yet to make)."""
    last = last_anchor(folder)
    return None if last is None else away_reason(folder, last)


def forget_all() -> None:
    """Drop every remembered anchor (a new configuration, tests)."""
    _known.clear()
