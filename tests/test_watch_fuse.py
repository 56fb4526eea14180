"""Inboxes that are not local disks, through a real Watcher: a real FUSE mount whose files change
underneath (no inotify event ever fires), the same mount unmounted and mounted again, an OS watch
that hits inotify's limit, and cloud placeholders that must never be opened."""

from __future__ import annotations

import errno
import os
import threading
import time
from pathlib import Path
from typing import Any

import fuse_memfs
import pytest
from test_watch import SETTLE, Collector, wait_until
from watchdog.observers import Observer

from gpen_watch.config import InboxConfig
from gpen_watch.platform import linux
from gpen_watch.watch import files as watch_files
from gpen_watch.watch.events import InboxPresence, InboxState
from gpen_watch.watch.watcher import Watcher

needs_fuse = pytest.mark.skipif(fuse_memfs.available() is not None, reason=str(fuse_memfs.available()))


class States:
    def __init__(self) -> None:
        self.seen: list[InboxState] = []
        self._lock = threading.Lock()

    def __call__(self, st: InboxState) -> None:
        with self._lock:
            self.seen.append(st)

    def last(self) -> InboxState | None:
        with self._lock:
            return self.seen[-1] if self.seen else None


@pytest.fixture
def mnt(tmp_path: Path):
    point = tmp_path / "share"
    point.mkdir()
    mounts: list[fuse_memfs.MemFs] = []

    def mount() -> fuse_memfs.MemFs:
        mounts.append(fuse_memfs.MemFs(point))
        return mounts[-1]

    yield point, mount
    for m in mounts:
        m.close()


@needs_fuse
def test_a_fuse_inbox_is_polled_by_itself_and_files_changed_underneath_are_taken(mnt: Any) -> None:
    point, mount = mnt
    fs = mount()
    col, states = Collector(), States()
    w = Watcher(
        [InboxConfig(point)],
        col.arrive,
        on_gone=col.left,
        on_inbox_state=states,
        settle_seconds=SETTLE,
        poll_interval=0.3,
        rescan_seconds=3600,
    )
    with w:
        wait_until(lambda: w.scans >= 1)
        (state,) = w.inbox_states()
        assert state.mode == "polling" and "fuse" in state.mode_reason
        assert state.presence == InboxPresence.WATCHED and state.next_rescan_s > 2000
        assert states.last() is not None and states.last().mode == "polling"  # type: ignore[union-attr]
        t0 = time.monotonic()
        fs.add("remote.jpg")  # written in the FUSE process's memory: no event on this machine
        wait_until(lambda: col.has("remote.jpg"))
        assert time.monotonic() - t0 < 30  # the poll found it, far before the hour's rescan
    assert col.gone == []


@needs_fuse
def test_an_unmounted_inbox_is_away_and_loses_nothing_when_it_is_back(mnt: Any) -> None:
    point, mount = mnt
    fs = mount()
    fs.add("a.jpg")
    fs.add("b.jpg")
    col, states = Collector(), States()
    w = Watcher(
        [InboxConfig(point)],
        col.arrive,
        on_gone=col.left,
        on_inbox_state=states,
        settle_seconds=SETTLE,
        poll_interval=0.3,
        rescan_seconds=3600,
    )
    with w:
        wait_until(lambda: col.names() == ["a.jpg", "b.jpg"])
        fs.unmount()  # the bare mount point is left: an empty folder
        wait_until(lambda: w.inbox_states()[0].presence == InboxPresence.AWAY)
        away = w.inbox_states()[0]
        assert "not mounted" in away.reason and str(point) in away.reason
        assert any(s.presence == InboxPresence.AWAY for s in states.seen)
        scans = w.scans
        time.sleep(1.0)  # proving a negative: several polls of the bare mount point report nothing
        assert col.gone == [] and w.scans == scans
        fs = mount()
        fs.add("a.jpg")  # the same files as before (same size and mtime)...
        fs.add("b.jpg")
        fs.add("c.jpg")  # ...and one written while it was away
        wait_until(lambda: w.inbox_states()[0].presence == InboxPresence.WATCHED)
        wait_until(lambda: col.has("c.jpg"))
        fs.add("d.jpg")  # and it is watched (polled) again
        wait_until(lambda: col.has("d.jpg"))
        assert w.inbox_states()[0].mode == "polling"
    assert col.names() == ["a.jpg", "b.jpg", "c.jpg", "d.jpg"]  # a and b not reported again
    assert col.gone == []


def test_the_inotify_watch_limit_falls_back_to_polling(inbox: Path, caplog: pytest.LogCaptureFixture) -> None:
    class FullObserver(Observer):  # type: ignore[misc,valid-type]
        """The OS observer as it is when fs.inotify.max_user_watches is used up."""

        def schedule(self, *args: Any, **kw: Any) -> Any:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    caplog.set_level("WARNING")
    col = Collector()
    w = Watcher(
        [InboxConfig(inbox)],
        col.arrive,
        settle_seconds=SETTLE,
        polling="never",
        poll_interval=0.2,
        rescan_seconds=3600,
        native_observer=FullObserver,
    )
    with w:
        wait_until(lambda: w.scans >= 1)
        (inbox / "a.jpg").write_bytes(b"x")
        wait_until(lambda: col.has("a.jpg"))
        (state,) = w.inbox_states()
    assert state.mode == "polling" and "fs.inotify.max_user_watches" in state.mode_reason
    lines = [r.getMessage() for r in caplog.records if "max_user_watches" in r.getMessage()]
    assert (
        len(lines) == 1 and str(inbox) in lines[0] and "sudo sysctl fs.inotify.max_user_watches=" in lines[0]
    )


@pytest.fixture
def inbox(tmp_path: Path) -> Path:
    p = tmp_path / "inbox"
    p.mkdir()
    return p


def test_placeholders_are_never_opened_and_are_taken_once_local(
    inbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    online_only: set[str] = {"cloud.jpg"}

    def fake_flags(self: object, st: os.stat_result) -> bool:
        # The OS's placeholder flag, faked at the platform edge only: decided by inode here.
        return any(os.path.exists(inbox / n) and os.lstat(inbox / n).st_ino == st.st_ino for n in online_only)

    opened: list[Path] = []
    real_open_check = watch_files.open_check

    def recording_open_check(path: Path) -> Any:
        opened.append(path)
        return real_open_check(path)

    monkeypatch.setattr(linux.LinuxPlatform, "cloud_placeholder", fake_flags)
    monkeypatch.setattr(watch_files, "open_check", recording_open_check)
    (inbox / "cloud.jpg").write_bytes(b"x" * 100)
    (inbox / ".IMG_7.jpg.icloud").write_bytes(b"bplist00")  # a real iCloud stub: no faking needed
    col, states = Collector(), States()
    with Watcher(
        [InboxConfig(inbox)],
        col.arrive,
        on_inbox_state=states,
        settle_seconds=SETTLE,
        poll_interval=0.2,
        rescan_seconds=3600,
    ) as w:
        (inbox / "local.jpg").write_bytes(b"y")
        wait_until(lambda: col.has("local.jpg"))
        wait_until(lambda: w.inbox_states()[0].waiting_download == 2)
        assert any(s.waiting_download == 2 for s in states.seen)
        time.sleep(SETTLE * 3)  # proving a negative: settled long since, still not taken
        assert col.names() == ["local.jpg"]
        assert opened == [inbox / "local.jpg"]
        online_only.clear()  # cloud.jpg's bytes are local now (the flag cleared)
        (inbox / "IMG_7.jpg").write_bytes(b"z")  # the download replaces the stub
        (inbox / ".IMG_7.jpg.icloud").unlink()
        wait_until(lambda: col.names() == ["IMG_7.jpg", "cloud.jpg", "local.jpg"])
        wait_until(lambda: w.inbox_states()[0].waiting_download == 0)
    assert inbox / ".IMG_7.jpg.icloud" not in opened
    assert sorted(p.name for p in opened) == ["IMG_7.jpg", "cloud.jpg", "local.jpg"]
