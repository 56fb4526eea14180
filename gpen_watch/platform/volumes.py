"""What filesystem a folder is on, and whether a file's bytes are on this machine at all.

``volume_of`` asks the OS (Linux: /proc/self/mountinfo; macOS: statfs; Windows: GetDriveTypeW and
GetVolumeInformationW), through this OS's ``Platform``. ``placeholder`` recognises cloud-sync
stand-ins whose bytes are still in the cloud (iCloud Drive and other macOS File Provider clients,
OneDrive Files On-Demand, Dropbox online-only): reading one downloads it, blocks, or fails with
"Resource deadlock avoided", so the watcher must never open one. It decides from an lstat result
and the name alone.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from gpen_watch.platform import current
from gpen_watch.platform.api import Platform
from gpen_watch.platform.mounts import Volume

__all__ = ["Volume", "icloud_stub_of", "placeholder", "volume_of"]

_ICLOUD = ".icloud"


@functools.cache
def _platform() -> Platform:
    return current()


def volume_of(path: Path, platform: Platform | None = None) -> Volume | None:
    """The filesystem ``path`` lives on; None when the OS does not say (the path is missing...)."""
    try:
        return (platform or _platform()).volume_of(Path(os.path.realpath(path)))
    except (OSError, ValueError):
        return None


def icloud_stub_of(path: Path) -> str | None:
    """The photo name an iCloud ``.NAME.icloud`` stub stands for (``IMG.jpg`` for
    ``.IMG.jpg.icloud``), or None when ``path`` is not such a stub."""
    name = path.name
    if name.startswith(".") and name.endswith(_ICLOUD) and len(name) > len(_ICLOUD) + 1:
        return name[1 : -len(_ICLOUD)]
    return None


def placeholder(path: Path, st: os.stat_result, platform: Platform | None = None) -> bool:
    """Whether ``path`` (whose lstat result is ``st``) is a cloud placeholder whose bytes are not
    on this machine: an iCloud stub, or a file this OS's flags say is dataless or offline."""
    return icloud_stub_of(path) is not None or (platform or _platform()).cloud_placeholder(st)
