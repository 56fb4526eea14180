"""macOS: `open`, notifications through osascript, a LaunchAgent for start at login."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import ClassVar

from gpen_watch.platform import macos_login
from gpen_watch.platform.api import LoginService, Platform


def applescript_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class MacPlatform(Platform):
    name = "macos"
    login: ClassVar[LoginService] = macos_login
    x11_desktop = False
    procfs = False
    libc: ClassVar[str | None] = None
    maxrss_unit = 1
    posix_permissions = True
    unix_sockets = True
    name_forbidden: ClassVar[frozenset[str]] = frozenset()

    def open_path(self, path: Path) -> None:
        """Show a folder in Finder or open a file with its default application."""
        subprocess.Popen(
            ["open", str(path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def notify(self, title: str, message: str) -> bool:
        # pystray's darwin backend has no notifications; Notification Center takes them from osascript.
        script = f"display notification {applescript_string(message)} with title {applescript_string(title)}"
        try:
            subprocess.Popen(
                ["osascript", "-e", script],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError:
            return False
        return True
