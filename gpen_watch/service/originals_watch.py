"""The service's bookkeeping of originals that could not leave the inbox after their job ended.

Two kinds, both with the result already in the outbox: originals *waiting* for a folder that
refused them for a reason that can clear (the archive or failed/ is full, read-only, gone), which
are retried every ``retry_s`` (at once at start and on resume); and originals *left* because the
inbox itself will not let them go (a read-only inbox), which are only counted, for a notice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from gpen_watch.config import Config
from gpen_watch.journal import Journal
from gpen_watch.journal.states import Original
from gpen_watch.outbox import originals
from gpen_watch.outbox.moves import OriginalOutcome
from gpen_watch.platform import presence

log = logging.getLogger(__name__)


class OriginalsWatch:
    """Hears every original's outcome (``note``) and retries the waiting ones (``retry``)."""

    def __init__(
        self,
        cfg: Config,
        retry_s: float,
        away: presence.Away = presence.present,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cfg = cfg
        self._away = away  # an original in an inbox that is away waits for it
        self.retry_s = retry_s
        self._clock = clock
        self.waiting: dict[Path, originals.Waiting] = {}
        # When to try again (None: none waiting; 0.0 at start: look in the journal at once).
        self.retry_at: float | None = 0.0
        # Originals that could not leave the inbox in this run, per reason ("left" in the journal).
        self.left: dict[str, int] = {}

    def note(self, outcome: OriginalOutcome | None) -> None:
        """An original that its folder refused now waits in the inbox: say so, retry later. One that
        cannot leave the inbox (left) is only counted for the notice: the inbox is not ours to fix."""
        if outcome is not None and outcome.action == Original.LEFT:
            reason = outcome.detail or "reason unknown"
            self.left[reason] = self.left.get(reason, 0) + 1
            return
        if outcome is None or outcome.action != Original.WAITING or outcome.folder is None:
            return
        before = self.waiting.get(outcome.folder)
        self.waiting[outcome.folder] = originals.Waiting(
            outcome.folder, outcome.detail, (before.count if before else 0) + 1
        )
        if self.retry_at is None:
            self.retry_at = self._clock() + self.retry_s
        if before is None:
            log.error("%s", self.problem())

    def retry_soon(self) -> None:
        """Try the waiting ones at the next turn (``resume``)."""
        if self.retry_at is not None:
            self.retry_at = 0.0

    def retry(self, journal: Journal, stopping: threading.Event) -> None:
        """Every ``retry_s`` while originals wait (at once at start and on resume): move them.

        The photos' results are already in the outbox; only the move is tried again.
        """
        due = self.retry_at
        if due is None or self._clock() < due or stopping.is_set():
            return
        had = self.waiting_count
        try:
            handled, waiting = originals.retry_waiting(journal, self.cfg, self.note, self._away)
        except Exception:
            log.exception("could not retry the originals waiting in the inbox")
            handled, waiting = 0, list(self.waiting.values())
        self.waiting = {w.folder: w for w in waiting}
        self.retry_at = self._clock() + self.retry_s if waiting else None
        if handled:
            log.info("%d original(s) that waited in the inbox handled now", handled)
        if waiting:
            log.warning("%s", self.problem())
        elif had:
            log.info("the folders take originals again; none waits in the inbox")

    @property
    def waiting_count(self) -> int:
        return sum(w.count for w in self.waiting.values())

    @property
    def left_count(self) -> int:
        return sum(self.left.values())

    def problem(self) -> str | None:
        if not self.waiting:
            return None
        parts = [
            f"cannot move originals to {w.folder}: {w.reason}; {w.count} left in the inbox"
            for w in self.waiting.values()
        ]
        return "; ".join(parts) + f"; retrying every {self.retry_s:g} s"

    def notice(self) -> str | None:
        """Originals left in the inbox in this run (not a problem: their results are published)."""
        if not self.left:
            return None
        reasons = list(self.left)
        text = f"{self.left_count} original(s) left in the inbox: {reasons[-1]}"
        if len(reasons) > 1:
            text += f" (and {len(reasons) - 1} other reason(s); see the log)"
        return text
