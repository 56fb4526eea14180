"""Which paths in an inbox are candidate photos, which are set aside, and which are not ours.

Three outcomes for a path: a candidate image (any name that is not on the short list of names
that are never photos: the worker decides from the content), an unsupported file (a regular file
named as a document, archive, video...: reported so it is set aside in ``failed/`` with a reason,
never silently dropped), or ignored (hidden, temporary or partial names,
the service's own folders, anything that is not a regular file). Ignored files are left exactly
where they are.

Only ``lstat`` is used here: symlinks are never followed and FIFOs, devices and sockets are never
opened (opening a FIFO would block the watcher).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from gpen_watch.imaging.formats import SUPPORTED_EXTENSIONS, denied_name

# Names (compared in lower case) that are never photos of the user's.
_IGNORED_NAMES = frozenset({"thumbs.db", "ehthumbs.db", "ehthumbs_vista.db", "desktop.ini", "icon\r"})
# Partial downloads and copies, editor swap files and sync-tool temporaries.
_IGNORED_SUFFIXES = (
    ".part",
    ".partial",
    ".crdownload",
    ".download",
    ".opdownload",
    ".tmp",
    ".temp",
    ".filepart",
    ".!sync",
    ".!ut",
    ".!qb",
    ".aria2",
    ".swp",
    ".swx",
    ".crswap",
)
# "." covers hidden files, .DS_Store, .~lock.*, .syncthing.*, .dropbox*, rsync temps and our own
# ".<name>.gpen-tmp-<id>" outputs; "~" covers ~$office locks and ~syncthing~ temps.
_IGNORED_PREFIXES = (".", "~")

_WINDOWS_HIDDEN = 0x2  # FILE_ATTRIBUTE_HIDDEN
_WINDOWS_SYSTEM = 0x4  # FILE_ATTRIBUTE_SYSTEM


def supported_extensions() -> frozenset[str]:
    """Lower-case extensions (with the dot) of the formats imaging decodes (a name that has one is
    likely a photo; acceptance does not depend on it)."""
    return SUPPORTED_EXTENSIONS


def ignored_name(name: str) -> str | None:
    """Why a file or folder with this name is not ours to take, or None."""
    low = name.lower()
    if low.startswith(_IGNORED_PREFIXES):
        return "hidden or temporary name"
    if low in _IGNORED_NAMES:
        return "system file"
    if low.endswith(_IGNORED_SUFFIXES):
        return "partial or temporary file"
    return None


def special_file(st: os.stat_result) -> str | None:
    """Why an lstat result is not a plain file we may open, or None for a regular file."""
    mode = st.st_mode
    if stat.S_ISREG(mode):
        if getattr(st, "st_file_attributes", 0) & (_WINDOWS_HIDDEN | _WINDOWS_SYSTEM):
            return "hidden file"
        if getattr(st, "st_flags", 0) & getattr(stat, "UF_HIDDEN", 0):
            return "hidden file"
        return None
    if stat.S_ISLNK(mode):
        return "symbolic link (not followed)"
    if stat.S_ISDIR(mode):
        return "folder"
    if stat.S_ISFIFO(mode):
        return "named pipe (not opened)"
    if stat.S_ISSOCK(mode):
        return "socket (not opened)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device file (not opened)"
    return "not a regular file"


def _key(path: str) -> str:
    # normcase folds case on Windows only, where the file system does too.
    return os.path.normcase(os.path.abspath(path))


def _within(key: str, root_key: str) -> bool:
    return key == root_key or key.startswith(root_key.rstrip(os.sep) + os.sep)


@dataclass
class InboxFilter:
    """The rules for one inbox folder.

    ``excluded`` are the service's own folders (outbox, failed, archive); files below them are
    never arrivals even when they sit inside the inbox. They are compared both as given and with
    symlinks resolved, so an outbox reached through a linked path is still recognised.
    """

    root: Path
    recursive: bool = True
    excluded: Iterable[Path] = ()
    extensions: frozenset[str] = field(default_factory=supported_extensions)

    def __post_init__(self) -> None:
        self.root = Path(os.path.abspath(self.root))
        self._root_key = _key(str(self.root))
        keys: set[str] = set()
        for p in self.excluded:
            keys.add(_key(str(p)))
            keys.add(_key(os.path.realpath(p)))
        self._excluded_keys = tuple(sorted(keys))

    def relative(self, path: os.PathLike[str] | str) -> Path | None:
        """``path`` relative to the inbox when it lies inside it (at depth 1 when not recursive)."""
        key = _key(os.fspath(path))
        if key == self._root_key or not _within(key, self._root_key):
            return None
        rel = Path(os.path.relpath(os.path.abspath(path), self.root))
        if not self.recursive and len(rel.parts) != 1:
            return None
        return rel

    def is_excluded_dir(self, path: os.PathLike[str] | str) -> bool:
        """Whether ``path`` is (or is inside) one of the service's own folders."""
        p = os.fspath(path)
        for key in (_key(p), _key(os.path.realpath(p))):
            if any(_within(key, ex) for ex in self._excluded_keys):
                return True
        return False

    def skip_dir(self, path: os.PathLike[str] | str, name: str) -> str | None:
        """Why a subfolder is not walked into, or None."""
        if not self.recursive:
            return "inbox is not recursive"
        reason = ignored_name(name)
        if reason:
            return reason
        if self.is_excluded_dir(path):
            return "the service's own folder"
        return None

    def dir_reason(self, path: os.PathLike[str] | str) -> str | None:
        """Why the folder ``path`` inside the inbox is not walked (checking every level), or None."""
        if _key(os.fspath(path)) == self._root_key:
            return None
        rel = self.relative(os.path.join(path, "x"))  # a file inside it: is that file in the inbox?
        if rel is None:
            return "outside the inbox" if self.recursive else "inbox is not recursive"
        for part in rel.parts[:-1]:
            reason = ignored_name(part)
            if reason:
                return reason
        if self.is_excluded_dir(path):
            return "the service's own folder"
        return None

    def name_reason(self, path: os.PathLike[str] | str) -> str | None:
        """Why a file at ``path`` would not be an arrival, from its name and place alone (the
        file need not exist: an iCloud stub's photo is judged before it is downloaded)."""
        rel = self.relative(path)
        if rel is None:
            return "outside the inbox"
        for part in rel.parts:
            reason = ignored_name(part)
            if reason:
                return reason
        if self.is_excluded_dir(os.path.dirname(os.path.abspath(path))):
            return "the service's own folder"
        return None

    def ignore_reason(self, path: os.PathLike[str] | str, st: os.stat_result | None = None) -> str | None:
        """Why ``path`` is not an arrival (None: it is one, image or unsupported).

        Raises FileNotFoundError when it does not exist (the caller treats that as gone).
        """
        reason = self.name_reason(path)
        if reason is not None:
            return reason
        if st is None:
            st = os.lstat(path)
        return special_file(st)

    def is_supported(self, path: os.PathLike[str] | str) -> bool:
        """Whether the file may be a photo: its name is not one that never is. The content decides
        later (a worker, or the daemon's header check), whatever the extension says."""
        return not denied_name(os.path.basename(os.fspath(path)))

    def looks_like_photo(self, path: os.PathLike[str] | str) -> bool:
        """Whether the extension is that of a format imaging reads."""
        return os.path.splitext(os.fspath(path))[1].lower() in self.extensions
