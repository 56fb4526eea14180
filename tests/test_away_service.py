"""A real service whose inbox, or outbox, lives on a file system that is unmounted mid-drain and
mounted again: nothing fails, nothing is forgotten or treated as deleted, nothing is written into
the bare mount point, and every photo is restored exactly once when the folder is back.

The drive is a tmpfs (``tests/tmpfs.py``) bind-mounted onto the inbox or outbox: unmounting the bind
leaves the bare mount point (an empty folder of the disk under it) while the files stay on the
tmpfs, as they stay on an unplugged USB drive, and binding it again brings them back.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tmpfs
from service_harness import ServiceProcess, finished, services_fixture

from gpen_watch.journal import Journal
from gpen_watch.journal.states import JobState

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX mounts"),
    pytest.mark.skipif(not tmpfs.can_mount(), reason="mounting is not allowed here"),
]

PHOTOS = 12


class Service(ServiceProcess):
    start_timeout = 120.0
    wait_timeout = 120.0

    def __init__(self, root: Path, *extra: str, **kw: Any) -> None:
        super().__init__(root, *extra, restorer="fake_restorer:FakeRestorer", env={"FAKE_SLOW": "0.3"}, **kw)

    def wait_log(self, text: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log_text():
                return
            assert self.alive(), self.logs()
            time.sleep(0.1)
        raise AssertionError(f"the log never said {text!r}\n{self.logs()}")


services = services_fixture(Service)


def bind(disk: Path, where: Path) -> None:
    subprocess.run(["mount", "--bind", str(disk), str(where)], check=True)


def unbind(where: Path) -> None:
    # Lazy, as a drive pulled out under a worker that still holds a file open.
    subprocess.run(["umount", "-l", str(where)], check=True)


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with tmpfs.mounted(tmp_path / "disk", size="16m") as d:
        yield d


def drop(inbox: Path) -> None:
    for i in range(PHOTOS):
        # Each its own content (the same content would be a copy of the first result).
        (inbox / f"slow-{i:02d}.jpg").write_bytes(f"photo {i}".encode() * 100)


def no_loss(s: dict[str, Any]) -> None:
    q = s["queue"]
    assert q["failed"] == 0 and q["unsupported"] == 0 and q["gone"] == 0, q


def journal_agrees(svc: Service) -> None:
    with Journal.open() as journal:
        counts = journal.counts()
    assert counts[JobState.DONE] == PHOTOS, counts
    assert sum(counts.values()) == PHOTOS, counts  # one job per photo: none restored twice


def test_an_inbox_unmounted_mid_drain_loses_nothing(services: Any, tmp_path: Path, disk: Path) -> None:
    svc = services()
    svc.inbox.mkdir()
    bind(disk, svc.inbox)
    mounted = True
    try:
        svc.start()
        drop(svc.inbox)
        svc.wait(lambda s: s["queue"]["done"] >= 2, what="two photos restored")
        unbind(svc.inbox)
        mounted = False
        svc.wait_log(f"inbox {svc.inbox} is away")
        # The drain stops where it is: in flight ones come back to the queue, none fails.
        s = svc.wait(lambda s: s["queue"]["running"] == 0, what="nothing running while away")
        no_loss(s)
        waiting = s["queue"]["queued"]
        assert waiting > 0 and s["queue"]["done"] + waiting == PHOTOS, s["queue"]
        assert not any(svc.inbox.iterdir())  # the bare mount point: nothing was made there
        bind(disk, svc.inbox)
        mounted = True
        s = svc.wait(lambda s: s["queue"]["done"] == PHOTOS and finished(s) == PHOTOS, what="all restored")
        no_loss(s)
        assert sorted(p.name for p in svc.outbox.iterdir()) == [f"slow-{i:02d}.jpg" for i in range(PHOTOS)]
        svc.stop()
        journal_agrees(svc)
    finally:
        if mounted:
            unbind(svc.inbox)


def test_an_outbox_unmounted_mid_drain_is_never_written_into(
    services: Any, tmp_path: Path, disk: Path
) -> None:
    svc = services()
    svc.outbox.mkdir()
    bind(disk, svc.outbox)
    mounted = True
    try:
        svc.start()
        drop(svc.inbox)
        svc.wait(lambda s: s["queue"]["done"] >= 2, what="two photos restored")
        unbind(svc.outbox)
        mounted = False
        s = svc.wait(
            lambda s: any(p["about"] == "outbox" for p in s["problems"]) and s["queue"]["running"] == 0,
            what="the outbox said away, nothing running",
        )
        no_loss(s)
        problem = next(p["text"] for p in s["problems"] if p["about"] == "outbox")
        assert problem.startswith(
            f"outbox {svc.outbox} is away: the drive or share holding it is not mounted"
        )
        assert f"{s['queue']['queued']} photo(s) wait" in problem
        assert s["queue"]["queued"] > 0
        # Wait a few claim turns: still nothing in the bare mount point.
        svc.wait_log("photos wait in their inboxes until it is back")
        time.sleep(1.0)  # (a window for a wrong write to show, not a wait for an event)
        assert list(svc.outbox.iterdir()) == []
        bind(disk, svc.outbox)
        mounted = True
        s = svc.wait(lambda s: s["queue"]["done"] == PHOTOS and finished(s) == PHOTOS, what="all committed")
        no_loss(s)
        assert not any(p["about"] == "outbox" for p in s["problems"])
        assert sorted(p.name for p in disk.iterdir()) == [f"slow-{i:02d}.jpg" for i in range(PHOTOS)]
        svc.stop()
        journal_agrees(svc)
    finally:
        if mounted:
            unbind(svc.outbox)
