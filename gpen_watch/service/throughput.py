"""This run's counts and its rate for the status: photos done, redos, faces, failures, and how many
photos a minute the workers get through now.

The rate is what the overview's time left is computed from, so it must say what is happening now:
the photos that ended (done, redone or failed: each took its turn) over the last ``WINDOW_S`` of
time the workers held work, and 0 while they hold none (idle, paused, waiting for model files).
An average over the whole run would keep showing the last batch's speed for hours after it ended,
and a time left for a queue nobody works on.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from gpen_watch.service.status import Throughput

# The rate is measured over this much of the recent past.
WINDOW_S = 300.0


@dataclass
class ThroughputMeter:
    clock: Callable[[], float] = time.monotonic
    started: float = field(init=False)
    images: int = 0  # photos done this run (first runs), with or without a face
    redos: int = 0  # redos done this run, apart from the photos
    faces: int = 0
    failed: int = 0
    flagged: int = 0  # faces that may not look like the same person
    ended: deque[float] = field(default_factory=deque)  # when each run ended, within the window
    # The stretches the workers held work, within the window: (start, end), end None while busy.
    busy_spans: deque[tuple[float, float | None]] = field(default_factory=deque)

    def __post_init__(self) -> None:
        self.started = self.clock()

    def record(self, faces: int, *, redo: bool = False, flagged: int = 0) -> None:
        """A run ended with its result (``faces`` restored, ``flagged`` of them over
        restore.identity_threshold)."""
        if redo:
            self.redos += 1
        else:
            self.images += 1
        self.faces += faces
        self.flagged += flagged
        self.ended.append(self.clock())

    def record_failure(self) -> None:
        self.failed += 1
        self.ended.append(self.clock())

    def busy(self, is_busy: bool) -> None:
        """Whether the workers hold work now (the service loop says so every turn)."""
        now = self.clock()
        open_span = bool(self.busy_spans) and self.busy_spans[-1][1] is None
        if is_busy and not open_span:
            self.busy_spans.append((now, None))
        elif not is_busy and open_span:
            self.busy_spans[-1] = (self.busy_spans[-1][0], now)

    def summary(self) -> Throughput:
        now = self.clock()
        since = now - WINDOW_S
        while self.ended and self.ended[0] < since:
            self.ended.popleft()
        while self.busy_spans and (end := self.busy_spans[0][1]) is not None and end < since:
            self.busy_spans.popleft()
        busy_now = bool(self.busy_spans) and self.busy_spans[-1][1] is None
        busy_s = sum((end if end is not None else now) - max(start, since) for start, end in self.busy_spans)
        per_min = 0.0
        if busy_now and self.ended and busy_s > 0:
            per_min = round(len(self.ended) * 60.0 / busy_s, 1)
        return Throughput(
            images=self.images,
            redos=self.redos,
            faces=self.faces,
            failed=self.failed,
            flagged=self.flagged,
            images_per_min=per_min,
            # The same figure per second: a time left computed from either agrees with the other.
            images_per_s=round(per_min / 60.0, 4),
            window_s=WINDOW_S,
        )
