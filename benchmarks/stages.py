"""Stage names, a thread-safe stage clock, and process memory readings shared by the modes."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

STAGES = ("decode", "prescale", "detect", "align", "restore", "paste", "encode")


class StageClock:
    """Seconds summed per stage, from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.totals: dict[str, float] = {}

    def add(self, stage: str, seconds: float) -> None:
        with self._lock:
            self.totals[stage] = self.totals.get(stage, 0.0) + seconds

    @contextlib.contextmanager
    def time(self, stage: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(stage, time.perf_counter() - t0)


def peak_rss_mb(pid: int | str = "self") -> float | None:
    """Peak resident memory (VmHWM) of a process, in MB; None where /proc cannot tell.

    Not getrusage: ru_maxrss survives exec, so a child started by a big parent would report the
    parent's peak.
    """
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None
