"""A first run without weights: a real `gpen-watch run` with the real engine, started on an empty model
folder. Photos wait in the queue, status names every missing file, and the workers start by
themselves once the files are copied in (no `gpen-watch resume`). The network is closed here, so the
downloads the service tries at start really fail.

The files copied in are the real architectures with random weights (GPEN-BFR-256 by its registry
name, the MobileNet detector from conftest.tiny_models), loaded through the users' code path.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import module_command
from service_harness import ServiceProcess, finished, queue_empty, services_fixture, write_atomic

from gpen_watch.catalog import registry
from gpen_watch.platform import paths

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and sockets")

GPEN256 = registry.get_spec("GPEN-BFR-256")
MOBILE = registry.get_spec("RetinaFace-MobileNet0.25")


class Service(ServiceProcess):
    start_timeout = 90.0
    wait_timeout = 60.0

    def __init__(self, root: Path, models: Path) -> None:
        super().__init__(
            root,
            "--model",
            "GPEN-BFR-256",
            "--model-dir",
            str(models),
            "--set",
            "restore.detector=retinaface_mobile0.25",
            "--set",
            "restore.use_parse=false",
            # GPEN's terms accepted: the downloads are tried (and fail: the network is closed);
            # the first run that asks for the yes is tests/test_model_terms_service.py's.
            "--set",
            "restore.accepted_terms=GPEN",
            "--device",
            "cpu",
            "--face-batch",
            "4",
            restorer=None,
        )
        self.models = models

    def wait_done(self, n: int, timeout: float = 180.0) -> dict[str, Any]:
        return self.wait(
            lambda s: finished(s) >= n and queue_empty(s),
            timeout,
            f"{n} jobs finished",
        )


services = services_fixture(Service)


@pytest.fixture(scope="module")
def gpen256_file(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """GPEN-BFR-256's real architecture with random weights, as the bytes of a .pth file."""
    import torch

    from gpen_watch.restore.engines import verify

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("gpen256") / GPEN256.filename
    torch.save(verify.build_model(GPEN256).state_dict(), path)
    return path.read_bytes()


def outbox_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.is_file()) if folder.exists() else []


@pytest.mark.slow
def test_first_run_without_weights_waits_then_restores_once_the_files_are_copied_in(
    services: Callable[..., Service],
    tmp_path: Path,
    tiny_models: Any,
    gpen256_file: bytes,
    grace_hopper_path: Path,
) -> None:
    models = tmp_path / "models"  # does not even exist yet
    svc = services(models)
    write_atomic(svc.inbox / "grace.jpg", grace_hopper_path.read_bytes())
    svc.start(wait=False)
    s = svc.wait(
        lambda s: bool(s["problem"]) and s["queue"]["queued"] == 1, what="the missing files' problem"
    )
    problem = s["problem"]
    # One problem names every missing file, its URL, its size and where it is looked for.
    for spec in (GPEN256, MOBILE):
        assert spec.filename in problem
        assert spec.url in problem
        assert spec.size_text in problem
    assert str(models) in problem
    assert str(paths.model_cache_dir()) in problem
    assert "the workers start by themselves as soon as every file is there" in problem
    assert (
        f"    {module_command('models fetch GPEN-BFR-256 RetinaFace-MobileNet0.25')}" in problem.splitlines()
    )
    # Why, in words: "no internet connection (could not look up ...)", never the resolver's own.
    assert "download failed: " in problem and "Name or service not known" not in problem
    assert s["models"]["state"] == "waiting"
    assert [(f["file"], f["state"]) for f in s["models"]["files"]] == [
        (GPEN256.filename, "missing"),
        (MOBILE.filename, "missing"),
    ]
    # The workers are held, not crash-looping on the missing files; the photo waits in the queue.
    assert all(w["state"] == "waiting for model files" and w["restarts"] == 0 for w in s["workers"])
    assert s["torch_loaded"] is False
    assert (svc.inbox / "grace.jpg").exists()

    write_atomic(models / GPEN256.filename, gpen256_file)
    write_atomic(models / MOBILE.filename, (tiny_models.model_dir / MOBILE.filename).read_bytes())
    s = svc.wait_done(1)
    assert outbox_files(svc.outbox) == ["grace.jpg"]
    assert s["queue"]["done"] == 1
    assert s["problem"] is None
    assert s["models"]["state"] == "ready"
    assert s["torch_loaded"] is False
    log = svc.log_text()
    assert "every model file is there now: starting the workers" in log
    assert "photos wait in the queue until the model files are there" in log
    # The log says the missing files once, a short line each, not each URL's failure.
    assert log.count("\n  to get them, run:\n") == 1
    assert log.count(f"\n  {GPEN256.filename} ({GPEN256.name}, {GPEN256.size_text})\n") == 1
    assert "could not download" not in log
    svc.stop()


@pytest.mark.slow
def test_corrupt_weights_are_announced_as_corrupt_and_a_good_copy_restarts_the_workers(
    services: Callable[..., Service],
    tmp_path: Path,
    tiny_models: Any,
    gpen256_file: bytes,
    grace_hopper_path: Path,
) -> None:
    models = tmp_path / "models"
    detector = (tiny_models.model_dir / MOBILE.filename).read_bytes()
    write_atomic(models / MOBILE.filename, detector)
    write_atomic(models / GPEN256.filename, gpen256_file[:5000])  # a copy cut short
    svc = services(models)
    write_atomic(svc.inbox / "grace.jpg", grace_hopper_path.read_bytes())
    svc.start(wait=False)
    # Caught by the parent from the file's container, before any worker loads it.
    s = svc.wait(
        lambda s: bool(s["problem"]) and s["queue"]["queued"] == 1, what="the corrupt file's problem"
    )
    assert s["problem"].startswith("corrupt model file: ")
    assert str(models / GPEN256.filename) in s["problem"]
    assert "truncated" in s["problem"]
    assert "missing" not in s["problem"]
    assert [f["state"] for f in s["models"]["files"]] == ["corrupt", "present"]

    # Whole, but not a GPEN generator: only loading it can tell. The workers start, cannot load it,
    # stop with the loader's message, and wait for the file to change.
    write_atomic(models / GPEN256.filename, detector)
    # The model gate takes the worker's error up on its next tick (about 1 s) and holds it.
    s = svc.wait(
        lambda s: (
            bool(s["workers"])
            and s["workers"][0]["state"] == "waiting for model files"
            and s["models"]["state"] == "workers_failed"
        ),
        120,
        "the worker's model error",
    )
    assert "does not match" in s["problem"]
    assert str(models / GPEN256.filename) in s["problem"]
    assert "as soon as a model file changes" in s["problem"]
    assert s["models"]["state"] == "workers_failed"
    assert s["queue"]["queued"] == 1
    assert s["queue"]["failed"] == 0

    # Paused meanwhile: the good copy still restarts the worker by itself, but it takes no work.
    assert svc.request("pause")["ok"]
    write_atomic(models / GPEN256.filename, gpen256_file)
    s = svc.wait(lambda s: s["workers"][0]["state"] == "idle", 120, "the worker loaded the good copy")
    assert s["paused"]
    assert s["queue"]["queued"] == 1
    assert s["problem"] is None
    assert s["models"]["state"] == "ready"
    assert svc.request("resume")["ok"]
    s = svc.wait_done(1)
    assert outbox_files(svc.outbox) == ["grace.jpg"]
    assert s["problem"] is None
    assert s["workers"][0]["restarts"] == 0
    svc.stop()
