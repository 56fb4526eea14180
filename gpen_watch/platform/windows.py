"""Windows: Explorer through os.startfile, the HKCU Run key for start at login."""

from __future__ import annotations

import os
from pathlib import Path
from typing import ClassVar

from gpen_watch.platform import windows_login
from gpen_watch.platform.api import LoginService, Platform


class WindowsPlatform(Platform):
    name = "windows"
    login: ClassVar[LoginService] = windows_login
    x11_desktop = False
    procfs = False
    libc: ClassVar[str | None] = None
    maxrss_unit = 1024  # unused: Windows has no resource module

    def open_path(self, path: Path) -> None:
        """Show a folder in Explorer or open a file with its default application."""
        os.startfile(str(path))  # type: ignore[attr-defined,unused-ignore]  # Windows only

    def notify(self, title: str, message: str) -> bool:
        # pystray's win32 backend shows balloon notifications itself; there is no other route here.
        return False
