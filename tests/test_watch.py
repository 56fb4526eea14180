"""Finding complete arrivals: filters, the settle rule, and a real watchdog observer on a real folder."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gpen_watch.config import Config, InboxConfig, WatchConfig
from gpen_watch.imaging.formats import SUPPORTED_EXTENSIONS
from gpen_watch.watch.filters import InboxFilter, ignored_name, supported_extensions
from gpen_watch.watch.settle import EMPTY_FILE_GRACE_SECONDS, SettleTracker, open_check
from gpen_watch.watch.watcher import Arrival, Watcher

SETTLE = 0.2
TIMEOUT = 10.0


def wait_until(pred: Callable[[], bool], timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


class Collector:
    """Records arrivals and gone paths from the watcher thread."""

    def __init__(self) -> None:
        self.arrivals: list[Arrival] = []
        self.gone: list[Path] = []
        self.times: dict[Path, float] = {}
        self._lock = threading.Lock()

    def arrive(self, a: Arrival) -> None:
        with self._lock:
            self.arrivals.append(a)
            self.times.setdefault(a.path, time.monotonic())

    def left(self, p: Path) -> None:
        with self._lock:
            self.gone.append(p)

    def names(self) -> list[str]:
        with self._lock:
            return sorted(a.path.name for a in self.arrivals)

    def has(self, name: str) -> bool:
        return name in self.names()


@pytest.fixture
def inbox(tmp_path: Path) -> Path:
    p = tmp_path / "inbox"
    p.mkdir()
    return p


def make_watcher(inbox: Path, col: Collector, **kw) -> Watcher:
    kw.setdefault("settle_seconds", SETTLE)
    kw.setdefault("rescan_seconds", 600.0)
    recursive = kw.pop("recursive", True)
    return Watcher([InboxConfig(inbox, recursive=recursive)], col.arrive, on_gone=col.left, **kw)


# --- filters ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "a.jpg.part",
        "a.crdownload",
        "x.TMP",
        "a.jpg.download",
        "~a.jpg",
        ".~lock.a.jpg#",
        ".DS_Store",
        "Thumbs.db",
        "desktop.ini",
        ".syncthing.a.jpg.tmp",
        "a.jpg.!sync",
        ".dropbox",
        ".dropbox.cache",
        "~$report.docx",
        ".a.swp",
        "a.swp",
        ".hidden.jpg",
        ".a.jpg.gpen-tmp-12",
        "a.jpg.partial",
        "a.filepart",
    ],
)
def test_temp_hidden_and_system_names_are_ignored(name: str) -> None:
    assert ignored_name(name) is not None


@pytest.mark.parametrize(
    "name", ["a.jpg", "IMG_0001.JPG", "photo (1).png", "notes.txt", "a~b.jpg", "über.webp"]
)
def test_ordinary_names_are_not_ignored(name: str) -> None:
    assert ignored_name(name) is None


def test_supported_extensions_fall_back_until_imaging_exists() -> None:
    exts = supported_extensions()
    assert ".jpg" in exts
    assert ".png" in exts
    assert all(e.startswith(".") and e == e.lower() for e in exts)
    assert ".jpg" in SUPPORTED_EXTENSIONS


def test_filter_classifies_files_and_never_follows_or_opens_special_ones(tmp_path: Path, inbox: Path) -> None:
    outbox = inbox / "outbox"
    (inbox / "sub").mkdir()
    outbox.mkdir()
    (inbox / "a.JPG").write_bytes(b"x")
    (inbox / "notes.txt").write_text("hi")
    (inbox / "sub" / "b.png").write_bytes(b"x")
    (outbox / "c.jpg").write_bytes(b"x")
    (tmp_path / "outside.jpg").write_bytes(b"x")
    (inbox / "link.jpg").symlink_to(tmp_path / "outside.jpg")
    os.mkfifo(inbox / "pipe.jpg")
    (inbox / "folder.jpg").mkdir()
    flt = InboxFilter(inbox, True, [outbox], SUPPORTED_EXTENSIONS)
    assert flt.ignore_reason(inbox / "a.JPG") is None
    assert flt.is_supported(inbox / "a.JPG")
    assert flt.ignore_reason(inbox / "notes.txt") is None
    assert not flt.is_supported(inbox / "notes.txt")
    assert flt.ignore_reason(inbox / "sub" / "b.png") is None
    assert flt.ignore_reason(outbox / "c.jpg") == "the service's own folder"
    assert "symbolic link" in (flt.ignore_reason(inbox / "link.jpg") or "")
    assert "named pipe" in (flt.ignore_reason(inbox / "pipe.jpg") or "")
    assert flt.ignore_reason(inbox / "folder.jpg") == "folder"
    assert flt.ignore_reason(tmp_path / "outside.jpg") == "outside the inbox"
    assert flt.ignore_reason(inbox / ".git" / "x.jpg") is not None
    assert flt.dir_reason(inbox / "sub") is None
    assert flt.dir_reason(outbox) is not None
    flat = InboxFilter(inbox, False, [], SUPPORTED_EXTENSIONS)
    assert flat.ignore_reason(inbox / "sub" / "b.png") == "outside the inbox"
    assert flat.dir_reason(inbox / "sub") == "inbox is not recursive"


def test_outbox_reached_through_a_symlinked_path_is_still_excluded(tmp_path: Path, inbox: Path) -> None:
    (inbox / "out").mkdir()
    alias = tmp_path / "alias"
    alias.symlink_to(inbox / "out")
    (inbox / "out" / "x.jpg").write_bytes(b"x")
    flt = InboxFilter(inbox, True, [alias], SUPPORTED_EXTENSIONS)
    assert flt.ignore_reason(inbox / "out" / "x.jpg") == "the service's own folder"


# --- the settle rule, without sleeping ----------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_settle_tracker_takes_a_file_only_after_a_quiet_period() -> None:
    clock = Clock()
    tr = SettleTracker(1.0, clock)
    p = Path("/in/a.jpg")
    tr.observe(p, 100, 1.0)
    assert tr.due() == []
    assert tr.next_due() == 101.0
    clock.t = 100.6
    tr.observe(p, 200, 2.0)  # still growing: the wait starts over
    clock.t = 101.2
    assert tr.due() == []
    clock.t = 101.7
    assert tr.due() == [p]
    assert not tr.confirm(p, 250, 2.5)  # grew again when re-checked
    clock.t = 102.8
    assert tr.due() == [p]
    assert tr.confirm(p, 250, 2.5)
    assert p not in tr
    assert len(tr) == 0
    assert tr.next_due() is None


def test_settle_tracker_same_observation_does_not_restart_and_postpone_does() -> None:
    clock = Clock()
    tr = SettleTracker(1.0, clock)
    p = Path("/in/a.jpg")
    tr.observe(p, 1, 1.0)
    clock.t = 100.9
    tr.observe(p, 1, 1.0)  # an event without a change
    clock.t = 101.0
    assert tr.due() == [p]
    tr.postpone(p)  # e.g. still locked by the copying program
    assert tr.due() == []
    assert tr.next_due() == 102.0


def test_settle_tracker_forgets_folders_and_zero_settle_is_immediate() -> None:
    clock = Clock()
    tr = SettleTracker(0.0, clock)
    tr.observe(Path("/in/d/a.jpg"), 1, 1.0)
    tr.observe(Path("/in/d/e/b.jpg"), 1, 1.0)
    tr.observe(Path("/in/c.jpg"), 1, 1.0)
    assert len(tr.due()) == 3
    assert sorted(tr.forget_under(Path("/in/d"))) == [Path("/in/d/a.jpg"), Path("/in/d/e/b.jpg")]
    assert tr.confirm(Path("/in/c.jpg"), 1, 1.0)
    with pytest.raises(ValueError):
        SettleTracker(-1)


def test_settle_tracker_waits_longer_for_an_empty_file_and_normally_once_it_has_content() -> None:
    clock = Clock()
    tr = SettleTracker(1.0, clock, empty_grace_seconds=30.0)
    empty, stalled, photo = Path("/in/empty.jpg"), Path("/in/stalled.jpg"), Path("/in/photo.jpg")
    tr.observe(empty, 0, 1.0)
    tr.observe(stalled, 0, 1.0)
    tr.observe(photo, 10, 1.0)
    assert tr.next_due() == 101.0
    clock.t = 101.0
    assert tr.due() == [photo]
    assert tr.confirm(photo, 10, 1.0)
    assert not tr.confirm(empty, 0, 1.0)  # a copier that created it may not have written yet
    assert tr.next_due() == 130.0
    clock.t = 120.0
    tr.observe(stalled, 0, 1.0)  # seen again, still empty: the grace does not start over
    tr.observe(stalled, 4096, 2.0)  # the copy resumed: from now on, the normal settle time
    assert tr.next_due() == 121.0
    clock.t = 121.0
    assert tr.due() == [stalled]
    assert tr.confirm(stalled, 4096, 2.0)
    clock.t = 129.9
    assert tr.due() == []
    clock.t = 130.0
    assert tr.due() == [empty]
    assert tr.confirm(empty, 0, 1.0)  # empty all along: taken (and set aside)
    assert len(tr) == 0
    # A settle time longer than the grace applies to empty files too; the default grace is 30 s.
    assert SettleTracker(60.0, clock, empty_grace_seconds=30.0).empty_settle_seconds == 60.0
    assert SettleTracker(1.0, clock).empty_settle_seconds == EMPTY_FILE_GRACE_SECONDS == 30.0
    with pytest.raises(ValueError):
        SettleTracker(1.0, empty_grace_seconds=-1)


def test_open_check(tmp_path: Path) -> None:
    f = tmp_path / "a.jpg"
    f.write_bytes(b"x")
    assert open_check(f) == "ok"
    assert open_check(tmp_path / "missing.jpg") == "gone"
    link = tmp_path / "l.jpg"
    link.symlink_to(f)
    assert open_check(link) == "unreadable"  # O_NOFOLLOW: never opened through a link
    if os.geteuid() != 0:  # root reads anything
        f.chmod(0)
        assert open_check(f) == "unreadable"


# --- a real observer ----------------------------------------------------------------------------


def test_slow_copy_is_taken_only_when_complete(inbox: Path) -> None:
    col = Collector()
    chunk = os.urandom(64 * 1024)
    finished: list[float] = []

    def slow_copy() -> None:
        with open(inbox / "slow.jpg", "wb") as f:
            for _ in range(13):  # ~2 s in pauses well under the settle time (a loaded CI box stalls)
                f.write(chunk)
                f.flush()
                time.sleep(0.15)
        finished.append(time.monotonic())

    with make_watcher(inbox, col, settle_seconds=0.5):
        writer = threading.Thread(target=slow_copy)
        writer.start()
        wait_until(lambda: col.has("slow.jpg"))
        writer.join()
    assert len(col.arrivals) == 1
    a = col.arrivals[0]
    assert a.size == 13 * len(chunk)
    assert a.rel == Path("slow.jpg")
    assert a.supported
    assert col.times[a.path] >= finished[0]


def test_slow_copy_from_a_subprocess_is_taken_only_when_complete(inbox: Path) -> None:
    import subprocess
    import sys

    col = Collector()
    script = (
        "import sys, time\n"
        "with open(sys.argv[1], 'wb') as f:\n"
        "    for _ in range(13):\n"
        "        f.write(b'x' * 50000); f.flush(); time.sleep(0.15)\n"
    )
    with make_watcher(inbox, col, settle_seconds=0.5):
        proc = subprocess.Popen([sys.executable, "-c", script, str(inbox / "sub.jpg")])
        wait_until(lambda: col.has("sub.jpg"))
        assert proc.poll() is not None, "taken while the writer was still writing"
    assert [a.size for a in col.arrivals] == [650000]


def test_empty_file_waits_for_the_grace_and_one_that_gets_content_is_taken_whole(inbox: Path) -> None:
    col = Collector()
    grace = 3.0  # 30 s in the service; shortened here
    with make_watcher(inbox, col, empty_grace_seconds=grace) as w:
        start = time.monotonic()
        (inbox / "empty.jpg").touch()
        (inbox / "stalled.jpg").touch()  # a copier that created its file, then stalls...
        (inbox / "photo.jpg").write_bytes(b"p")
        wait_until(lambda: col.has("photo.jpg"))
        time.sleep(4 * SETTLE)  # well past the normal settle time: the empty files still wait
        assert col.names() == ["photo.jpg"]
        assert w.pending == 2
        (inbox / "stalled.jpg").write_bytes(b"s" * 1000)  # ...and resumes within the grace
        wait_until(lambda: col.has("empty.jpg"))
        assert time.monotonic() - start >= grace
    # The resumed copy was taken once, whole, after the normal settle time; the empty one at the end.
    sizes = {a.path.name: a.size for a in col.arrivals}
    assert sizes == {"photo.jpg": 1, "stalled.jpg": 1000, "empty.jpg": 0}
    assert len(col.arrivals) == 3
    assert col.times[inbox / "stalled.jpg"] < col.times[inbox / "empty.jpg"]


def test_files_present_before_start_are_found_by_the_startup_scan(inbox: Path) -> None:
    (inbox / "a" / "b").mkdir(parents=True)
    (inbox / "one.jpg").write_bytes(b"1")
    (inbox / "a" / "b" / "two.png").write_bytes(b"22")
    col = Collector()
    with make_watcher(inbox, col) as w:
        wait_until(lambda: len(col.arrivals) == 2)
        assert w.scans >= 1
    rels = sorted(str(a.rel) for a in col.arrivals)
    assert rels == ["a/b/two.png", "one.jpg"]
    assert all(a.inbox.path == inbox for a in col.arrivals)


def test_file_renamed_into_the_inbox_is_an_arrival_and_moving_out_is_gone(
    tmp_path: Path, inbox: Path
) -> None:
    outside = tmp_path / "downloads"
    outside.mkdir()
    (outside / "x.jpg").write_bytes(b"photo")
    col = Collector()
    with make_watcher(inbox, col):
        os.rename(outside / "x.jpg", inbox / "x.jpg")
        wait_until(lambda: col.has("x.jpg"))
        os.rename(inbox / "x.jpg", outside / "x.jpg")
        wait_until(lambda: col.gone == [inbox / "x.jpg"])


def test_temp_name_is_ignored_until_renamed(inbox: Path) -> None:
    col = Collector()
    with make_watcher(inbox, col):
        (inbox / "photo.jpg.crdownload").write_bytes(b"partial")
        (inbox / "~$lock.jpg").write_bytes(b"x")
        (inbox / "sentinel.jpg").write_bytes(b"s")  # written last: when it is taken, the others settled too
        wait_until(lambda: col.has("sentinel.jpg"))
        assert col.names() == ["sentinel.jpg"]
        os.rename(inbox / "photo.jpg.crdownload", inbox / "photo.jpg")  # the download finished
        wait_until(lambda: col.has("photo.jpg"))
    assert col.names() == ["photo.jpg", "sentinel.jpg"]


def test_symlinks_fifos_hidden_files_and_the_outbox_are_ignored(tmp_path: Path, inbox: Path) -> None:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "s.jpg").write_bytes(b"s")
    cfg = Config(
        watch=WatchConfig(inboxes=[InboxConfig(inbox)], outbox=inbox / "outbox", settle_seconds=SETTLE)
    )
    col = Collector()
    with Watcher.from_config(cfg, col.arrive, col.left):
        (inbox / "outbox").mkdir()
        (inbox / "outbox" / "result.jpg").write_bytes(b"r")
        (inbox / "failed").mkdir()  # failed/ beside an outbox that sits in the inbox
        (inbox / "failed" / "bad.jpg").write_bytes(b"b")
        (inbox / "link.jpg").symlink_to(secret / "s.jpg")
        (inbox / "linkdir").symlink_to(secret)
        os.mkfifo(inbox / "pipe.jpg")
        (inbox / ".hidden.jpg").write_bytes(b"h")
        (inbox / ".cache").mkdir()
        (inbox / ".cache" / "c.jpg").write_bytes(b"c")
        (inbox / "Thumbs.db").write_bytes(b"t")
        (inbox / "sentinel.jpg").write_bytes(b"s")
        wait_until(lambda: col.has("sentinel.jpg"))
        assert col.names() == ["sentinel.jpg"]


def test_links_and_pipes_are_left_alone_logged_once_each_and_counted(
    tmp_path: Path, inbox: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="gpen_watch.watch.watcher")
    (tmp_path / "elsewhere.jpg").write_bytes(b"e")
    (inbox / "sub").mkdir()
    col = Collector()
    with make_watcher(inbox, col, rescan_seconds=0.1) as w:
        (inbox / "link.jpg").symlink_to(tmp_path / "elsewhere.jpg")
        (inbox / "linkdir").symlink_to(tmp_path)
        os.mkfifo(inbox / "pipe.jpg")
        os.mkfifo(inbox / "sub" / "deep.raw")
        os.mkfifo(inbox / ".hidden-pipe")  # ignored for its name, as any dot name: not counted
        (inbox / "sentinel.jpg").write_bytes(b"s")
        wait_until(lambda: col.has("sentinel.jpg"))
        scans = w.scans
        wait_until(lambda: w.scans >= scans + 3)
        assert w.special_files == 4
        lines = sorted(r.getMessage() for r in caplog.records if "left alone" in r.getMessage())
        assert lines == [
            f"{inbox / 'link.jpg'}: left alone: symbolic link (not followed); only regular files are taken (copy the photo itself in)",
            f"{inbox / 'linkdir'}: left alone: symbolic link (not followed); only regular files are taken (copy the photo itself in)",
            f"{inbox / 'pipe.jpg'}: left alone: named pipe (not opened); only regular files are taken (copy the photo itself in)",
            f"{inbox / 'sub' / 'deep.raw'}: left alone: named pipe (not opened); only regular files are taken (copy the photo itself in)",
        ]
        (inbox / "link.jpg").unlink()
        wait_until(lambda: w.special_files == 3)
    assert col.names() == ["sentinel.jpg"]


def test_non_images_are_reported_as_unsupported_not_dropped(inbox: Path) -> None:
    col = Collector()
    with make_watcher(inbox, col):
        (inbox / "notes.txt").write_text("not a photo")
        (inbox / "folder.jpg").mkdir()  # a folder with a photo's name is walked, not taken
        (inbox / "folder.jpg" / "in.jpg").write_bytes(b"x")
        wait_until(lambda: len(col.arrivals) == 2)
    by_name = {a.path.name: a for a in col.arrivals}
    assert not by_name["notes.txt"].supported
    assert by_name["in.jpg"].supported


def test_folder_moved_into_the_inbox_brings_its_files(tmp_path: Path, inbox: Path) -> None:
    album = tmp_path / "album"
    (album / "day1").mkdir(parents=True)
    (album / "a.jpg").write_bytes(b"a")
    (album / "day1" / "b.jpg").write_bytes(b"b")
    col = Collector()
    with make_watcher(inbox, col) as w:
        wait_until(lambda: w.scans >= 1)
        os.rename(album, inbox / "album")
        wait_until(lambda: len(col.arrivals) == 2)
    assert sorted(str(a.rel) for a in col.arrivals) == ["album/a.jpg", "album/day1/b.jpg"]


def test_non_recursive_inbox_takes_only_top_level_files(inbox: Path) -> None:
    (inbox / "sub").mkdir()
    (inbox / "sub" / "deep.jpg").write_bytes(b"d")
    col = Collector()
    with make_watcher(inbox, col, recursive=False):
        (inbox / "sub" / "deep2.jpg").write_bytes(b"d")
        (inbox / "top.jpg").write_bytes(b"t")
        wait_until(lambda: col.has("top.jpg"))
    assert col.names() == ["top.jpg"]


def test_each_file_is_reported_once_across_rescans_and_again_when_changed(inbox: Path) -> None:
    col = Collector()
    (inbox / "a.jpg").write_bytes(b"1")
    with make_watcher(inbox, col, rescan_seconds=0.1) as w:
        wait_until(lambda: col.has("a.jpg"))
        scans = w.scans
        wait_until(lambda: w.scans >= scans + 3)
        assert len(col.arrivals) == 1
        (inbox / "a.jpg").write_bytes(b"22")  # edited in place afterwards
        wait_until(lambda: len(col.arrivals) == 2)
    assert [a.size for a in col.arrivals] == [1, 2]


def test_hidden_photo_is_left_alone_and_reported_once(inbox: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A dot name is never taken, but a photo under one is reported in the log once per path, after it
    settles; other hidden and temp names (and files in hidden folders) are not reported at all."""
    caplog.set_level("INFO", logger="gpen_watch.watch.watcher")
    col = Collector()
    (inbox / ".before.jpg").write_bytes(b"1")
    with make_watcher(inbox, col, rescan_seconds=0.1) as w:
        (inbox / ".after.png").write_bytes(b"2")
        (inbox / ".x.jpg.part").write_bytes(b"3")
        (inbox / ".DS_Store").write_bytes(b"4")
        (inbox / ".cache").mkdir()
        (inbox / ".cache" / ".deep.jpg").write_bytes(b"5")
        (inbox / "sentinel.jpg").write_bytes(b"s")
        wait_until(lambda: col.has("sentinel.jpg"))
        scans = w.scans
        wait_until(lambda: w.scans >= scans + 3)

        def noted() -> list[str]:
            return sorted(
                r.getMessage().split(":")[0].rsplit("/", 1)[-1]
                for r in caplog.records
                if "hidden files" in r.getMessage()
            )

        wait_until(lambda: noted() == [".after.png", ".before.jpg"])
        os.unlink(inbox / ".before.jpg")  # gone, then back: a new file, reported again
        wait_until(lambda: w.scans >= scans + 5)
        (inbox / ".before.jpg").write_bytes(b"1")
        wait_until(lambda: noted() == [".after.png", ".before.jpg", ".before.jpg"])
        wait_until(lambda: w.scans >= scans + 8)
        assert noted() == [".after.png", ".before.jpg", ".before.jpg"]
    assert col.names() == ["sentinel.jpg"]
    assert col.gone == []
    assert (inbox / ".after.png").read_bytes() == b"2"


def test_periodic_rescan_finds_files_whose_events_were_lost(inbox: Path) -> None:
    # A polling observer that never polls stands in for an observer that dropped its events.
    col = Collector()
    with make_watcher(inbox, col, polling=True, poll_interval=3600, rescan_seconds=0.3) as w:
        wait_until(lambda: w.scans >= 1)
        (inbox / "late.jpg").write_bytes(b"x")
        wait_until(lambda: col.has("late.jpg"))
        os.unlink(inbox / "late.jpg")
        wait_until(lambda: col.gone == [inbox / "late.jpg"])


def test_polling_observer_sees_new_files(inbox: Path) -> None:
    col = Collector()
    with make_watcher(inbox, col, polling=True, poll_interval=0.2) as w:
        wait_until(lambda: w.scans >= 1)
        (inbox / "share.jpg").write_bytes(b"x")
        wait_until(lambda: col.has("share.jpg"))


@pytest.mark.parametrize("polling", [False, True])
def test_stop_returns_within_a_second(inbox: Path, polling: bool) -> None:
    col = Collector()
    w = make_watcher(inbox, col, polling=polling, poll_interval=5.0)
    w.start()
    (inbox / "a.jpg").write_bytes(b"x")
    wait_until(lambda: col.has("a.jpg"))
    t0 = time.monotonic()
    w.stop()
    assert time.monotonic() - t0 < 1.0
    (inbox / "b.jpg").write_bytes(b"x")
    time.sleep(SETTLE * 2)  # proving a negative: nothing may be reported after stop()
    assert col.names() == ["a.jpg"]


def test_missing_inbox_is_watched_once_it_appears(tmp_path: Path) -> None:
    later = tmp_path / "later"
    col = Collector()
    with make_watcher(later, col, rescan_seconds=0.2) as w:
        wait_until(lambda: w.scans >= 1)
        later.mkdir()
        (later / "a.jpg").write_bytes(b"x")
        wait_until(lambda: col.has("a.jpg"))


def test_nested_inbox_owns_its_files(tmp_path: Path, inbox: Path) -> None:
    inner = inbox / "inner"
    inner.mkdir()
    col = Collector()
    w = Watcher(
        [InboxConfig(inbox), InboxConfig(inner)], col.arrive, settle_seconds=SETTLE, rescan_seconds=600
    )
    with w:
        (inner / "a.jpg").write_bytes(b"x")
        (inbox / "b.jpg").write_bytes(b"x")
        wait_until(lambda: len(col.arrivals) == 2)
    owners = {a.path.name: (a.inbox.path, a.rel) for a in col.arrivals}
    assert owners == {"a.jpg": (inner, Path("a.jpg")), "b.jpg": (inbox, Path("b.jpg"))}


def test_a_raising_callback_does_not_kill_the_watcher(inbox: Path) -> None:
    got: list[str] = []

    def flaky(a: Arrival) -> None:
        got.append(a.path.name)
        if a.path.name == "boom.jpg":
            raise RuntimeError("callback bug")

    with Watcher([InboxConfig(inbox)], flaky, settle_seconds=SETTLE, rescan_seconds=600):
        (inbox / "boom.jpg").write_bytes(b"x")
        wait_until(lambda: "boom.jpg" in got)
        (inbox / "after.jpg").write_bytes(b"x")
        wait_until(lambda: "after.jpg" in got)


def test_copying_a_tree_with_shutil_is_picked_up_whole(tmp_path: Path, inbox: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for i in range(30):
        (src / f"{i:02d}.jpg").write_bytes(os.urandom(1000))
    col = Collector()
    with make_watcher(inbox, col):
        shutil.copytree(src, inbox / "batch")
        wait_until(lambda: len(col.arrivals) == 30)
    assert len({a.path for a in col.arrivals}) == 30


@pytest.mark.parametrize("name", ["camera.MPO", "archive.jp2", "layers.psd", "scan.dat", "IMG_2041", "a.qoi"])
def test_any_name_but_a_never_a_photo_one_is_a_candidate(inbox: Path, name: str) -> None:
    # The content decides (the worker, or the daemon's header check), not the extension.
    assert InboxFilter(inbox, True, [], SUPPORTED_EXTENSIONS).is_supported(inbox / name)


@pytest.mark.parametrize("name", ["notes.txt", "clip.MOV", "IMG_2041.xmp", "photos.zip", "report.pdf"])
def test_names_that_are_never_photos_are_set_aside_unread(inbox: Path, name: str) -> None:
    assert not InboxFilter(inbox, True, [], SUPPORTED_EXTENSIONS).is_supported(inbox / name)
