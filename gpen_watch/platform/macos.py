"""macOS: `open`, notifications through osascript, a LaunchAgent for start at login."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import ClassVar

from gpen_watch.platform import macos_login, macos_volume, opener, power
from gpen_watch.platform.api import LoginService, Platform
from gpen_watch.platform.mounts import Volume
from gpen_watch.platform.opener import Opened


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

    def on_battery(self) -> bool | None:
        try:
            done = subprocess.run(["pmset", "-g", "batt"], capture_output=True, text=True, timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return power.pmset_on_battery(done.stdout)

    def volume_of(self, path: Path) -> Volume | None:
        """From statfs(2): f_fstypename, and MNT_LOCAL unset for network filesystems."""
        return macos_volume.volume_of(path)

    def cloud_placeholder(self, st: os.stat_result) -> bool:
        """iCloud Drive and other File Provider clients mark a placeholder SF_DATALESS."""
        return macos_volume.dataless(st)

    def open_path(self, path: Path) -> None:
        """Show a folder in Finder or open a file with its default application."""
        done = opener.launch(["open", str(path)])
        if not done.ok:
            raise OSError(done.why)

    def open_url(self, url: str) -> Opened:
        return opener.launch(opener.browser_command(url, os.environ) or ["open", url])

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
