"""Watching the inboxes and reporting complete arrivals.

Three sources feed one settle loop: watchdog events (inotify, FSEvents, ReadDirectoryChanges, or
polling for network shares, where OS events miss writes made by other machines), a full scan at
start-up (files that arrived while the service was down), and a periodic rescan (events get lost:
inotify queue overflow, Windows buffer overflow, watch limits). A file is reported once, after it
settled (see settle.py; an empty file only after ``EMPTY_FILE_GRACE_SECONDS``, in case its copier
stalled before writing); it is reported again only if it changes afterwards.

Threads: watchdog's own threads only put raw events on a queue. One thread of ours ("gpen-watch
settle") does all the stat calls, scans and callbacks, so the callbacks are never called
concurrently. They should be quick (put the arrival on a queue); a callback that raises is logged
and the watcher carries on.
"""

from __future__ import annotations

import logging
import math
import os
import queue
import stat
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from watchdog.observers import Observer
from watchdog.observers.polling import PollingObserverVFS

from gpen_watch.config import Config, InboxConfig
from gpen_watch.watch.events import Arrival, Change, Handler, PathChange
from gpen_watch.watch.filters import InboxFilter, supported_extensions
from gpen_watch.watch.left_alone import LeftAlone, hidden_photo
from gpen_watch.watch.settle import EMPTY_FILE_GRACE_SECONDS, SettleTracker, open_check

log = logging.getLogger(__name__)

_STOP = object()

__all__ = ["Arrival", "Watcher"]  # Arrival lives in events.py; callers import both from here


# With settle_seconds = 0, a file that keeps changing would otherwise be re-checked in a busy loop.
_MIN_CHECK_INTERVAL = 0.05
_MAX_BATCH = 10_000


class Watcher:
    """Watches ``inboxes`` and calls ``on_arrival(Arrival)`` for every settled file.

    ``exclude``: the service's own folders (outbox, failed, archive), never taken even inside an
    inbox. ``on_gone(path)``: called when a file that was reported disappears from the inbox
    (deleted, or moved away - also by the service's own archiving; check the journal state).
    Start with ``start()`` (or ``with``); ``stop()`` returns within about a second.
    """

    def __init__(
        self,
        inboxes: Sequence[InboxConfig],
        on_arrival: Callable[[Arrival], None],
        *,
        settle_seconds: float = 1.0,
        polling: bool = False,
        poll_interval: float = 2.0,
        rescan_seconds: float = 60.0,
        exclude: Iterable[Path] = (),
        on_gone: Callable[[Path], None] | None = None,
        extensions: Iterable[str] | None = None,
        empty_grace_seconds: float = EMPTY_FILE_GRACE_SECONDS,
    ) -> None:
        exts = frozenset(e.lower() for e in extensions) if extensions is not None else supported_extensions()
        excluded = list(exclude)
        seen: dict[str, InboxConfig] = {}
        for inbox in inboxes:
            seen.setdefault(os.path.normcase(os.path.abspath(inbox.path)), inbox)
        pairs = [
            (inbox, InboxFilter(Path(inbox.path), inbox.recursive, excluded, exts)) for inbox in seen.values()
        ]
        # Deepest first: a file in a nested inbox belongs to the nested one.
        self._inboxes = sorted(pairs, key=lambda p: len(p[1].root.parts), reverse=True)
        self._roots = {flt.root for _, flt in self._inboxes}
        self._on_arrival = on_arrival
        self._on_gone = on_gone
        self._polling = polling
        self._poll_interval = poll_interval
        self._rescan_seconds = rescan_seconds
        # An empty file waits longer: the copier may not have written its first byte yet.
        self._tracker = SettleTracker(settle_seconds, empty_grace_seconds=empty_grace_seconds)
        self._emitted: dict[Path, tuple[int, float]] = {}
        # Hidden photos, links, pipes, devices and sockets: logged once per path while they stay.
        self._left_alone = LeftAlone()
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._observer: Any = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._unwatched: list[tuple[InboxConfig, InboxFilter]] = []
        self._handler = Handler(self._queue.put)
        self.scans = 0  # completed full scans (start-up included); for status and tests

    @classmethod
    def from_config(
        cls,
        cfg: Config,
        on_arrival: Callable[[Arrival], None],
        on_gone: Callable[[Path], None] | None = None,
    ) -> Watcher:
        from gpen_watch.outbox.naming import service_dirs

        w = cfg.watch
        return cls(
            w.inboxes,
            on_arrival,
            settle_seconds=w.settle_seconds,
            polling=w.polling,
            poll_interval=w.poll_interval,
            rescan_seconds=w.rescan_seconds,
            exclude=service_dirs(cfg),
            on_gone=on_gone,
        )

    # --- life cycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("watcher already started")
        if self._polling:
            # lstat: never follow a symlinked folder (loops, escaping the inbox).
            self._observer = PollingObserverVFS(
                stat=os.lstat, listdir=os.scandir, polling_interval=self._poll_interval
            )
        else:
            self._observer = Observer()
        self._observer.daemon = True
        # Watch first, then scan: a file arriving in between is seen by one or the other.
        for pair in self._inboxes:
            self._watch(*pair)
        self._observer.start()
        self._thread = threading.Thread(target=self._run, name="gpen-watch settle", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 1.0) -> None:
        """Stop watching; no callback runs after this returns (unless one is stuck)."""
        self._stopping.set()
        self._queue.put(_STOP)
        if self._observer is not None:
            self._observer.stop()
        deadline = time.monotonic() + timeout
        if self._thread is not None:
            self._thread.join(max(0.0, deadline - time.monotonic()))
        if self._observer is not None:
            self._observer.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> Watcher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pending(self) -> int:
        """Files seen but not yet settled."""
        return len(self._tracker)

    @property
    def special_files(self) -> int:
        """Symlinks, FIFOs, device files and sockets in the inboxes now, left alone."""
        return len(self._left_alone.special)

    # --- the settle thread --------------------------------------------------------------------

    def _watch(self, inbox: InboxConfig, flt: InboxFilter) -> bool:
        if not flt.root.is_dir():
            log.warning(
                "inbox %s does not exist or is not a folder; will look again at the next rescan", flt.root
            )
            self._unwatched.append((inbox, flt))
            return False
        try:
            self._observer.schedule(self._handler, str(flt.root), recursive=inbox.recursive)
        except OSError as exc:
            # e.g. the inotify watch limit: the periodic rescan still finds every file, only later.
            log.warning(
                "cannot watch %s (%s); relying on rescans every %.0f s (consider watch.polling)",
                flt.root,
                exc,
                self._rescan_seconds,
            )
        return True

    def _run(self) -> None:
        self._guard(self._full_scan)
        next_rescan = time.monotonic() + self._rescan_seconds
        while not self._stopping.is_set():
            now = time.monotonic()
            due = self._tracker.next_due()
            deadline = min(next_rescan, math.inf if due is None else max(due, now + _MIN_CHECK_INTERVAL))
            try:
                item = self._queue.get(timeout=max(0.0, deadline - now))
            except queue.Empty:
                item = None
            items = [] if item is None else [item]
            while item is not None and len(items) < _MAX_BATCH:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            for it in items:
                if it is _STOP or self._stopping.is_set():
                    return
                self._guard(self._handle, it)
            if time.monotonic() >= next_rescan:
                self._guard(self._full_scan)
                next_rescan = time.monotonic() + self._rescan_seconds
            self._guard(self._check_due)

    def _guard(self, fn: Callable[..., None], *args: Any) -> None:
        # The settle thread must survive anything: a dead watcher silently stops taking photos.
        try:
            fn(*args)
        except Exception:
            log.exception("watcher: unexpected error (carrying on)")

    def _owner(self, path: Path) -> tuple[InboxConfig, InboxFilter, Path] | None:
        for inbox, flt in self._inboxes:
            rel = flt.relative(path)
            if rel is not None:
                return inbox, flt, rel
        return None

    def _handle(self, item: PathChange) -> None:
        path = item.path
        if item.change == Change.PATH:
            self._observe(path)
        elif item.change == Change.DIR:
            owner = self._owner(path)
            if (
                owner is not None
                and owner[1].dir_reason(path) is None
                and path.is_dir()
                and not path.is_symlink()
            ):
                self._scan(owner[0], owner[1], path)
        elif item.change == Change.GONE:
            self._vanished(path)

    def _observe(self, path: Path, st: os.stat_result | None = None) -> None:
        owner = self._owner(path)
        if owner is None:
            return
        _, flt, _ = owner
        try:
            st = st or os.lstat(path)
        except FileNotFoundError:
            self._vanished(path)
            return
        except OSError:
            return  # unreadable folder entry: the rescan tries again
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
        self._left_alone.forget(path)
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

    def _scan(self, inbox: InboxConfig, flt: InboxFilter, top: Path | None = None) -> set[Path] | None:
        """Observe every candidate file under ``top`` (default: the inbox); None if unreadable."""
        seen: set[Path] = set()
        stack = [top or flt.root]
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
                    # Nested inboxes are scanned on their own account.
                    if path not in self._roots and flt.skip_dir(path, entry.name) is None:
                        stack.append(path)
                    continue
                owner = self._owner(path)
                if owner is not None and owner[1] is flt:
                    seen.add(path)
                    self._observe(path, st)
        return seen

    def _full_scan(self) -> None:
        for pair in list(self._unwatched):
            self._unwatched.remove(pair)
            if self._watch(*pair):
                log.info("inbox %s is there now; watching it", pair[1].root)
        unwatched = {id(flt) for _, flt in self._unwatched}
        for inbox, flt in self._inboxes:
            if id(flt) in unwatched or self._stopping.is_set():
                continue
            seen = self._scan(inbox, flt)
            if seen is None:
                continue  # unreadable right now (share offline?): that is not "everything was deleted"
            for path in [p for p in self._emitted if p not in seen]:
                owner = self._owner(path)
                if owner is not None and owner[1] is flt:
                    self._vanished(path)
            # Special files are never emitted: one removed without an event is dropped here.
            self._left_alone.special -= {
                p
                for p in self._left_alone.special
                if p not in seen and (o := self._owner(p)) is not None and o[1] is flt
            }
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
            if owner is None or owner[1].ignore_reason(path, st) is not None:
                if owner is not None and hidden_photo(path, st, owner[1]):
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
            inbox, flt, rel = owner
            self._emitted[path] = (st.st_size, st.st_mtime)
            arrival = Arrival(path, inbox, rel, st.st_size, st.st_mtime, flt.is_supported(path))
            self._guard(self._on_arrival, arrival)
