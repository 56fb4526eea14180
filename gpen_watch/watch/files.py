"""What the settle thread knows about the files in the inboxes: which are settling, which were
reported (and are reported again only if they change), which are left alone, which are cloud
placeholders waiting for download; and the rules that move a file between those. ``Watcher``
(watcher.py) adds the threads, the observers and whether each inbox is there."""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gpen_watch.platform import volumes
from gpen_watch.watch.events import Arrival, Change, PathChange
from gpen_watch.watch.inboxes import Inbox, rescan_delay
from gpen_watch.watch.left_alone import LeftAlone, hidden_photo
from gpen_watch.watch.scan import scan_tree
from gpen_watch.watch.settle import SettleTracker, open_check

log = logging.getLogger("gpen_watch.watch.watcher")  # one logger for the watcher's sentences


class InboxFiles:
    """The files of ``inboxes`` (deepest first), as the settle thread tracks them."""

    def __init__(
        self,
        inboxes: Sequence[Inbox],
        on_arrival: Callable[[Arrival], None],
        on_gone: Callable[[Path], None] | None,
        tracker: SettleTracker,
        rescan_seconds: float,
    ) -> None:
        self._inboxes = list(inboxes)
        self._roots = {b.root: b for b in self._inboxes}
        self._on_arrival = on_arrival
        self._on_gone = on_gone
        self._tracker = tracker
        self._rescan_seconds = rescan_seconds
        self._rng = random.Random()
        self._emitted: dict[Path, tuple[int, float]] = {}
        # Hidden photos, links, pipes, devices and sockets: logged once per path while they stay.
        self._left_alone = LeftAlone()
        self._stopping = threading.Event()
        self.scans = 0  # completed scans (the start-up one, then each inbox's); for status and tests

    def _present(self, box: Inbox) -> bool:
        """Whether ``box`` is there now (the watcher marks it away when not)."""
        raise NotImplementedError

    def _guard(self, fn: Callable[..., None], *args: Any) -> None:
        # The settle thread must survive anything: a dead watcher silently stops taking photos.
        try:
            fn(*args)
        except Exception:
            log.exception("watcher: unexpected error (carrying on)")

    def _owner(self, path: Path) -> tuple[Inbox, Path] | None:
        for box in self._inboxes:
            rel = box.flt.relative(path)
            if rel is not None:
                return box, rel
        return None

    def _handle(self, item: PathChange) -> None:
        path = item.path
        root = self._roots.get(path)
        if root is not None:
            self._present(root)  # the inbox folder itself went (or came): an unmount?
            return
        owner = self._owner(path)
        if owner is None or owner[0].away:
            return  # an away inbox is rescanned whole when it is back
        if item.change == Change.PATH:
            self._observe(path)
        elif item.change == Change.DIR:
            box = owner[0]
            if box.flt.dir_reason(path) is None and path.is_dir() and not path.is_symlink():
                self._scan(box, path)
        elif item.change == Change.GONE:
            self._vanished(path)

    def _placeholder(self, box: Inbox, path: Path, st: os.stat_result) -> bool:
        """Whether ``path`` is a cloud placeholder of a would-be photo: counted, never opened."""
        if path in self._emitted or not volumes.placeholder(path, st):
            box.waiting.discard(path)
            return False
        stub = volumes.icloud_stub_of(path)
        if box.flt.name_reason(path.with_name(stub) if stub else path) is not None:
            return False  # an ignored name either way
        box.waiting.add(path)
        self._tracker.forget(path)
        return True

    def _observe(self, path: Path, st: os.stat_result | None = None) -> None:
        owner = self._owner(path)
        if owner is None or owner[0].away:
            return
        box, _ = owner
        flt = box.flt
        try:
            st = st or os.lstat(path)
        except FileNotFoundError:
            self._vanished(path)
            return
        except OSError:
            return  # unreadable folder entry: the rescan tries again
        if self._placeholder(box, path, st):
            return
        reason = flt.ignore_reason(path, st)
        if reason is not None:
            if self._left_alone.new_special(path, st, reason):
                log.info(
                    "%s: left alone: %s; only regular files are taken (copy the photo itself in)",
                    path,
                    reason,
                )
            if path in self._emitted:  # e.g. replaced by a symlink
                self._tracker.forget(path)
                self._vanished(path, check=False)
            elif hidden_photo(path, st, flt) and path not in self._left_alone.hidden:
                self._tracker.observe(path, st.st_size, st.st_mtime)  # reported once it settles
            else:
                self._tracker.forget(path)
            return
        key = (st.st_size, st.st_mtime)
        if self._emitted.get(path) == key:
            return  # reported already and unchanged
        if self._emitted.pop(path, None) is not None:
            log.info("%s changed after it was taken; it will be taken again once it settles", path)
        self._tracker.observe(path, *key)

    def _vanished(self, path: Path, check: bool = True) -> None:
        """``path`` (a file or a whole folder) left the inbox."""
        if check and os.path.lexists(path):
            # Late event: something is there again (recreated, or a rename onto it).
            if os.path.isdir(path) and not os.path.islink(path):
                self._handle(PathChange(Change.DIR, path))
            else:
                self._observe(path)
            return
        owner = self._owner(path)
        if owner is not None and not self._present(owner[0]):
            return  # its drive or share went away: nothing there is gone for good
        self._left_alone.forget(path)
        if owner is not None:
            owner[0].forget_waiting_under(path)
        # A file is the common case; only a folder needs the (linear) prefix search.
        if path in self._tracker or path in self._emitted:
            self._tracker.forget(path)
            gone = [path] if path in self._emitted else []
        else:
            self._tracker.forget_under(path)
            self._left_alone.forget_under(path)
            prefix = str(path) + os.sep
            gone = [p for p in self._emitted if str(p).startswith(prefix)]
        for p in gone:
            del self._emitted[p]
            if self._on_gone is not None and not self._stopping.is_set():
                self._guard(self._on_gone, p)

    def _scan(self, box: Inbox, top: Path | None = None) -> set[Path] | None:
        """Observe every candidate file under ``top`` (default: the inbox); None if unreadable."""

        def mine(path: Path) -> bool:
            owner = self._owner(path)
            return owner is not None and owner[0] is box

        return scan_tree(box.flt, top or box.root, self._roots, mine, self._observe)

    def _rescan(self, box: Inbox, count: bool = True) -> None:
        """List the inbox whole: files whose events were lost, and files gone without one."""
        box.next_rescan = time.monotonic() + rescan_delay(self._rescan_seconds, self._rng)
        if not self._present(box):
            return
        seen = self._scan(box)
        # Listed while its share went away? A half listing is not "the rest was deleted".
        if seen is None or not self._present(box):
            return
        for path in [p for p in self._emitted if p not in seen]:
            owner = self._owner(path)
            if owner is not None and owner[0] is box:
                self._vanished(path)
        # Special files and placeholders are never emitted: one removed without an event goes here.
        self._left_alone.special -= {
            p
            for p in self._left_alone.special
            if p not in seen and (o := self._owner(p)) is not None and o[0] is box
        }
        box.waiting &= seen
        self.scans += count

    def _full_scan(self) -> None:
        """The start-up scan of every inbox there (one scan, however many inboxes)."""
        for box in self._inboxes:
            if not box.away and not self._stopping.is_set():
                self._rescan(box, count=False)
        self.scans += 1

    def _note_hidden(self, path: Path) -> None:
        self._left_alone.hidden.add(path)
        log.info(
            "%s: not taken: names starting with a dot are hidden files; rename it without the dot "
            "to have it restored",
            path,
        )

    def _check_due(self) -> None:
        for path in self._tracker.due():
            if self._stopping.is_set():
                return
            owner = self._owner(path)
            try:
                st = os.lstat(path)
            except OSError:
                self._tracker.forget(path)
                continue
            if owner is None or owner[0].away:
                self._tracker.forget(path)
                continue
            box, rel = owner
            if self._placeholder(box, path, st):
                continue  # its bytes went back to the cloud meanwhile: never opened
            if box.flt.ignore_reason(path, st) is not None:
                if hidden_photo(path, st, box.flt):
                    if self._tracker.confirm(path, st.st_size, st.st_mtime):
                        self._note_hidden(path)
                    continue
                self._tracker.forget(path)
                continue
            if not self._tracker.confirm(path, st.st_size, st.st_mtime):
                continue
            verdict = open_check(path)
            if verdict == "locked":
                # Still held by the copying program (Windows): wait another settle period.
                self._tracker.observe(path, st.st_size, st.st_mtime)
                continue
            if verdict == "gone":
                continue
            self._emitted[path] = (st.st_size, st.st_mtime)
            arrival = Arrival(path, box.config, rel, st.st_size, st.st_mtime, box.flt.is_supported(path))
            self._guard(self._on_arrival, arrival)
