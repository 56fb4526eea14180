"""Ctrl-C and SIGTERM stop a busy `gpen-watch restore` promptly, with a message, and leave no
half-written result behind: a real subprocess, real photos, tiny models."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
from conftest import TinyModels, cli_env, restore_command

PHOTOS = 12


@pytest.fixture()
def big_album(tmp_path: Path, astronaut_bgr: np.ndarray) -> Path:
    """Photos big enough that the whole run takes far longer than the wait for its first result."""
    d = tmp_path / "album"
    d.mkdir()
    big = cv2.resize(astronaut_bgr, (2000, 2000), interpolation=cv2.INTER_CUBIC)
    for i in range(PHOTOS):
        cv2.imwrite(
            str(d / f"photo{i:02d}.jpg"), np.roll(big, 97 * i, axis=1), [cv2.IMWRITE_JPEG_QUALITY, 90]
        )
    return d


def _start(models: TinyModels, album: Path, out: Path, log: Path) -> subprocess.Popen[bytes]:
    cmd = [*restore_command(models, str(album), "-o", str(out)), "--no-parse", "--max-side", "0"]
    with log.open("wb") as fh:
        return subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=cli_env(models))


def _wait_for_first_result(proc: subprocess.Popen[bytes], out: Path) -> None:
    deadline = time.monotonic() + 240
    while not any(p.name.startswith("photo") for p in out.glob("*")):
        assert proc.poll() is None, "restore ended before it was signalled"
        assert time.monotonic() < deadline, "no result appeared"
        time.sleep(0.05)


@pytest.mark.parametrize(
    "signum",
    [
        pytest.param(signal.SIGINT, marks=pytest.mark.slow),
        pytest.param(signal.SIGTERM, marks=pytest.mark.slow),
    ],
    ids=["SIGINT", "SIGTERM"],
)
def test_signal_stops_a_busy_restore_cleanly(
    tiny_models: TinyModels, big_album: Path, tmp_path: Path, signum: int
) -> None:
    out, log = tmp_path / "out", tmp_path / "log.txt"
    proc = _start(tiny_models, big_album, out, log)
    try:
        _wait_for_first_result(proc, out)
        proc.send_signal(signum)
        # Generous: the point is that it exits at all while the engine is busy, not how fast.
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text()
    assert rc == 128 + signum, text
    name = "Ctrl-C (SIGINT)" if signum == signal.SIGINT else "SIGTERM"
    assert f"gpen-watch: stopped by {name}: " in text, text
    assert f"images restored into {out}" in text, text
    assert "run the same command again" in text, text
    assert "Traceback" not in text, text
    # Every file left is a whole, named result: no temp, no half-written image.
    files = sorted(out.iterdir())
    assert all(p.name.startswith("photo") and p.suffix == ".jpg" for p in files), files
    assert 1 <= len(files) < PHOTOS, "the run was not stopped mid-way"
    for p in files:
        pixels = cv2.imread(str(p))
        assert pixels is not None, p
        assert pixels.shape == (2000, 2000, 3), p
