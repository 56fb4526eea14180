"""Each inbox's watch state as the status carries it (``Status.inbox_states``), and the words
`gpen-watch status`, the dashboard and the tray say about it: away, polling, photos waiting for
download. A plain local inbox watched with OS events has nothing worth saying."""

from __future__ import annotations

import re
from dataclasses import dataclass

# "network share (cifs)": a noun and its detail, said as "(network share, cifs)".
_NOUN_AND_DETAIL = re.compile(r"([^();]+) \(([^();]+)\)")


@dataclass(frozen=True)
class InboxStatus:
    """One inbox as the watcher sees it now (watch.events.InboxState, for the wire; filled by
    service.report, so that this module, which the CLI and the tray read, imports nothing).

    ``away_reason``: why it is away ("" while watched). ``mode``: "events" or "polling", and
    ``mode_reason`` why polling; ``poll_interval_s``: how often a polled inbox is listed (0 for
    events). ``waiting_download``: cloud placeholders in it, not read until their bytes are here.
    """

    path: str = ""  # as the user writes it: "~/NAS/in"
    watched: bool = True
    away_reason: str = ""
    mode: str = "events"
    mode_reason: str = ""
    poll_interval_s: float = 0.0
    waiting_download: int = 0
    next_rescan_s: float = 0.0

    @property
    def polling(self) -> bool:
        # An away inbox is watched no way at all; the mode it had is said again once it is back.
        return self.watched and self.mode == "polling"

    @property
    def away_text(self) -> str:
        """ "away: it is not there (unplugged drive or disconnected share?); photos there wait until
        it is back", or "" while watched."""
        if self.watched:
            return ""
        why = self.away_reason or "it cannot be reached"
        return f"away: {why}; photos there wait until it is back"

    @property
    def polling_text(self) -> str:
        """ "polling every 2 s (network share, cifs)", or "" for an inbox watched with OS events."""
        if not self.polling:
            return ""
        every = f"polling every {self.poll_interval_s:g} s" if self.poll_interval_s else "polling"
        reason = self.mode_reason
        if not reason:
            return every
        if m := _NOUN_AND_DETAIL.fullmatch(reason):
            return f"{every} ({m[1]}, {m[2]})"
        if "(" not in reason:
            return f"{every} ({reason})"
        return f"{every}: {reason}"  # a sentence of its own (the inotify limit and how to raise it)

    @property
    def download_text(self) -> str:
        """ "3 photos waiting for download (...)", or "" when none waits."""
        n = self.waiting_download
        if not n:
            return ""
        photos = "1 photo" if n == 1 else f"{n} photos"
        return (
            f"{photos} waiting for download (cloud placeholders are not read; "
            f"{'it is' if n == 1 else 'each is'} taken once downloaded)"
        )

    @property
    def notes(self) -> tuple[str, ...]:
        """What is worth saying about it, most pressing first; () for a plain local inbox."""
        return tuple(t for t in (self.away_text, self.polling_text, self.download_text) if t)

    @property
    def lines(self) -> tuple[str, ...]:
        """ "inbox ~/NAS/in: polling every 2 s (network share, cifs)", one per note."""
        return tuple(f"inbox {self.path}: {note}" for note in self.notes)
