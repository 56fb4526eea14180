"""Windows: Explorer through os.startfile, the HKCU Run key for start at login."""

from __future__ import annotations

import os
from pathlib import Path

from gpen_watch.platform import windows_login
from gpen_watch.platform.login_common import LoginOptions, LoginResult, LoginStatus


def open_path(path: Path) -> None:
    """Show a folder in Explorer or open a file with its default application."""
    os.startfile(str(path))  # type: ignore[attr-defined,unused-ignore]  # Windows only


def notify(title: str, message: str) -> bool:
    # pystray's win32 backend shows balloon notifications itself; there is no other route here.
    return False


def install_login(options: LoginOptions) -> LoginResult:
    return windows_login.install(options)


def uninstall_login() -> LoginResult:
    return windows_login.uninstall()


def login_status() -> LoginStatus:
    return windows_login.status()


def login_enabled() -> bool:
    return windows_login.enabled()
