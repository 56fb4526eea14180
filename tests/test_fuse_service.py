"""A real service whose inbox is a real FUSE mount (tests/fuse_memfs.py) that files appear in
underneath, the way a share shows another computer's copies: no event on this machine, yet the
photo is restored within seconds, not at the hour's rescan."""

from __future__ import annotations

import time
from pathlib import Path

import fuse_memfs
import pytest
from test_daemon import Service, files

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(fuse_memfs.available() is not None, reason=str(fuse_memfs.available())),
]


def test_a_photo_added_underneath_a_fuse_inbox_is_restored_without_waiting_for_the_rescan(
    tmp_path: Path,
) -> None:
    (tmp_path / "inbox").mkdir()
    fs = fuse_memfs.MemFs(tmp_path / "inbox")
    svc = Service(
        tmp_path,
        "--set",
        "watch.rescan_seconds=3600",
        "--set",
        "watch.poll_interval=0.5",
        "--set",
        "output.originals=keep",  # the share is the user's: nothing is moved out of it
    )
    try:
        s = svc.start().status()
        (inbox,) = s["inbox_states"]
        assert inbox["mode"] == "polling", inbox
        assert "fuse.gpentest" in inbox["mode_reason"], inbox
        t0 = time.monotonic()
        fs.add("from-the-studio-pc.jpg", size=4000)
        svc.wait_done(1, timeout=60.0)
        took = time.monotonic() - t0
        assert files(svc.outbox) == ["from-the-studio-pc.jpg"]
        assert took < 60.0  # the poll found it; the full rescan is an hour away
        assert "polling" in svc.log_text() and "fuse.gpentest" in svc.log_text()
        assert svc.stop() == 0
    finally:
        svc.close()
        fs.close()
