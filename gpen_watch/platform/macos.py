"""macOS: `open`, notifications through osascript, a LaunchAgent for start at login."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gpen_watch.platform import macos_login
from gpen_watch.platform.login_common import LoginOptions, LoginResult, LoginStatus


def open_path(path: Path) -> None:
    """Show a folder in Finder or open a file with its default application."""
    subprocess.Popen(
        ["open", str(path)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def applescript_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def notify(title: str, message: str) -> bool:
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


def install_login(options: LoginOptions) -> LoginResult:
    return macos_login.install(options)


def uninstall_login() -> LoginResult:
    return macos_login.uninstall()


def login_status() -> LoginStatus:
    return macos_login.status()


def login_enabled() -> bool:
    return macos_login.enabled()
