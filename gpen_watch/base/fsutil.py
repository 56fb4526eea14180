"""Small file-system helpers and constants shared by the stages that read users' files and write
their own atomically: one home for each, so the watcher, the journal, the loader and the outbox
cannot drift apart. The calls whose rules differ between operating systems (flushing to disk,
linking without replacing) are in ``gpen_watch.platform.files``."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from gpen_watch.base.errors import OutboxUnavailable

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


def remove_quietly(path: os.PathLike[str] | str) -> None:
    """Remove a file of ours (a temp, a copy being undone) if it is there; never raises."""
    with contextlib.suppress(OSError):
        os.unlink(path)


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
    """``name`` as a path inside some folder ("faces/0.before.jpg"); ValueError for a name that
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


def require_device(folder: Path, device: int | None) -> None:
    """Raise OutboxUnavailable unless ``folder`` is still on ``device`` (a ``st_dev``; None: any).

    Checked right before a result is written: the drive or share the output folder was on when
    the photo was handed out may have gone since, leaving its bare mount point, a folder of the
    disk under it, that would take the write."""
    if device is None:
        return
    try:
        now = os.stat(folder).st_dev
    except OSError as exc:
        raise OutboxUnavailable(f"{folder}: the outbox is not there now: {exc.strerror or exc}") from exc
    if now != device:
        raise OutboxUnavailable(
            f"{folder}: the outbox's drive or share is not mounted now (the folder is on another "
            "file system than when this photo was handed out); nothing was written there"
        )
