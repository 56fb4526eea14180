"""macOS: a folder's filesystem through statfs(2), called with ctypes (no extra package).

The struct is the 64-bit-inode ``struct statfs`` of <sys/mount.h>, which arm64 calls ``statfs``
and x86-64 ``statfs$INODE64``. Nothing here runs at import time, so the module loads anywhere.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from pathlib import Path

from gpen_watch.platform.mounts import Volume, network_fs

MNT_LOCAL = 0x00001000  # f_flags: stored on a local disk
SF_DATALESS = 0x40000000  # st_flags: a File Provider placeholder, its bytes in the cloud


class _StatFs(ctypes.Structure):
    _fields_ = [
        ("f_bsize", ctypes.c_uint32),
        ("f_iosize", ctypes.c_int32),
        ("f_blocks", ctypes.c_uint64),
        ("f_bfree", ctypes.c_uint64),
        ("f_bavail", ctypes.c_uint64),
        ("f_files", ctypes.c_uint64),
        ("f_ffree", ctypes.c_uint64),
        ("f_fsid", ctypes.c_int32 * 2),
        ("f_owner", ctypes.c_uint32),
        ("f_type", ctypes.c_uint32),
        ("f_flags", ctypes.c_uint32),
        ("f_fssubtype", ctypes.c_uint32),
        ("f_fstypename", ctypes.c_char * 16),
        ("f_mntonname", ctypes.c_char * 1024),
        ("f_mntfromname", ctypes.c_char * 1024),
        ("f_flags_ext", ctypes.c_uint32),
        ("f_reserved", ctypes.c_uint32 * 7),
    ]


def _statfs() -> Callable[..., int]:
    libc = ctypes.CDLL(None, use_errno=True)
    for name in ("statfs$INODE64", "statfs"):
        try:
            fn = libc[name]
        except AttributeError:
            continue
        fn.argtypes = [ctypes.c_char_p, ctypes.POINTER(_StatFs)]
        fn.restype = ctypes.c_int
        return fn
    raise OSError("statfs not found in the C library")


def volume_of(path: Path) -> Volume | None:
    buf = _StatFs()
    if _statfs()(os.fsencode(path), ctypes.byref(buf)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(path))
    fs_type = os.fsdecode(buf.f_fstypename)
    network = network_fs(fs_type) or not buf.f_flags & MNT_LOCAL
    return Volume(Path(os.fsdecode(buf.f_mntonname)), fs_type, network)


def dataless(st: os.stat_result) -> bool:
    return bool(getattr(st, "st_flags", 0) & SF_DATALESS)
