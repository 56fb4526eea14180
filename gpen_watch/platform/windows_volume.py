"""Windows: a folder's volume through GetVolumePathNameW, GetDriveTypeW and GetVolumeInformationW
(ctypes, no extra package), and the attributes of cloud placeholders. Nothing here runs at import
time, so the module loads anywhere."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

from gpen_watch.platform.mounts import Volume

DRIVE_REMOTE = 4  # GetDriveTypeW: a network drive or UNC share
# st_file_attributes of OneDrive Files On-Demand, Dropbox online-only and other Cloud Files API
# placeholders: reading them recalls (downloads) the bytes.
FILE_ATTRIBUTE_OFFLINE = 0x00001000
FILE_ATTRIBUTE_RECALL_ON_OPEN = 0x00040000
FILE_ATTRIBUTE_RECALL_ON_DATA_ACCESS = 0x00400000
PLACEHOLDER_ATTRIBUTES = (
    FILE_ATTRIBUTE_OFFLINE | FILE_ATTRIBUTE_RECALL_ON_OPEN | FILE_ATTRIBUTE_RECALL_ON_DATA_ACCESS
)
_MAX_PATH = 32768


def volume_of(path: Path) -> Volume | None:
    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined,unused-ignore]
    root = ctypes.create_unicode_buffer(_MAX_PATH)
    if not kernel32.GetVolumePathNameW(str(path), root, _MAX_PATH):
        raise ctypes.WinError(ctypes.get_last_error())  # type: ignore[attr-defined,unused-ignore]
    fs_name = ctypes.create_unicode_buffer(261)
    if not kernel32.GetVolumeInformationW(root.value, None, 0, None, None, None, fs_name, 261):
        fs_name.value = "unknown"  # a share that does not answer: its drive type still says remote
    drive_type = kernel32.GetDriveTypeW(root.value)
    return Volume(Path(root.value), fs_name.value.lower(), drive_type == DRIVE_REMOTE)


def placeholder_attributes(st: os.stat_result) -> bool:
    return bool(getattr(st, "st_file_attributes", 0) & PLACEHOLDER_ATTRIBUTES)
