"""Windows: Explorer through os.startfile, the HKCU Run key for start at login."""

from __future__ import annotations

import os
from pathlib import Path
from typing import ClassVar

from gpen_watch.platform import windows_login
from gpen_watch.platform.api import LoginService, Platform

# Device names, reserved in every folder and with any extension.
RESERVED_NAMES = frozenset(
    {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(1, 10)), *(f"lpt{i}" for i in range(1, 10))}
)


class WindowsPlatform(Platform):
    name = "windows"
    login: ClassVar[LoginService] = windows_login
    x11_desktop = False
    procfs = False
    libc: ClassVar[str | None] = None
    maxrss_unit = 1024  # unused: Windows has no resource module
    posix_permissions = False
    unix_sockets = False
    name_forbidden: ClassVar[frozenset[str]] = frozenset('<>:"|?*')

    def defuse_name(self, name: str) -> str:
        """Windows drops trailing dots and spaces, and a device name (``nul``, ``com1.txt``) opens
        the device rather than a file: such a name gets a leading "_"."""
        name = name.rstrip(". ")
        if name.split(".")[0].lower() in RESERVED_NAMES:
            name = "_" + name
        return name

    def open_path(self, path: Path) -> None:
        """Show a folder in Explorer or open a file with its default application."""
        os.startfile(str(path))  # type: ignore[attr-defined,unused-ignore]  # Windows only

    def notify(self, title: str, message: str) -> bool:
        # pystray's win32 backend shows balloon notifications itself; there is no other route here.
        return False
