"""Windows: Explorer through os.startfile, the HKCU Run key for start at login."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import ClassVar

from gpen_watch.platform import power, windows_login, windows_notify, windows_volume
from gpen_watch.platform.api import LoginService, Platform
from gpen_watch.platform.mounts import Volume
from gpen_watch.platform.opener import Opened

# Device names, reserved in every folder and with any extension.
RESERVED_NAMES = frozenset(
    {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(1, 10)), *(f"lpt{i}" for i in range(1, 10))}
)


class _SystemPowerStatus(ctypes.Structure):
    """Win32's SYSTEM_POWER_STATUS, which GetSystemPowerStatus fills."""

    _fields_ = [
        ("ACLineStatus", ctypes.c_ubyte),
        ("BatteryFlag", ctypes.c_ubyte),
        ("BatteryLifePercent", ctypes.c_ubyte),
        ("SystemStatusFlag", ctypes.c_ubyte),
        ("BatteryLifeTime", ctypes.c_ulong),
        ("BatteryFullLifeTime", ctypes.c_ulong),
    ]


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

    def volume_of(self, path: Path) -> Volume | None:
        """From GetDriveTypeW (DRIVE_REMOTE: a network drive or share) and GetVolumeInformationW."""
        return windows_volume.volume_of(path)

    def cloud_placeholder(self, st: os.stat_result) -> bool:
        """OneDrive, Dropbox and other Cloud Files placeholders: RECALL_ON_DATA_ACCESS,
        RECALL_ON_OPEN or OFFLINE in st_file_attributes."""
        return windows_volume.placeholder_attributes(st)

    def on_battery(self) -> bool | None:
        status = _SystemPowerStatus()
        windll = getattr(ctypes, "windll", None)  # Windows only
        if windll is None or not windll.kernel32.GetSystemPowerStatus(ctypes.byref(status)):
            return None
        return power.windows_on_battery(status.ACLineStatus, status.BatteryFlag)

    def open_path(self, path: Path) -> None:
        """Show a folder in Explorer or open a file with its default application."""
        os.startfile(str(path))  # type: ignore[attr-defined,unused-ignore]  # Windows only

    def open_url(self, url: str) -> Opened:
        """The shell's default browser: ShellExecute says at once whether it started one."""
        try:
            os.startfile(url)  # type: ignore[attr-defined,unused-ignore]  # Windows only
        except OSError as exc:
            return Opened(False, f"Windows could not open the browser: {exc.strerror or exc}")
        return Opened(True)

    def notify(self, title: str, message: str) -> bool:
        # With a tray, pystray's win32 backend shows its balloons itself; this is for --no-tray.
        return windows_notify.notify(title, message)
