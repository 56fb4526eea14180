"""Small file-system helpers and constants shared by the stages that read users' files and write
their own atomically: one home for each, so the watcher, the journal, the loader and the outbox
cannot drift apart."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

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
    ``dst`` after checking the name is free (a small window elsewhere than on Windows, whose
    rename refuses by itself)."""
    try:
        os.link(src, dst)
    except FileExistsError:
        raise
    except OSError as exc:
        if not _no_links(exc):
            raise
        if os.name != "nt" and os.path.lexists(dst):
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


def write_text_atomic(
    path: Path, text: str, *, mode: int | None = None, tmp: Path | None = None, fsync: bool = False
) -> None:
    """Replace ``path`` with ``text`` in one rename, so a reader sees the old file or all of the new.

    ``mode``: the file's exact permissions; it is created no wider than that (so a private file is
    never readable by others, not even for a moment). None: the umask's default, as ``open`` gives.
    ``tmp``: the temp name, where a recovery scan must recognise it (a stale one is replaced);
    default: a hidden name beside ``path``. ``fsync``: flush the file to disk before the rename
    (the caller flushes the folder, strictly or not, as its promise requires)."""
    tmp = tmp or path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    fd = os.open(tmp, flags, 0o666 if mode is None else mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)  # the umask may have narrowed it further
        os.replace(tmp, path)
    except BaseException:
        remove_quietly(tmp)
        raise


def safe_relative(name: str) -> PurePosixPath:
    """``name`` as a path inside some folder ("faces/0.before.png"); ValueError for a name that
    could leave it (absolute, "..", a drive) or names nothing."""
    rel = PurePosixPath(name)
    if (
        not name
        or rel.is_absolute()
        or "\\" in name
        or ":" in name
        or any(p in ("", ".", "..") for p in rel.parts)
    ):
        raise ValueError(f"not a plain relative file name: {name!r}")
    return rel


def replace_folder(folder: Path, files: Mapping[str, bytes]) -> None:
    """Make ``folder`` hold exactly ``files`` (relative names, "/" between folders), replacing
    what it held. Written into a hidden temp folder beside it and renamed into place, so a reader
    sees the old set, for a moment none, or all of the new one, never part of one. Names that
    could leave the folder raise ValueError before anything is written."""
    names = [(safe_relative(name), data) for name, data in files.items()]
    folder.parent.mkdir(parents=True, exist_ok=True)
    tag = secrets.token_hex(4)
    tmp = folder.with_name(f".{folder.name}.tmp-{tag}")
    old = folder.with_name(f".{folder.name}.old-{tag}")
    try:
        tmp.mkdir()
        for rel, data in names:
            path = tmp.joinpath(*rel.parts)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        with contextlib.suppress(FileNotFoundError):
            os.rename(folder, old)
        os.rename(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)
