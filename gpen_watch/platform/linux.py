"""Linux (and the BSDs): xdg-open, notify-send, XDG autostart or a systemd user unit."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

from gpen_watch.platform import linux_login
from gpen_watch.platform.api import LoginService, Platform


class LinuxPlatform(Platform):
    name = "linux"
    login: ClassVar[LoginService] = linux_login
    x11_desktop = True
    # The BSDs share this class: their /proc (where mounted) and C library are not Linux's.
    procfs = sys.platform.startswith("linux")
    libc: ClassVar[str | None] = "libc.so.6" if sys.platform.startswith("linux") else None
    maxrss_unit = 1024
    posix_permissions = True
    unix_sockets = True
    name_forbidden: ClassVar[frozenset[str]] = frozenset()

    def open_path(self, path: Path) -> None:
        """Show a folder in the file manager or open a file with its default application."""
        opener = shutil.which("xdg-open")
        if opener is None:
            raise OSError("xdg-open not found (install xdg-utils)")
        # Detached and not waited for: some openers stay until the application they started quits.
        subprocess.Popen(
            [opener, str(path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def notify(self, title: str, message: str) -> bool:
        """Through notify-send (libnotify) when the tray backend has no notifications (xorg)."""
        sender = shutil.which("notify-send")
        if sender is None:
            return False
        subprocess.Popen(
            [sender, "--app-name=gpen-watch", title, message],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        return True
