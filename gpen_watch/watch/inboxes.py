"""One watched inbox as the settle thread keeps it: its rules, whether it is there, how it is
watched, its next full rescan and the cloud placeholders waiting in it; and the snapshot of all
that (``InboxState``) for the status, the dashboard and the job side."""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from pathlib import Path

from gpen_watch.config import InboxConfig
from gpen_watch.platform.presence import Anchor
from gpen_watch.watch.events import InboxPresence, InboxState
from gpen_watch.watch.filters import InboxFilter
from gpen_watch.watch.observers import EVENTS, Mode

# Syncthing's practice: each folder's next full rescan at the interval times a random factor, so
# inboxes on one share (and services on several machines) do not all list it at the same moment.
RESCAN_SPREAD = (0.75, 1.25)


def rescan_delay(rescan_seconds: float, rng: random.Random) -> float:
    return rescan_seconds * rng.uniform(*RESCAN_SPREAD)


@dataclass(eq=False)
class Inbox:
    config: InboxConfig
    flt: InboxFilter
    presence: InboxPresence = InboxPresence.AWAY  # until start() found it
    reason: str = "not looked at yet"
    anchor: Anchor | None = None  # where it was when last there
    mode: Mode = field(default_factory=lambda: Mode(EVENTS))
    next_rescan: float = 0.0  # time.monotonic() of its next full rescan
    # Cloud placeholders in it now (their bytes not on this machine): never opened or reported.
    waiting: set[Path] = field(default_factory=set)

    @property
    def root(self) -> Path:
        return self.flt.root

    @property
    def away(self) -> bool:
        return self.presence == InboxPresence.AWAY

    def state(self, now: float) -> InboxState:
        watched = not self.away
        return InboxState(
            self.root,
            self.presence,
            "" if watched else self.reason,
            self.mode.kind,
            self.mode.reason,
            len(self.waiting),
            max(0.0, self.next_rescan - now),
        )

    def forget_waiting_under(self, folder: Path) -> None:
        prefix = str(folder) + os.sep
        self.waiting = {p for p in self.waiting if p != folder and not str(p).startswith(prefix)}
