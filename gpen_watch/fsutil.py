"""Small file-system helpers and constants shared by the stages that read users' files and write
their own atomically: one home for each, so the watcher, the journal, the loader and the outbox
cannot drift apart."""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

# Opening a file someone dropped: never follow a symlink swapped in after an lstat, never block (a
# FIFO would wait for a writer), binary on Windows. Callers still check what they opened (fstat).
O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
READ_NOFOLLOW_FLAGS = os.O_RDONLY | O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)

# errno values meaning a folder refuses writes as a whole for now (full, over quota, read-only, not
# ours to write, gone, failing), not that one file is wrong: these can clear, so work waits and is
# retried instead of failing. EDQUOT does not exist on Windows.
FOLDER_REFUSES = frozenset(
    {errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO, errno.ENOENT}
    | ({errno.EDQUOT} if hasattr(errno, "EDQUOT") else set())
)


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
    with contextlib.suppress(OSError):
        os.unlink(path)
