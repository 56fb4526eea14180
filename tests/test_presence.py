"""platform.presence on real mounts: a folder on a tmpfs, its mount taken away and brought back."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import tmpfs

from gpen_watch.base.errors import OutboxUnavailable
from gpen_watch.base.fsutil import require_device
from gpen_watch.platform.presence import Anchor, Anchors, anchor, away_reason, mount_point_of, present

needs_mount = pytest.mark.skipif(not tmpfs.can_mount(), reason="mounting is not allowed here")


def test_a_plain_folder_is_present_and_anchored(tmp_path: Path) -> None:
    a = anchor(tmp_path)
    assert a is not None
    assert a.folder == tmp_path
    assert a.device == os.stat(tmp_path).st_dev
    assert os.path.ismount(a.mount_point)
    assert tmp_path.is_relative_to(a.mount_point)
    assert away_reason(tmp_path, a) is None
    assert away_reason(tmp_path, None) is None


def test_a_missing_folder_is_away_with_a_sentence(tmp_path: Path) -> None:
    gone = tmp_path / "inbox"
    assert anchor(gone) is None
    reason = away_reason(gone, None)
    assert reason == "it is not there (unplugged drive or disconnected share?)"


def test_a_file_where_the_folder_was_is_away(tmp_path: Path) -> None:
    f = tmp_path / "inbox"
    f.write_text("x")
    assert anchor(f) is None
    assert away_reason(f, None) == "it cannot be read: it is a file, not a folder"
    assert away_reason(f / "below", None) is not None


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads any folder")
def test_an_unreadable_parent_is_away_with_its_error(tmp_path: Path) -> None:
    parent = tmp_path / "locked"
    (parent / "inbox").mkdir(parents=True)
    parent.chmod(0)
    try:
        reason = away_reason(parent / "inbox", None)
        assert reason is not None and reason.startswith("it cannot be read: ")
    finally:
        parent.chmod(0o755)


@needs_mount
def test_the_mount_point_itself_is_the_folder(tmp_path: Path) -> None:
    where = tmp_path / "drive"
    with tmpfs.mounted(where):
        a = anchor(where)
        assert a is not None and a.mount_point == where
        (where / "photo.jpg").write_bytes(b"x")
    # Unmounted: the folder still exists, an empty folder of the parent file system.
    assert where.is_dir() and not any(where.iterdir())
    reason = away_reason(where, a)
    assert reason == (
        f"the drive or share holding it is not mounted (its mount point {where} is an empty folder now)"
    )
    # Without the anchor nothing tells it from an empty folder: that is why anchors are kept.
    assert away_reason(where, None) is None


@needs_mount
def test_a_folder_below_the_mount_point_unmounted_and_remounted(tmp_path: Path) -> None:
    where = tmp_path / "nas"
    inbox = where / "photos" / "in"
    with tmpfs.mounted(where):
        inbox.mkdir(parents=True)
        a = anchor(inbox)
        assert a is not None
        assert a.mount_point == where == mount_point_of(inbox)
        assert a.device != os.stat(tmp_path).st_dev
        assert away_reason(inbox, a) is None
    # Gone with the mount: missing, and its mount point is a bare folder.
    assert not inbox.exists()
    assert "is not mounted (its mount point" in (away_reason(inbox, a) or "")
    # Someone (or a careless tool) recreates the path on the bare mount point: still away.
    inbox.mkdir(parents=True)
    try:
        reason = away_reason(inbox, a)
        assert reason == (
            f"the drive or share holding it is not mounted (its mount point {where} is a plain folder now)"
        )
    finally:
        (where / "photos" / "in").rmdir()
        (where / "photos").rmdir()
    # Back: present again, on a new device.
    with tmpfs.mounted(where):
        inbox.mkdir(parents=True)
        assert away_reason(inbox, a) is None
        b = anchor(inbox)
        assert b is not None and b.mount_point == where


@needs_mount
def test_a_bind_mount_taken_away(tmp_path: Path) -> None:
    # The bound folder lives on another file system (a bind within one file system shares its
    # device, and os.path.ismount cannot see it: presence anchors on real drives and shares).
    with tmpfs.mounted(tmp_path / "disk") as disk:
        (disk / "out").mkdir()
        target = tmp_path / "target"
        target.mkdir()
        subprocess.run(["mount", "--bind", str(disk), str(target)], check=True)
        try:
            a = anchor(target / "out")
            assert a == Anchor(target / "out", target, os.stat(disk / "out").st_dev)
            assert away_reason(target / "out", a) is None
        finally:
            subprocess.run(["umount", str(target)], check=True)
        assert "its mount point" in (away_reason(target / "out", a) or "")
        # A mount point that went away with the mount (macOS removes /Volumes/NAME): not there.
        target.rmdir()
        assert away_reason(target / "out", a) == ("it is not there (unplugged drive or disconnected share?)")


def test_a_folder_deleted_from_a_disk_that_is_still_there_is_not_away(tmp_path: Path) -> None:
    # An outbox the user deleted on this disk is made again (no drive left); one remembered from
    # an earlier run (device unknown) stays away until its folder is seen again.
    out = tmp_path / "outbox"
    out.mkdir()
    a = anchor(out)
    assert a is not None
    out.rmdir()
    assert away_reason(out, a) is None
    remembered = Anchor(a.folder, a.mount_point, -1)
    assert away_reason(out, remembered) == "it is not there (unplugged drive or disconnected share?)"


def test_the_anchors_of_one_service_are_its_own(tmp_path: Path) -> None:
    # Two services (or a service and a test) never see each other's anchors: no state is global.
    where = tmp_path / "in"
    where.mkdir()
    mine, theirs = Anchors(), Anchors()
    a = anchor(where)
    assert a is not None
    mine.remember(Anchor(a.folder, a.mount_point, -1))
    where.rmdir()
    assert mine.away(where) is not None
    assert theirs.away(where) is None  # never seen there: not away, it may be yet to make
    assert present(where) is None


def test_a_result_is_never_written_onto_another_file_system_than_its_outbox_was_on(tmp_path: Path) -> None:
    require_device(tmp_path, os.stat(tmp_path).st_dev)
    require_device(tmp_path, None)
    with pytest.raises(OutboxUnavailable, match="the outbox's drive or share is not mounted now"):
        require_device(tmp_path, os.stat(tmp_path).st_dev + 1)
    with pytest.raises(OutboxUnavailable, match="the outbox is not there now"):
        require_device(tmp_path / "gone", os.stat(tmp_path).st_dev)
