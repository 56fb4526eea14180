"""This run's counts and rates for the status: images, faces, failures, per minute and while busy."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from gpen_watch.service.status import Throughput


@dataclass
class ThroughputMeter:
    started: float = field(default_factory=time.monotonic)
    images: int = 0
    faces: int = 0
    failed: int = 0
    recent: deque[float] = field(default_factory=deque)  # completion times, last 60 s
    busy_s: float = 0.0
    busy_since: float | None = None

    def record(self, faces: int) -> None:
        now = time.monotonic()
        self.images += 1
        self.faces += faces
        self.recent.append(now)

    def busy(self, is_busy: bool) -> None:
        now = time.monotonic()
        if is_busy and self.busy_since is None:
            self.busy_since = now
        elif not is_busy and self.busy_since is not None:
            self.busy_s += now - self.busy_since
            self.busy_since = None

    def summary(self) -> Throughput:
        now = time.monotonic()
        while self.recent and now - self.recent[0] > 60.0:
            self.recent.popleft()
        busy = self.busy_s + (now - self.busy_since if self.busy_since is not None else 0.0)
        return Throughput(
            images=self.images,
            faces=self.faces,
            failed=self.failed,
            images_per_min=len(self.recent),
            images_per_s=round(self.images / busy, 3) if busy > 0 and self.images else 0.0,
        )
