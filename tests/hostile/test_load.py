"""Load: a thousand small photos dropped at once (written in place, as a bulk copy does).

Every one must be done exactly once (the invariant), the parent's memory must stay bounded, the
watcher must keep up, and `status` must stay quick throughout: it is timed over the control channel
every 0.2 s and as the `gpen-watch status` command every 3 s. The figures are printed (-s) for
docs/reliability.md. The copying stand-in restorer keeps the run about the service, not the
engine; the slow variant runs the real engine with the tiny models on CPU.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from . import scenarios
from .harness import real_engine_args

# The service parent's budget (under 150 MB); it must not grow with the queue.
PARENT_RSS_LIMIT_MB = 150.0
# The slowest status reply allowed while a thousand files arrive and complete.
STATUS_LIMIT_S = 2.0


@pytest.mark.slow
def test_thousand_photos_at_once_each_done_once_status_stays_quick(tmp_path: Path) -> None:
    figures = scenarios.load(tmp_path, images=1000, workers=2, timeout=400)
    print(f"load (copying stand-in): {figures}")
    assert figures["parent_rss_peak_mb"] < PARENT_RSS_LIMIT_MB, figures
    assert figures["status_max_s"] < STATUS_LIMIT_S, figures
    assert figures["status_cli_max_s"] is None or figures["status_cli_max_s"] < 10.0, figures


@pytest.mark.stress
def test_thousand_photos_through_the_real_engine(tmp_path: Path, tiny_models: Any) -> None:
    figures = scenarios.load(
        tmp_path,
        images=1000,
        workers=1,
        timeout=1800,
        restorer=None,
        extra=tuple(real_engine_args(tiny_models)),
    )
    print(f"load (real engine, tiny models, CPU): {figures}")
    assert figures["parent_rss_peak_mb"] < PARENT_RSS_LIMIT_MB, figures
    assert figures["status_max_s"] < STATUS_LIMIT_S, figures
