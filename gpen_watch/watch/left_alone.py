"""Files the watcher leaves alone on purpose but tells the user about, each once while it stays:
hidden photos (".name.jpg", reported once they settle), and links, pipes, device files and
sockets (reported when seen, and counted for `gpen-watch status`). The watcher logs; this keeps
track of what was reported."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from gpen_watch.watch.filters import InboxFilter, special_file


def hidden_photo(path: Path, st: os.stat_result, flt: InboxFilter) -> bool:
    """A regular file with a photo's extension whose own name starts with a dot.

    Such files are not taken (dot names are hidden files, and most sync tools' temp files), but
    unlike other temp names they may well be a user's photo, so each is reported once in the log
    after it settles. Files in hidden folders are not walked and not reported.
    """
    return (
        path.name.startswith(".")
        and stat.S_ISREG(st.st_mode)
        and flt.looks_like_photo(path)
        and flt.dir_reason(path.parent) is None
    )


@dataclass
class LeftAlone:
    hidden: set[Path] = field(default_factory=set)  # hidden photos reported
    special: set[Path] = field(default_factory=set)  # links, pipes, devices, sockets reported

    def new_special(self, path: Path, st: os.stat_result, reason: str) -> bool:
        """Whether ``path`` (ignored for ``reason``) is a special file not reported yet; it is
        recorded as reported."""
        if path in self.special or stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
            return False
        if reason != special_file(st):
            return False  # ignored for its name or place first (a dot name...): not counted
        self.special.add(path)
        return True

    def forget(self, path: Path) -> None:
        self.hidden.discard(path)
        self.special.discard(path)

    def forget_under(self, folder: Path) -> None:
        prefix = str(folder) + os.sep
        self.hidden = {p for p in self.hidden if not str(p).startswith(prefix)}
        self.special = {p for p in self.special if not str(p).startswith(prefix)}
