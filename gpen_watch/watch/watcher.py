"""Watching the inboxes and reporting complete arrivals.

Three sources feed one settle loop: watchdog events (OS events, or polling for inboxes on network
shares and FUSE mounts, where OS events miss writes made elsewhere: observers.py), a full scan at
start-up (files that arrived while the service was down), and each inbox's periodic rescan at a
randomised interval (events get lost: inotify queue overflow, Windows buffer overflow, watch
limits). A file is reported once, after it settled (see settle.py; an empty file only after
``EMPTY_FILE_GRACE_SECONDS``, in case its copier stalled before writing); it is reported again
only if it changes afterwards. A cloud placeholder (platform.volumes) is never opened: it waits,
counted, until its bytes are local.

An inbox whose drive or share went away (platform.presence) is AWAY: its files are not taken for
deleted, nothing is reported from it, and when it is back it is watched anew and rescanned.

Threads: watchdog's own threads only put raw events on a queue. One thread of ours ("gpen-watch
settle") does all the stat calls, scans and callbacks, so the callbacks are never called
concurrently. They should be quick (put the arrival on a queue); a callback that raises is logged
and the watcher carries on.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from watchdog.observers.api import BaseObserver

from gpen_watch.config import Config, InboxConfig
from gpen_watch.platform import presence, volumes
from gpen_watch.watch.events import Arrival, Handler, InboxPresence, InboxState
from gpen_watch.watch.files import InboxFiles
from gpen_watch.watch.filters import InboxFilter, supported_extensions
from gpen_watch.watch.inboxes import Inbox, rescan_delay
from gpen_watch.watch.observers import Observers, choose
from gpen_watch.watch.settle import EMPTY_FILE_GRACE_SECONDS, SettleTracker

log = logging.getLogger(__name__)

_STOP = object()

__all__ = ["Arrival", "InboxState", "Watcher"]  # they live in events.py; callers import them here


# With settle_seconds = 0, a file that keeps changing would otherwise be re-checked in a busy loop.
_MIN_CHECK_INTERVAL = 0.05
_MAX_BATCH = 10_000
# How often each inbox's presence and its waiting placeholders are looked at (at most).
_LOOK_SECONDS = 2.0


class Watcher(InboxFiles):
    """Watches ``inboxes`` and calls ``on_arrival(Arrival)`` for every settled file.

    ``exclude``: the service's own folders (outbox, failed, archive), never taken even inside an
    inbox. ``on_gone(path)``: called when a file that was reported disappears from the inbox
    (deleted, or moved away - also by the service's own archiving; check the journal state),
    never while its inbox is away. ``on_inbox_state(InboxState)``: an inbox's state changed
    (away or back, how it is watched, placeholders waiting). ``polling``: watch.polling ("auto",
    "always", "never"; True and False read as "always" and "auto"). ``native_observer``: makes
    the OS-events observer (watchdog's ``Observer``). Start with ``start()`` (or ``with``);
    ``stop()`` returns within about a second.
    """

    def __init__(
        self,
        inboxes: Sequence[InboxConfig],
        on_arrival: Callable[[Arrival], None],
        *,
        settle_seconds: float = 1.0,
        polling: str | bool = "auto",
        poll_interval: float = 2.0,
        rescan_seconds: float = 60.0,
        exclude: Iterable[Path] = (),
        on_gone: Callable[[Path], None] | None = None,
        on_inbox_state: Callable[[InboxState], None] | None = None,
        extensions: Iterable[str] | None = None,
        empty_grace_seconds: float = EMPTY_FILE_GRACE_SECONDS,
        native_observer: Callable[[], BaseObserver] | None = None,
    ) -> None:
        exts = frozenset(e.lower() for e in extensions) if extensions is not None else supported_extensions()
        excluded = list(exclude)
        seen: dict[str, InboxConfig] = {}
        for inbox in inboxes:
            seen.setdefault(os.path.normcase(os.path.abspath(inbox.path)), inbox)
        boxes = [Inbox(c, InboxFilter(Path(c.path), c.recursive, excluded, exts)) for c in seen.values()]
        # Deepest first: a file in a nested inbox belongs to the nested one. An empty file waits
        # longer: the copier may not have written its first byte yet.
        super().__init__(
            sorted(boxes, key=lambda b: len(b.root.parts), reverse=True),
            on_arrival,
            on_gone,
            SettleTracker(settle_seconds, empty_grace_seconds=empty_grace_seconds),
            rescan_seconds,
        )
        self._on_state = on_inbox_state
        self._polling = ("always" if polling else "auto") if isinstance(polling, bool) else polling
        self._look_seconds = min(poll_interval, _LOOK_SECONDS)
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._observers = Observers(Handler(self._queue.put), poll_interval, native_observer)
        self._started = False
        self._thread: threading.Thread | None = None
        self._states_lock = threading.Lock()
        # Each inbox's last state (next_rescan_s left 0, so that equal means unchanged) and the
        # time.monotonic() of its next rescan.
        self._states: dict[Path, tuple[InboxState, float]] = {}

    @classmethod
    def from_config(
        cls,
        cfg: Config,
        on_arrival: Callable[[Arrival], None],
        on_gone: Callable[[Path], None] | None = None,
        on_inbox_state: Callable[[InboxState], None] | None = None,
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
            on_inbox_state=on_inbox_state,
        )

    # --- life cycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._started:
            raise RuntimeError("watcher already started")
        self._started = True
        self._observers.start()
        # Watch first, then scan: a file arriving in between is seen by one or the other.
        for box in self._inboxes:
            reason = presence.away_reason(box.root, None)
            if reason is None:
                self._watch(box)
            else:
                box.reason = reason
                log.warning("inbox %s is away: %s; it is watched as soon as it is there", box.root, reason)
        self._thread = threading.Thread(target=self._run, name="gpen-watch settle", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 1.0) -> None:
        """Stop watching; no callback runs after this returns (unless one is stuck)."""
        self._stopping.set()
        self._queue.put(_STOP)
        self._observers.stop()
        deadline = time.monotonic() + timeout
        if self._thread is not None:
            self._thread.join(max(0.0, deadline - time.monotonic()))
        if self._started:
            self._observers.join(max(0.0, deadline - time.monotonic()))

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

    def inbox_states(self) -> list[InboxState]:
        """How each inbox is watched now (from any thread); empty until the watcher has started."""
        now = time.monotonic()
        with self._states_lock:
            entries = list(self._states.values())
        return [dataclasses.replace(st, next_rescan_s=max(0.0, due - now)) for st, due in entries]

    # --- presence and how each inbox is watched ------------------------------------------------

    def _watch(self, box: Inbox) -> None:
        box.anchor = presence.anchor(box.root)
        box.presence, box.reason = InboxPresence.WATCHED, ""
        wanted = choose(self._polling, volumes.volume_of(box.root))
        box.mode = self._observers.watch(box.root, box.config.recursive, wanted)
        box.next_rescan = time.monotonic() + rescan_delay(self._rescan_seconds, self._rng)

    def _present(self, box: Inbox) -> bool:
        """Whether ``box`` is there now; marks it away (and says so) when it is not."""
        if box.away:
            return False
        reason = presence.away_reason(box.root, box.anchor)
        if reason is None:
            return True
        box.presence, box.reason = InboxPresence.AWAY, reason
        self._observers.unwatch(box.root)
        # Files still settling are looked at again when it is back; none is taken for gone.
        self._tracker.forget_under(box.root)
        box.waiting.clear()
        log.warning(
            "inbox %s is away: %s; photos there wait and none is taken for deleted; "
            "it is watched again as soon as it is back",
            box.root,
            reason,
        )
        return False

    def _look(self) -> None:
        for box in self._inboxes:
            if not self._stopping.is_set():
                self._look_at(box)

    def _look_at(self, box: Inbox) -> None:
        """Whether ``box`` went away or is back; its placeholders whose bytes may be local now."""
        if not box.away:
            if self._present(box):
                for path in list(box.waiting):
                    self._observe(path)
        elif presence.away_reason(box.root, box.anchor) is None:
            log.info("inbox %s is back; watching it again", box.root)
            self._watch(box)
            self._rescan(box)
        else:
            box.next_rescan = time.monotonic() + rescan_delay(self._rescan_seconds, self._rng)

    def _publish(self) -> None:
        """Record each inbox's state; tell ``on_inbox_state`` about those that changed."""
        changed = []
        with self._states_lock:
            for box in self._inboxes:
                st = box.state(box.next_rescan)
                old = self._states.get(box.root)
                self._states[box.root] = (st, box.next_rescan)
                if old is None or old[0] != st:
                    changed.append(st)
        if self._on_state is not None:
            now = time.monotonic()
            for st in changed:
                self._guard(
                    self._on_state,
                    dataclasses.replace(st, next_rescan_s=max(0.0, self._roots[st.root].next_rescan - now)),
                )

    # --- the settle thread --------------------------------------------------------------------

    def _run(self) -> None:
        self._guard(self._full_scan)
        self._guard(self._publish)
        next_look = time.monotonic() + self._look_seconds
        while not self._stopping.is_set():
            now = time.monotonic()
            due = self._tracker.next_due()
            next_rescan = min((b.next_rescan for b in self._inboxes), default=math.inf)
            deadline = min(
                next_rescan, next_look, math.inf if due is None else max(due, now + _MIN_CHECK_INTERVAL)
            )
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
            now = time.monotonic()
            if now >= next_look:
                self._guard(self._look)
                next_look = time.monotonic() + self._look_seconds
            for box in self._inboxes:
                if time.monotonic() >= box.next_rescan and not self._stopping.is_set():
                    self._guard(self._look_at if box.away else self._rescan, box)
            self._guard(self._check_due)
            self._guard(self._publish)
