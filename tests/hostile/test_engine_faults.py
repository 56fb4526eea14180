"""Faults of the engine's inputs and device: a corrupt model file, a pickle that would run code, and
CUDA out-of-memory at the restore call. Each ends with the invariant."""

from __future__ import annotations

import pickle
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from gpen_watch.journal import Journal

from . import inputs, scenarios
from .harness import real_engine_args, write_atomic
from .invariants import Ledger, check

# Each starts the real engine in a service (tens of seconds on 2 cores): CI runs them after the
# README's command.
pytestmark = pytest.mark.slow

# --- broken model files -------------------------------------------------------------------------------


def test_corrupt_model_file_is_reported_not_used_and_refetch_suggested(
    services: Any, tiny_models: Any, tmp_path: Path
) -> None:
    from gpen_watch.catalog import registry

    model_dir = tmp_path / "models"
    shutil.copytree(tiny_models.model_dir, model_dir)
    detector = model_dir / registry.detector_spec("retinaface_mobile0.25").filename
    good = detector.read_bytes()
    detector.write_bytes(good[: len(good) // 3])  # a download cut short
    args = real_engine_args(tiny_models)
    args[args.index("--model-dir") + 1] = str(model_dir)
    svc = services(*args, restorer=None)
    ledger = Ledger(svc.inbox)
    write_atomic(svc.inbox / "waits.jpg", inputs.jpeg(seed=60))
    ledger.add("waits.jpg", inputs.jpeg(seed=60), {"done"})
    svc.start(wait=False)
    # The service finds the cut-short archive itself and holds the workers until the file changes.
    s = svc.wait(lambda s: bool(s["problem"]), 90, "corrupt file problem")
    problem = s["problem"] or ""
    assert str(detector) in problem, problem
    assert "corrupt" in problem, problem
    assert "models fetch" in problem, problem  # as this user runs it: the full path, or `python -m`
    s = svc.wait(lambda s: s["queue"]["queued"] == 1, what="photo queued")
    time.sleep(1.0)
    s = svc.status()
    assert s["workers"][0]["restarts"] == 0
    assert s["workers"][0]["state"] == "waiting for model files"  # held, not crash-looping
    _took, text = scenarios.status_cli(svc.env)
    assert "models fetch" in text, text
    assert (svc.inbox / "waits.jpg").exists()
    assert not svc.failed.exists()
    write_atomic(detector, good)  # fetched again: the workers start by themselves, no resume
    svc.wait_idle(1, timeout=120)
    assert svc.stop() == 0
    check(svc, ledger)


class _RunsCode:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.marker,))


def test_code_running_pickle_as_model_is_refused(services: Any, tiny_models: Any, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil-gpen.pth"
    evil.write_bytes(pickle.dumps({"generator.weight": _RunsCode(marker)}))
    args = real_engine_args(tiny_models)
    args[args.index("--model") + 1] = str(evil)
    svc = services(*args, restorer=None)
    ledger = Ledger(svc.inbox)
    write_atomic(svc.inbox / "waits.jpg", inputs.jpeg(seed=61))
    ledger.add("waits.jpg", inputs.jpeg(seed=61), {"done"})
    svc.start(wait=False)
    # The worker that could not load its file is held, waiting for the file to change, with why.
    s = svc.wait(
        lambda s: (
            bool(s["workers"])
            and s["workers"][0]["state"] in ("error", "waiting for model files")
            and bool(s["workers"][0]["error"])
        ),
        90,
        "worker error",
    )
    assert "refused to load" in (s["problem"] or ""), s["problem"]
    assert str(evil) in s["problem"], s["problem"]
    assert not marker.exists(), "the pickle's code ran"
    evil.write_bytes(tiny_models.gpen.read_bytes())  # replaced by a real weights file
    assert svc.request("resume")["ok"]
    svc.wait_idle(1, timeout=120)
    assert svc.stop() == 0
    assert not marker.exists()
    check(svc, ledger)


# --- out of GPU memory ----------------------------------------------------------------------------------


def test_cuda_oom_at_the_restore_call_takes_the_smaller_paths(services: Any, tiny_models: Any) -> None:
    svc = services(
        *real_engine_args(tiny_models),
        "--set",
        "workers.images_in_flight=2",
        restorer="hostile.hostile_restorer:OomRestorer",
        env={"HOSTILE_OOM_ABOVE": "600"},
    )
    ledger = Ledger(svc.inbox)
    cases = {
        # (The tiny random detector finds 3 "faces" in the astronaut at 512 px: a batch to shrink.)
        "fits.jpg": (inputs.jpeg(512, 512, seed=40), {"done"}, None),  # its batch of faces runs out
        "fits-at-half.jpg": (inputs.jpeg(1024, 1024, seed=41), {"done"}, None),  # detection at 1024 px does
        "never-fits.jpg": (
            inputs.jpeg(3000, 3000, seed=42),
            {"failed"},
            "out of GPU memory even at 25% scale",
        ),
    }
    for name, (data, expect, reason) in cases.items():
        write_atomic(svc.inbox / name, data)
        ledger.add(name, data, expect, reason)
    svc.start()
    svc.wait_idle(3, timeout=180)
    assert svc.stop() == 0
    check(svc, ledger)
    with Journal.open(readonly=True) as j:
        by_name = {job.source.name: job for state in ("done", "failed") for job in j.jobs(state)}
        retries = {
            n: [e.detail for e in j.history(job.id) if e.kind == "retry"] for n, job in by_name.items()
        }
    assert retries["fits.jpg"] == []
    assert retries["fits-at-half.jpg"] == ["out of GPU memory; retrying alone at 50% scale"]
    assert len(retries["never-fits.jpg"]) == 2  # 50 %, 25 %, then given up
    from PIL import Image

    with Image.open(by_name["fits-at-half.jpg"].output) as im:  # type: ignore[arg-type]
        assert im.size == (512, 512)
    assert any("pre-scaled" in n for n in by_name["fits-at-half.jpg"].notes)
    assert "face batch lowered to 1" in svc.log_text()
