"""Which filesystem a folder is on (mountinfo parsing, this machine's real mounts) and which files
are cloud placeholders, with the OS's flags faked in the stat result only."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from gpen_watch.platform import current, volumes
from gpen_watch.platform.mounts import Volume, network_fs, parse_mountinfo, volume_in
from gpen_watch.watch.observers import POLLING, choose

MOUNTINFO = r"""22 1 8:2 / / rw,relatime shared:1 - ext4 /dev/sda2 rw,errors=remount-ro
40 22 0:35 / /mnt/photos rw,relatime shared:20 - cifs //nas/photos rw,vers=3.1.1
41 22 0:36 / /srv/nfs rw,relatime - nfs4 nas:/export rw,vers=4.2
42 22 0:37 / /home/ann/remote\040box rw,nosuid,nodev - fuse.sshfs ann@host:/pics rw,user_id=1000
43 22 8:17 / /media/ann/USB\134stick rw - vfat /dev/sdb1 rw
44 22 8:18 / /media/ann/win rw - fuseblk /dev/sdb2 rw
45 40 0:38 / /mnt/photos/local rw - ext4 /dev/sdc1 rw
garbage line without separator
"""


def test_mountinfo_lines_with_escapes_and_types() -> None:
    mounts = parse_mountinfo(MOUNTINFO)
    assert [(str(m.mount_point), m.fs_type) for m in mounts] == [
        ("/", "ext4"),
        ("/mnt/photos", "cifs"),
        ("/srv/nfs", "nfs4"),
        ("/home/ann/remote box", "fuse.sshfs"),
        ("/media/ann/USB\\stick", "vfat"),
        ("/media/ann/win", "fuseblk"),
        ("/mnt/photos/local", "ext4"),
    ]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/mnt/photos/in", Volume(Path("/mnt/photos"), "cifs", True)),
        ("/mnt/photosx/in", Volume(Path("/"), "ext4", False)),  # a prefix is not a parent
        ("/srv/nfs", Volume(Path("/srv/nfs"), "nfs4", True)),
        ("/home/ann/remote box/2024", Volume(Path("/home/ann/remote box"), "fuse.sshfs", True)),
        ("/media/ann/USB\\stick/DCIM", Volume(Path("/media/ann/USB\\stick"), "vfat", False)),
        ("/media/ann/win/x", Volume(Path("/media/ann/win"), "fuseblk", False)),
        ("/mnt/photos/local/in", Volume(Path("/mnt/photos/local"), "ext4", False)),  # deepest wins
        ("/home/ann/Pictures", Volume(Path("/"), "ext4", False)),
    ],
)
def test_the_deepest_mount_holding_a_path(path: str, expected: Volume) -> None:
    assert volume_in(Path(path), parse_mountinfo(MOUNTINFO)) == expected


def test_network_types() -> None:
    assert all(network_fs(t) for t in ("cifs", "smb3", "smbfs", "nfs", "nfs4", "fuse.rclone", "9p", "fuse"))
    assert not any(network_fs(t) for t in ("ext4", "btrfs", "xfs", "apfs", "vfat", "fuseblk", "tmpfs"))


def test_the_mode_each_setting_gives() -> None:
    cifs = Volume(Path("/mnt/p"), "cifs", True)
    sshfs = Volume(Path("/mnt/s"), "fuse.sshfs", True)
    disk = Volume(Path("/"), "ext4", False)
    assert choose("auto", cifs).kind == POLLING and choose("auto", cifs).reason == "network share (cifs)"
    assert choose("auto", sshfs).reason == "FUSE filesystem (fuse.sshfs)"
    assert choose("auto", disk).kind == "events" and choose("auto", None).kind == "events"
    assert choose("never", cifs).kind == "events"
    assert choose("always", disk).reason == "watch.polling = always"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/mountinfo")
def test_this_machines_mountinfo_finds_the_root(tmp_path: Path) -> None:
    root = volumes.volume_of(Path("/"))
    assert root is not None and root.mount_point == Path("/") and root.fs_type
    here = volumes.volume_of(tmp_path)
    assert here is not None and Path(os.path.realpath(tmp_path)).is_relative_to(here.mount_point)


def _stat(**extra: int) -> os.stat_result:
    """A regular file's lstat result with the OS's own fields (st_flags, st_file_attributes)
    set: the one edge faked, as no such file can be made on this machine (Linux's stat_result
    has neither field)."""
    return cast(os.stat_result, SimpleNamespace(st_mode=stat.S_IFREG | 0o644, st_size=1000, **extra))


def test_macos_dataless_files_are_placeholders() -> None:
    mac = current("darwin")
    assert mac.cloud_placeholder(_stat(st_flags=0x40000000))
    assert mac.cloud_placeholder(_stat(st_flags=0x40000000 | 0x8000))
    assert not mac.cloud_placeholder(_stat(st_flags=0x8000))  # UF_HIDDEN alone
    assert not mac.cloud_placeholder(_stat())


@pytest.mark.parametrize(
    ("attrs", "expected"),
    [(0x00400000, True), (0x00040000, True), (0x00001000, True), (0x20, False), (0x0, False)],
)
def test_windows_recall_and_offline_attributes_are_placeholders(attrs: int, expected: bool) -> None:
    assert current("win32").cloud_placeholder(_stat(st_file_attributes=attrs)) is expected


def test_icloud_stubs_need_no_flags(tmp_path: Path) -> None:
    stub = tmp_path / ".IMG_0001.jpg.icloud"
    stub.write_bytes(b"bplist00")
    linux = current("linux")
    assert volumes.icloud_stub_of(stub) == "IMG_0001.jpg"
    assert volumes.placeholder(stub, os.lstat(stub), linux)
    photo = tmp_path / "IMG_0001.jpg"
    photo.write_bytes(b"x")
    assert not volumes.placeholder(photo, os.lstat(photo), linux)
    assert volumes.icloud_stub_of(tmp_path / ".icloud") is None
    assert volumes.icloud_stub_of(tmp_path / "a.icloud") is None
