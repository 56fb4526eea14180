"""Listing an inbox (or one folder of it) for the start-up scan, the periodic rescan and folders
moved in: every candidate file under it, with the lstat result the listing gave."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable, Collection
from pathlib import Path

from gpen_watch.watch.filters import InboxFilter

log = logging.getLogger(__name__)


def scan_tree(
    flt: InboxFilter,
    top: Path,
    roots: Collection[Path],
    mine: Callable[[Path], bool],
    observe: Callable[[Path, os.stat_result], None],
) -> set[Path] | None:
    """Call ``observe`` for each file under ``top`` that ``mine`` says belongs to this inbox;
    the files seen, or None when the inbox itself cannot be read (that is not "all deleted").

    ``roots``: every inbox's folder; a nested inbox is scanned on its own account."""
    seen: set[Path] = set()
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError as exc:
            if folder == flt.root:
                log.warning("cannot read inbox %s: %s", folder, exc)
                return None
            continue
        for entry in entries:
            path = Path(entry.path)
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                if path not in roots and flt.skip_dir(path, entry.name) is None:
                    stack.append(path)
                continue
            if mine(path):
                seen.add(path)
                observe(path, st)
    return seen
