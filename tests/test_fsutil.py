"""Putting a finished file under its final name: atomically, never over someone else's file, also
on file systems without hard links (FAT and exFAT memory cards, some network shares)."""

from __future__ import annotations

import errno
import os
import stat
import sys
from pathlib import Path

import pytest

from gpen_watch.base import fsutil
from gpen_watch.platform import files


def no_hard_links(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(src: object, dst: object) -> None:  # what os.link says on FAT
        raise PermissionError(errno.EPERM, "Operation not permitted", str(src), None, str(dst))

    monkeypatch.setattr(os, "link", refuse)


@pytest.mark.parametrize("links", [True, False], ids=["hard links", "no hard links"])
def test_publish_gives_the_file_its_name_and_leaves_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, links: bool
) -> None:
    if not links:
        no_hard_links(monkeypatch)
    tmp, dst = tmp_path / ".a.jpg.tmp", tmp_path / "a.jpg"
    tmp.write_bytes(b"result")
    files.publish_file(tmp, dst)
    assert dst.read_bytes() == b"result"
    assert not tmp.exists()


@pytest.mark.parametrize("links", [True, False], ids=["hard links", "no hard links"])
def test_publish_never_replaces_a_file_that_is_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, links: bool
) -> None:
    if not links:
        no_hard_links(monkeypatch)
    tmp, dst = tmp_path / ".a.jpg.tmp", tmp_path / "a.jpg"
    tmp.write_bytes(b"result")
    dst.write_bytes(b"the user's own file")
    with pytest.raises(FileExistsError):
        files.publish_file(tmp, dst)
    assert dst.read_bytes() == b"the user's own file"
    assert tmp.read_bytes() == b"result"  # left for the caller to discard


def test_publish_with_overwrite_replaces(tmp_path: Path) -> None:
    tmp, dst = tmp_path / ".a.jpg.tmp", tmp_path / "a.jpg"
    tmp.write_bytes(b"new")
    dst.write_bytes(b"old")
    files.publish_file(tmp, dst, overwrite=True)
    assert dst.read_bytes() == b"new"
    assert not tmp.exists()


def test_other_link_errors_are_not_taken_for_a_missing_feature(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(src: object, dst: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "link", full)
    tmp = tmp_path / ".a.jpg.tmp"
    tmp.write_bytes(b"result")
    with pytest.raises(OSError, match="No space"):
        files.publish_file(tmp, tmp_path / "a.jpg")
    assert not (tmp_path / "a.jpg").exists()


def test_restore_writes_its_results_where_there_are_no_hard_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `gpen-watch restore photos/ -o /media/card/`: it reported "cannot write" for every photo.
    from gpen_watch.cli.restore import _commit
    from gpen_watch.restore.api import FileResult

    no_hard_links(monkeypatch)
    tmp, final = tmp_path / ".a.jpg.gpen-tmp-1", tmp_path / "a.jpg"
    tmp.write_bytes(b"result")
    res = FileResult(src=tmp_path / "in.jpg", ok=True, dst=tmp, faces=1)
    _commit(res, final, overwrite=False)
    assert res.ok, res.error
    assert final.read_bytes() == b"result"


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_write_text_atomic_gives_exact_modes_and_leaves_no_temp(tmp_path: Path) -> None:
    old = os.umask(0o077)  # narrower than the 0644 asked for: the exact mode must still hold
    try:
        fsutil.write_text_atomic(tmp_path / "unit.service", "a\n", mode=0o644)
        fsutil.write_text_atomic(tmp_path / "secret", "b", mode=0o600)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "unit.service").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "secret").stat().st_mode) == 0o600
    # A stale temp of the same name (a crash between write and rename) is replaced, not refused.
    stale = tmp_path / ".note.txt.tmp-7"
    stale.write_text("half")
    fsutil.write_text_atomic(tmp_path / "note.txt", "whole", tmp=stale, fsync=True)
    assert (tmp_path / "note.txt").read_text() == "whole"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["note.txt", "secret", "unit.service"]


def test_write_text_atomic_that_fails_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "kept.txt"
    target.write_text("old")
    with pytest.raises(UnicodeEncodeError):
        fsutil.write_text_atomic(target, "bad \udcff surrogate")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["kept.txt"]
