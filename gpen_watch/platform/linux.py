"""Linux (and the BSDs): xdg-open, notify-send, XDG autostart or a systemd user unit."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import ClassVar

from gpen_watch.platform import linux_login, linux_notify, opener, power
from gpen_watch.platform.api import LoginService, Platform
from gpen_watch.platform.mounts import Volume, parse_mountinfo, volume_in
from gpen_watch.platform.opener import Opened

# xdg-open's exit statuses, as its manual says them (4: "the action failed").
XDG_OPEN_STATUS = {
    1: "it did not understand its command line",
    2: "the file does not exist",
    3: "a program it needs is not installed",
    4: "the browser or application did not start",
}


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
    #: Where the kernel lists the power supplies (a test points it at a folder of its own).
    power_supply: ClassVar[Path] = power.SYSFS_POWER_SUPPLY

    def on_battery(self) -> bool | None:
        return power.sysfs_on_battery(self.power_supply)

    def volume_of(self, path: Path) -> Volume | None:
        """From /proc/self/mountinfo (the BSDs, which share this class, have none: None)."""
        try:
            text = os.fsdecode(Path("/proc/self/mountinfo").read_bytes())
        except OSError:
            return None
        return volume_in(path, parse_mountinfo(text))

    def cloud_placeholder(self, st: os.stat_result) -> bool:
        # Linux has no placeholder flag: its sync clients (rclone, onedriver) are FUSE mounts,
        # polled for their own reasons, and download on read without deadlocking.
        return False

    def open_path(self, path: Path) -> None:
        """Show a folder in the file manager or open a file with its default application."""
        xdg = shutil.which("xdg-open")
        if xdg is None:
            raise OSError("xdg-open not found (install xdg-utils)")
        done = opener.launch([xdg, str(path)], meanings=XDG_OPEN_STATUS)
        if not done.ok:
            raise OSError(done.why)

    def open_url(self, url: str) -> Opened:
        argv = opener.browser_command(url, os.environ)
        if argv is not None:
            return opener.launch(argv)
        xdg = shutil.which("xdg-open")
        if xdg is None:
            return Opened(False, "xdg-open is not installed (xdg-utils) and $BROWSER names no browser")
        return opener.launch([xdg, url], meanings=XDG_OPEN_STATUS)

    def notify(self, title: str, message: str) -> bool:
        """The freedesktop Notifications service, through notify-send or gdbus (linux_notify):
        for a tray backend without notifications (xorg) and for the headless service."""
        return linux_notify.notify(title, message)

    def desktop_session(self) -> bool:
        return linux_notify.session_bus() is not None
