"""The batch under way, for the status: every photo added since the queue was last empty, as
``journal.batch`` defines it for the Overview's bar, so the tray, the Overview and the status say
the same "k of n".

Read on a read-only connection of its own (the batch's walk keeps what it found between reads)
and only when the journal's counts per state changed since the last read: a status is asked for
every second by the tray and the notice thread, and most seconds no job moved.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from gpen_watch.journal.browse import JournalBrowser
from gpen_watch.service.status import BatchStatus


class BatchWatch:
    def __init__(self, journal_path: Path) -> None:
        self._path = journal_path
        self._browser: JournalBrowser | None = None
        self._seen: tuple[tuple[tuple[str, int], ...], BatchStatus | None] | None = None

    def status(self, counts: Mapping[str, int]) -> BatchStatus | None:
        """The batch, given the journal's jobs per state now (``Journal.counts``)."""
        key = tuple(sorted(counts.items()))
        if self._seen is None or self._seen[0] != key:
            if self._browser is None:
                self._browser = JournalBrowser.open(self._path)
            b = self._browser.current_batch()
            batch = (
                None
                if b is None
                else BatchStatus(b.total, b.ended, b.done, b.failed, b.other, b.redos, b.since)
            )
            self._seen = (key, batch)
        return self._seen[1]

    def close(self) -> None:
        if self._browser is not None:
            self._browser.close()
            self._browser = None
