"""Small file-system helpers shared by stages that write files atomically."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir_quietly(folder: Path) -> None:
    """Make a rename in ``folder`` durable where the platform allows it; never raises.

    Best effort on purpose: the file itself is already flushed, and folders cannot be opened for
    flushing on Windows (NTFS journals its metadata). ``outbox.durable.fsync_dir`` is the strict
    variant for the outbox's commit steps, where a failed flush must stop the commit.
    """
    if os.name != "posix":
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def remove_quietly(path: os.PathLike[str] | str) -> None:
    """Remove a file of ours (a temp, a copy being undone) if it is there; never raises."""
    try:
        os.unlink(path)
    except OSError:
        pass
