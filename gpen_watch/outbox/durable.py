"""File-system steps that survive a crash and never overwrite: fsync, link-into-place, move.

No-overwrite comes from ``os.link`` (fails if the name exists, atomically) followed by unlinking
the old name. File systems without hard links (FAT, some network shares) fall back to
``os.rename``: on Windows it refuses to overwrite by itself; elsewhere the name is checked just
before, which leaves a window of microseconds on such file systems only.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from gpen_watch.base.fsutil import remove_quietly, write_text_atomic
from gpen_watch.outbox.naming import TMP_MARK, candidates

# The flushes are this module's steps too (the commit and its tests reach them as durable.fsync_*).
from gpen_watch.platform.files import fsync_dir as fsync_dir
from gpen_watch.platform.files import fsync_file as fsync_file
from gpen_watch.platform.files import link_no_clobber


def place(
    src: Path,
    directory: Path,
    name: str,
    *,
    before: Callable[[Path], bool] | None = None,
    taken: Callable[[Path], bool] | None = None,
) -> Path | None:
    """Give the file ``src`` the first free name of ``candidates(name)`` in ``directory`` (same
    file system) and remove the ``src`` name, durably; no existing file is ever replaced.

    ``before(dst)`` runs right before each attempt (to record the chosen name); if it returns
    False nothing is placed and None is returned. ``taken(dst)`` skips reserved names.
    """
    for candidate in candidates(name):
        dst = directory / candidate
        if os.path.lexists(dst) or (taken is not None and taken(dst)):
            continue
        if before is not None and not before(dst):
            return None
        try:
            linked = link_no_clobber(src, dst)
        except FileExistsError:
            continue
        if not linked:  # renamed: the file has only its new name
            fsync_dir(directory)
            if Path(src).parent != directory:
                fsync_dir(Path(src).parent)
            return dst
        # The new name must be on disk before the old one goes, or a crash could lose both.
        fsync_dir(directory)
        try:
            os.unlink(src)
        except OSError:
            _unplace(src, dst)
            raise
        fsync_dir(Path(src).parent)
        return dst
    raise FileExistsError(errno.EEXIST, "no free name", str(directory / name))


def move_no_clobber(
    src: Path, directory: Path, name: str, job_id: int, taken: Callable[[Path], bool] | None = None
) -> Path:
    """Move ``src`` into ``directory`` as ``name`` (or ``name (1)``...), durably, never overwriting.

    Across file systems the file is copied to a temp name in ``directory`` first, flushed, placed,
    and only then is ``src`` removed, so a crash leaves at least one complete copy.
    """
    try:
        dst = place(src, directory, name, taken=taken)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
    else:
        assert dst is not None
        return dst
    tmp = directory / f".{name}{TMP_MARK}{job_id}"
    try:
        shutil.copy2(src, tmp)
        fsync_file(tmp)
        dst = place(tmp, directory, name, taken=taken)
    except BaseException:
        # A full or failing destination: no partial copy stays behind (src is untouched).
        remove_quietly(tmp)
        raise
    assert dst is not None
    try:
        os.unlink(src)
    except OSError:
        # The original cannot leave its folder (read-only inbox): the copy goes, the original stays.
        if os.path.lexists(src):
            remove_quietly(dst)
        raise
    fsync_dir(Path(src).parent)
    return dst


def _unplace(src: Path, dst: Path) -> None:
    """Undo a link whose old name could not be removed: one file must not stay under two names.

    Only when both names are still the same file (``src`` intact); otherwise ``dst`` may be the
    only copy and is kept.
    """
    try:
        same = os.path.samefile(src, dst)
    except OSError:
        return
    if same:
        remove_quietly(dst)


def write_text_durably(path: Path, text: str, job_id: int) -> None:
    """Write a small text file so that it is either absent or complete (temp, flush, rename)."""
    write_text_atomic(path, text, tmp=path.parent / f".{path.name}{TMP_MARK}{job_id}", fsync=True)
    fsync_dir(path.parent)
