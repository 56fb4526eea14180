"""The restorer's memory accounting: readings from /proc, the budget and a photo's charge."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gpen_watch.restore.runtime import memory


def test_photo_charge_is_three_decoded_frames_after_pre_scale() -> None:
    assert memory.photo_bytes(4000, 3000) == 4000 * 3000 * 3 * 3
    # restore.max_side = 2000 halves both sides before anything is held.
    assert memory.photo_bytes(4000, 3000, max_side=2000) == 2000 * 1500 * 3 * 3
    assert memory.photo_bytes(1000, 800, max_side=4096) == 1000 * 800 * 3 * 3  # never enlarged


def test_budget_auto_is_a_quarter_of_memory_with_a_floor() -> None:
    assert memory.resolve_budget_mb(3000) == 3000
    total = memory.physical_memory_mb()
    auto = memory.resolve_budget_mb(0)
    assert auto >= 2048
    if total:
        assert auto == max(2048, total // 4)


_RETAINED = """
import numpy as np
from gpen_watch.restore.runtime import device, memory
assert device.tune_malloc_for_inference()
base = memory.rss().now_mb
block = np.ones(256 << 20, dtype=np.uint8)  # 256 MB, touched
del block
kept = memory.rss().now_mb - base
assert memory.give_back_free_memory()
back = memory.rss().now_mb - base
print(round(kept), round(back))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and glibc are Linux's")
@pytest.mark.slow
def test_tuned_allocator_keeps_freed_memory_until_it_is_given_back() -> None:
    """What a restorer over its budget relies on: with the allocator tuned for inference a freed
    256 MB block stays resident, and give_back_free_memory returns it."""
    before = memory.rss()
    assert before is not None
    assert 0 < before.now_mb <= before.peak_mb
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_TUNABLES"))}
    out = subprocess.run(
        [sys.executable, "-c", _RETAINED], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    kept, back = int(out[0]), int(out[1])
    assert kept >= 250  # freed, but still resident
    assert back < 20  # handed back
