"""Per-inbox profiles through the real service: `gpen-watch run` on a config with two inboxes of
different settings, the real engine on the tiny random-weight models, one CPU worker."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import TINY_GPEN, TinyModels, cli_env, restore_command, same_up_to_rounding
from PIL import Image
from service_harness import (
    ServiceProcess,
    finished,
    queue_empty,
    real_engine_args,
    services_fixture,
    write_atomic,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and sockets")


class Service(ServiceProcess):
    """`gpen-watch run` on its own config file: inboxes ``inA`` and ``inB`` under the root, each
    with the profile the test writes, the real engine on the tiny models."""

    start_timeout = 90.0

    def __init__(self, root: Path, models: TinyModels, profiles: tuple[str, str]) -> None:
        super().__init__(root, *real_engine_args(models), restorer=None)
        self.inboxes = (root / "inA", root / "inB")
        self.config = root / "config.toml"
        root.mkdir(parents=True, exist_ok=True)
        entries = ",\n".join(
            f'  {{ path = "{inbox}", {profile} }}' for inbox, profile in zip(self.inboxes, profiles)
        )
        self.config.write_text(
            f'[watch]\noutbox = "{self.outbox}"\nsettle_seconds = {self.settle}\ninboxes = [\n{entries},\n]\n',
            encoding="utf-8",
        )

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "gpen_watch",
            "run",
            "--no-tray",
            "--config",
            str(self.config),
            "--stop-grace",
            "5",
            *self.extra,
        ]

    def wait_done(self, n: int, timeout: float = 180.0) -> dict[str, Any]:
        return self.wait(
            lambda s: finished(s) >= n and queue_empty(s),
            timeout,
            f"{n} jobs finished",
        )


services = services_fixture(Service, own_folders=True)


@pytest.fixture(scope="module")
def other_gpen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A second random-weight generator, the tiny one's layout with another seed."""
    import torch

    from gpen_watch.restore.nets.gpen_model import GPENConfig, build_gpen

    torch.manual_seed(1)
    path = tmp_path_factory.mktemp("other") / "tiny-gpen-64-b.pth"
    torch.save(build_gpen(GPENConfig(**TINY_GPEN)).state_dict(), path)
    return path


def pixels(path: Path) -> np.ndarray:
    with Image.open(path) as img:
        return np.asarray(img.convert("RGB"))


def restore_cli(models: TinyModels, src: Path, out: Path, *args: str) -> Path:
    """`gpen-watch restore` of ``src`` with the daemon's engine settings (``args`` last, so a
    --model there wins), into folder ``out``."""
    cmd = [*restore_command(models, str(src), "-o", str(out), "--no-parse", "--format", "png"), *args]
    proc = subprocess.run(cmd, env=cli_env(models), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return out / f"{src.stem}.png"


@pytest.mark.slow
def test_two_inboxes_with_their_own_strength_and_format(
    services: Callable[..., Service], tiny_models: TinyModels, grace_hopper_path: Path
) -> None:
    svc = services(
        tiny_models,
        ('restore = { strength = 0.0 }, output = { format = "png" }', 'output = { format = "jpeg" }'),
    )
    a, b = svc.inboxes
    photo = grace_hopper_path.read_bytes()
    write_atomic(a / "grace.jpg", photo)
    write_atomic(b / "grace.jpg", photo)  # the same content: restored again, not copied
    svc.start()
    s = svc.wait_done(2)
    assert s["queue"]["done"] == 2, svc.logs()
    outputs = sorted(p.name for p in svc.outbox.iterdir() if p.is_file())
    assert outputs == ["grace.jpg", "grace.png"], svc.logs()
    # Inbox A, strength 0: the photo's own pixels, as PNG.
    with Image.open(svc.outbox / "grace.png") as img:
        assert img.format == "PNG"
    assert np.array_equal(pixels(svc.outbox / "grace.png"), pixels(grace_hopper_path))
    # Inbox B: restored (the random generator changes the face), as JPEG.
    with Image.open(svc.outbox / "grace.jpg") as img:
        assert img.format == "JPEG"
    assert (svc.outbox / "grace.jpg").read_bytes() != photo
    log = svc.log_text()
    assert "strength 0.0, format png (inbox " in log, svc.logs()
    assert "inbox's settings differ: restored with its own" in log, svc.logs()
    # Dropped again into B once A's is done: not a copy of A's result (inbox A's settings differ).
    # It is B's own earlier result, copied: equal exactly.
    write_atomic(b / "again.jpg", photo)
    s = svc.wait_done(3)
    assert s["queue"]["done"] == 3, svc.logs()
    assert np.array_equal(pixels(svc.outbox / "again.jpg"), pixels(svc.outbox / "grace.jpg"))
    assert f"{b / 'again.jpg'}: same content as " in svc.log_text(), svc.logs()
    svc.stop()


@pytest.mark.slow
def test_a_twin_of_a_failed_photo_in_an_inbox_with_other_settings_is_tried_itself(
    services: Callable[..., Service], tiny_models: TinyModels, grace_hopper_path: Path, tmp_path: Path
) -> None:
    """Inbox A names a generator file that is whole but holds no generator, so its photo fails;
    the same photo in inbox B (the global model) waits for it, and is then restored with B's
    settings instead of failed unseen."""
    import torch

    wrong = tmp_path / "not-a-generator.pth"
    torch.save({"weight": torch.zeros(3)}, wrong)
    svc = services(
        tiny_models,
        (f'restore = {{ model = "{wrong}" }}, output = {{ format = "png" }}', 'output = { format = "png" }'),
    )
    a, b = svc.inboxes
    photo = grace_hopper_path.read_bytes()
    write_atomic(a / "grace.jpg", photo)
    write_atomic(b / "grace.jpg", photo)  # waits for A's, which fails
    svc.start()
    s = svc.wait_done(2)
    assert s["queue"]["failed"] == 1 and s["queue"]["done"] == 1, svc.logs()
    log = svc.log_text()
    assert "which failed, but its inbox's settings differ: restored with its own" in log, svc.logs()
    with Image.open(svc.outbox / "grace.png") as img:
        assert img.format == "PNG"
    errors = sorted(svc.root.glob("**/*.error.txt"))
    assert len(errors) == 1, (errors, svc.logs())
    reason = errors[0].read_text(encoding="utf-8")
    assert "cannot load the models of this photo's inbox settings" in reason  # A's own failure
    assert "same content as" not in reason
    svc.stop()


@pytest.mark.slow
def test_two_inboxes_with_their_own_models_share_one_worker(
    services: Callable[..., Service],
    tiny_models: TinyModels,
    other_gpen: Path,
    grace_hopper_path: Path,
    tmp_path: Path,
) -> None:
    # Inbox A takes the global model (the tiny one, from --model); B names its own.
    svc = services(
        tiny_models,
        (
            'output = { format = "png" }',
            f'restore = {{ model = "{other_gpen}" }}, output = {{ format = "png" }}',
        ),
    )
    a, b = svc.inboxes
    write_atomic(a / "one.jpg", grace_hopper_path.read_bytes())
    svc.start()
    pid = svc.status()["workers"][0]["pid"]
    s = svc.wait_done(1)
    # The status says which model sets the worker holds: the global one only, until B needs its own.
    own_set = {"networks": "tiny-gpen-64.pth", "inboxes": []}
    assert s["workers"][0]["model_sets"] == [own_set], s["workers"]
    # Different bytes (after the JPEG's end marker), the same picture: each inbox gets it once more.
    write_atomic(b / "two.jpg", grace_hopper_path.read_bytes() + b"\0")
    s = svc.wait_done(2)
    b_set = {"networks": "tiny-gpen-64-b.pth", "inboxes": [str(b)]}
    assert s["workers"][0]["model_sets"] == [own_set, b_set], s["workers"]
    shown = subprocess.run(
        [sys.executable, "-m", "gpen_watch", "status"], capture_output=True, text=True, timeout=60
    )
    assert f"models: tiny-gpen-64.pth, tiny-gpen-64-b.pth (inbox {b})" in shown.stdout, shown
    write_atomic(a / "three.jpg", grace_hopper_path.read_bytes() + b"\0\0")
    write_atomic(b / "four.jpg", grace_hopper_path.read_bytes() + b"\0\0\0")
    s = svc.wait_done(4)
    assert s["queue"]["done"] == 4, svc.logs()
    # One worker served both inboxes, never restarted.
    assert [w["pid"] for w in s["workers"]] == [pid]
    assert s["workers"][0]["restarts"] == 0
    svc.stop()

    own = restore_cli(tiny_models, grace_hopper_path, tmp_path / "own")
    other = restore_cli(tiny_models, grace_hopper_path, tmp_path / "other", "--model", str(other_gpen))
    # The service's worker and the command batch faces and share threads their own ways: the
    # same results up to rounding (conftest.same_up_to_rounding).
    assert not same_up_to_rounding(pixels(own), pixels(other))
    for name, expected in (("one", own), ("three", own), ("two", other), ("four", other)):
        assert same_up_to_rounding(pixels(svc.outbox / f"{name}.png"), pixels(expected)), name
    # Each model set was loaded once: the global one at start, the other on B's first photo.
    log = svc.log_text()
    assert log.count("model set tiny-gpen-64.pth, feathered mask loaded") == 1, svc.logs()
    assert log.count("model set tiny-gpen-64-b.pth, feathered mask loaded") == 1, svc.logs()
    assert "unloaded model set" not in log
    assert "model tiny-gpen-64-b.pth" in log or f"model {other_gpen}" in log, svc.logs()
