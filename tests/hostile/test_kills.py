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


def _rng(request: pytest.FixtureRequest) -> random.Random:
    seed = int(os.environ.get("HOSTILE_SEED", "0")) or random.randrange(1 << 30)
    print(f"{request.node.name}: seed {seed}")
    return random.Random(seed)


# --- kills ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_workers_sigkilled_at_random_points_every_image_done_once(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    figures = scenarios.workers_killed_at_random(tmp_path, _rng(request), images=60, kills=12)
    print(figures)
    assert figures["restarts"] >= 1


@pytest.mark.stress
def test_workers_sigkilled_many_times_long(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    print(scenarios.workers_killed_at_random(tmp_path, _rng(request), images=400, kills=120, timeout=900))


@pytest.mark.slow
def test_service_sigkilled_at_random_points_and_restarted(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    print(scenarios.service_killed_at_random(tmp_path, _rng(request), restarts=4, images=30))


@pytest.mark.stress
def test_service_sigkilled_many_times_long(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    print(scenarios.service_killed_at_random(tmp_path, _rng(request), restarts=25, images=150, timeout=900))
