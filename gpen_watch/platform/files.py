"""File-system calls whose rules differ between operating systems: flushing a file or a folder to
disk, and giving a finished file its final name without ever replacing another.

Chosen when the module loads, like ``filelock``; the ``mypy --platform`` runs in ``.ci/run`` check
the Windows and macOS branches.
"""

from __future__ import annotations

import errno
import os
import sys

from gpen_watch.base.fsutil import O_NOFOLLOW, remove_quietly

if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    # Windows flushes a file only through a writable handle, and cannot open a folder to flush it
    # (NTFS journals its metadata). Its rename refuses to replace an existing name by itself.
    _FSYNC_FLAGS = os.O_RDWR | os.O_BINARY
    FOLDERS_FLUSH = False
    RENAME_REPLACES = False
else:
    _FSYNC_FLAGS = os.O_RDONLY
    FOLDERS_FLUSH = True
    RENAME_REPLACES = True


def fsync_file(path: os.PathLike[str] | str) -> None:
    """Flush a file's content to disk. Raises FileNotFoundError if it is not there."""
    fd = os.open(path, _FSYNC_FLAGS | O_NOFOLLOW)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: os.PathLike[str] | str) -> None:
    """Flush a folder's entries (a new or removed name) to disk, where the platform allows it.

    Strict, for the outbox's commit steps: a folder that cannot be opened is skipped, but a failed
    flush raises, except where the file system does not flush folders at all."""
    if not FOLDERS_FLUSH:
        return
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.EBADF, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


def fsync_dir_quietly(folder: os.PathLike[str] | str) -> None:
    """Make a rename in ``folder`` durable where the platform allows it; never raises.

    Best effort on purpose: the file itself is already flushed. ``fsync_dir`` is the strict
    variant for the outbox's commit steps, where a failed flush must stop the commit.
    """
    if not FOLDERS_FLUSH:
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


# errno values meaning "this file system (or policy) does not do hard links here" (FAT, exFAT,
# some network shares); Windows reports them as winerror 1 or 50.
_NO_LINKS = frozenset(
    {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.ENOSYS, errno.EINVAL}
)


def _no_links(exc: OSError) -> bool:
    return exc.errno in _NO_LINKS or getattr(exc, "winerror", None) in (1, 50)


def link_no_clobber(src: os.PathLike[str] | str, dst: os.PathLike[str] | str) -> bool:
    """Give the file ``src`` the name ``dst`` as well, never replacing a file there
    (FileExistsError). True: ``dst`` is a second link and ``src`` still exists (remove it once
    ``dst`` is durable). False: the file system has no hard links, so ``src`` was renamed to
    ``dst`` after checking the name is free (a small window where rename replaces, none on
    Windows, whose rename refuses by itself)."""
    try:
        os.link(src, dst)
    except FileExistsError:
        raise
    except OSError as exc:
        if not _no_links(exc):
            raise
        if RENAME_REPLACES and os.path.lexists(dst):
            raise FileExistsError(errno.EEXIST, "file exists", os.fspath(dst)) from None
        os.rename(src, dst)
        return False
    return True


def publish_file(
    tmp: os.PathLike[str] | str, dst: os.PathLike[str] | str, *, overwrite: bool = False
) -> None:
    """Give a finished temp file its final name in one step, so a reader sees all of it or none.

    With ``overwrite`` an existing ``dst`` is replaced; without, it never is (FileExistsError,
    ``tmp`` left for the caller). Afterwards only ``dst`` names the file."""
    if overwrite:
        os.replace(tmp, dst)
        return
    if link_no_clobber(tmp, dst):
        remove_quietly(tmp)
