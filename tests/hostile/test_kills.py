"""Workers and the whole service SIGKILLed at random points, many times: every photo still ends
exactly once (the invariant). Each test prints its seed; rerun one with HOSTILE_SEED=<seed>. Longer
versions run with --runslow, and as long as you like with ``python -m tests.hostile.stress``.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from . import scenarios

ENDED = ("done", "failed", "unsupported", "duplicate")


def _rng(request: pytest.FixtureRequest) -> random.Random:
    seed = int(os.environ.get("HOSTILE_SEED", "0")) or random.randrange(1 << 30)
    print(f"{request.node.name}: seed {seed}")
    return random.Random(seed)


def _ended(run: scenarios.KillRun) -> int:
    return sum(run.counts.get(state, 0) for state in ENDED)


# --- kills ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_workers_sigkilled_at_random_points_every_image_done_once(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    run = scenarios.workers_killed_at_random(tmp_path, _rng(request), images=60, kills=12)
    print(run.figures())
    assert run.problems == [], "invariant violated:\n  " + "\n  ".join(run.problems) + "\n" + run.logs
    assert sum(run.kills.values()) >= 12, f"only {run.kills} kills landed"
    assert run.restarts >= 1, "no killed worker was restarted"
    # Every photo restored exactly once, however often its worker died under it.
    assert run.counts.get("done", 0) == run.expected
    assert run.stop_code == 0, run.logs


@pytest.mark.stress
def test_workers_sigkilled_many_times_long(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    run = scenarios.workers_killed_at_random(tmp_path, _rng(request), images=400, kills=120, timeout=900)
    print(run.figures())
    assert run.problems == [], "invariant violated:\n  " + "\n  ".join(run.problems) + "\n" + run.logs
    assert sum(run.kills.values()) >= 120, f"only {run.kills} kills landed"
    assert run.counts.get("done", 0) == run.expected
    assert run.stop_code == 0, run.logs


@pytest.mark.slow
def test_service_sigkilled_at_random_points_and_restarted(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    run = scenarios.service_killed_at_random(tmp_path, _rng(request), restarts=4, images=30)
    print(run.figures())
    assert run.kills == {"service": 4}
    assert run.problems == [], "invariant violated:\n  " + "\n  ".join(run.problems) + "\n" + run.logs
    # Every drop, photos, non-photos and copies dropped while the service was down, ended once.
    assert _ended(run) == run.expected
    assert run.counts.get("queued", 0) == run.counts.get("running", 0) == 0
    assert run.stop_code == 0, run.logs


@pytest.mark.stress
def test_service_sigkilled_many_times_long(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    run = scenarios.service_killed_at_random(tmp_path, _rng(request), restarts=25, images=150, timeout=900)
    print(run.figures())
    assert run.kills == {"service": 25}
    assert run.problems == [], "invariant violated:\n  " + "\n  ".join(run.problems) + "\n" + run.logs
    assert _ended(run) == run.expected
    assert run.stop_code == 0, run.logs
