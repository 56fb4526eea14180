"""Which filesystem a path is on, from a list of mounts, and whether changes made on it by other
machines raise events on this one.

Pure: the mount list comes in as text (Linux's ``/proc/self/mountinfo``) or as a name the OS
gave (macOS ``f_fstypename``, Windows' drive type), so every rule here is tested on any OS.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Volume:
    """The mounted filesystem a folder lives on.

    ``network``: changes made there by other machines (or by a FUSE process on its own) raise no
    OS event here, so an inbox on it must be polled to see them soon.
    """

    mount_point: Path
    fs_type: str
    network: bool


# Filesystems whose files other machines change (Linux and macOS names). FUSE filesystems count
# too: sshfs, rclone, s3fs, gvfs and the like serve files from elsewhere, and the kernel raises no
# inotify event for what their process changes. fuseblk (ntfs-3g, exfat on a local disk) does not.
_NETWORK = frozenset(
    {
        "cifs",
        "smb3",
        "smbfs",
        "nfs",
        "nfs4",
        "afpfs",
        "webdav",
        "davfs",
        "9p",
        "ceph",
        "glusterfs",
        "lustre",
        "gpfs",
        "afs",
        "ncpfs",
        "coda",
        "fuse",
        "macfuse",
        "osxfuse",
        "fusefs",
    }
)


def network_fs(fs_type: str) -> bool:
    """Whether a filesystem type (``cifs``, ``fuse.sshfs``, ``ext4``...) takes other machines' writes."""
    low = fs_type.lower()
    return low in _NETWORK or (low.startswith(("fuse.", "fusefs.", "macfuse")) and low != "fuseblk")


@dataclass(frozen=True)
class Mount:
    """One line of /proc/self/mountinfo: where a filesystem is mounted, and its type."""

    mount_point: Path
    fs_type: str


_ESCAPE = re.compile(r"\\([0-7]{3})")


def _unescape(field: str) -> str:
    # The kernel writes space, tab, newline and backslash in paths as \040, \011, \012, \134.
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)


def parse_mountinfo(text: str) -> list[Mount]:
    """The mounts of a mountinfo text, in its order (a later mount on the same point hides an
    earlier one). Lines that do not parse are skipped."""
    mounts: list[Mount] = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or not tail:
            continue
        mounts.append(Mount(Path(_unescape(fields[4])), _unescape(tail[0])))
    return mounts


def _within(path: str, mount_point: str) -> bool:
    return path == mount_point or mount_point == "/" or path.startswith(mount_point.rstrip("/") + "/")


def volume_in(path: Path, mounts: list[Mount]) -> Volume | None:
    """The volume of ``path`` (absolute, symlinks resolved) among ``mounts``: the deepest mount
    point holding it, the last one mounted there when several are."""
    best: Mount | None = None
    target = os.path.normpath(str(path))
    for m in mounts:
        if _within(target, str(m.mount_point)) and (
            best is None or len(m.mount_point.parts) >= len(best.mount_point.parts)
        ):
            best = m
    if best is None:
        return None
    return Volume(best.mount_point, best.fs_type, network_fs(best.fs_type))
