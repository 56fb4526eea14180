"""Start at login on Windows: a value under HKCU\\...\\CurrentVersion\\Run.

The value runs ``pythonw.exe -m gpen_watch run``: pythonw has no console window, so nothing pops up
at login; gpen-watch then logs to its log file only. Nothing needs administrator rights. The
cluster node (``--node``) has a value of its own beside the service's.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Protocol

from gpen_watch.platform.login_common import (
    SERVICE,
    LoginEntry,
    LoginError,
    LoginOptions,
    LoginResult,
    LoginStatus,
    stale_note,
)

RUN_KEY = r"Software\Microsoft\Windows\CurrentVersion\Run"
VALUE_NAME = SERVICE.name
# What marks a value as ours (the user may have one of the same name pointing elsewhere).
SIGNATURE = SERVICE.signature
NOT_WINDOWS = "the Windows registry can only be used on Windows"


class RunKey(Protocol):
    """The HKCU Run key: the real registry, or a dict in tests."""

    def get(self, name: str) -> str | None: ...
    def set(self, name: str, value: str) -> None: ...
    def delete(self, name: str) -> None: ...


class RegistryRunKey:
    """The real key. Each body sits under a platform check so mypy checks it against the Windows
    stubs when run with ``--platform win32`` and skips it elsewhere (winreg exists only there)."""

    def get(self, name: str) -> str | None:
        if sys.platform == "win32":
            import winreg

            try:
                with winreg.OpenKey(winreg.HKEY_CURRENT_USER, RUN_KEY) as key:
                    value, _kind = winreg.QueryValueEx(key, name)
            except FileNotFoundError:
                return None
            return str(value)
        raise LoginError(NOT_WINDOWS)

    def set(self, name: str, value: str) -> None:
        if sys.platform == "win32":
            import winreg

            with winreg.CreateKeyEx(winreg.HKEY_CURRENT_USER, RUN_KEY, 0, winreg.KEY_SET_VALUE) as key:
                winreg.SetValueEx(key, name, 0, winreg.REG_SZ, value)
            return
        raise LoginError(NOT_WINDOWS)

    def delete(self, name: str) -> None:
        if sys.platform == "win32":
            import winreg

            with winreg.OpenKey(winreg.HKEY_CURRENT_USER, RUN_KEY, 0, winreg.KEY_SET_VALUE) as key:
                winreg.DeleteValue(key, name)
            return
        raise LoginError(NOT_WINDOWS)


def windowless(python: str) -> str:
    """pythonw.exe beside python.exe (venvs have both), else the interpreter itself."""
    path = Path(python)
    if path.name.lower() == "python.exe":
        candidate = path.with_name("pythonw.exe")
        if candidate.exists():
            return str(candidate)
    return str(path)


def command_line(options: LoginOptions) -> str:
    argv = options.command()
    argv[0] = windowless(argv[0])
    return subprocess.list2cmdline(argv)


def install(options: LoginOptions, key: RunKey | None = None) -> LoginResult:
    key = RegistryRunKey() if key is None else key
    result = LoginResult()
    entry = options.entry
    value = command_line(options)
    current = key.get(entry.name)
    if current is not None and entry.signature not in current:
        raise LoginError(
            f"HKCU\\{RUN_KEY}\\{entry.name} exists and does not run gpen-watch ({current}); remove it first"
        )
    if current == value:
        result.say("already installed; nothing changed")
    else:
        key.set(entry.name, value)
        result.changed = True
        result.say(f"set HKCU\\{RUN_KEY}\\{entry.name} = {value}")
    result.say(f"{entry.what} starts at your next login")
    return result


def uninstall(key: RunKey | None = None, *, entry: LoginEntry = SERVICE) -> LoginResult:
    key = RegistryRunKey() if key is None else key
    result = LoginResult()
    current = key.get(entry.name)
    if current is None:
        result.say("start at login was not installed")
    elif entry.signature not in current:
        result.say(f"left HKCU\\{RUN_KEY}\\{entry.name} alone: it does not run gpen-watch")
    else:
        key.delete(entry.name)
        result.changed = True
        result.say(f"removed HKCU\\{RUN_KEY}\\{entry.name}")
    return result


def status(key: RunKey | None = None, *, entry: LoginEntry = SERVICE) -> LoginStatus:
    current = (RegistryRunKey() if key is None else key).get(entry.name)
    if current is None or entry.signature not in current:
        return LoginStatus(False)
    # The node's command is the user's own (`--node ...`): only the service's is known to compare.
    fresh = [command_line(LoginOptions(no_tray=n)) for n in (False, True)]
    notes = () if entry != SERVICE or current in fresh else (stale_note(),)
    return LoginStatus(True, "run-key", f"HKCU\\{RUN_KEY}\\{entry.name}", current, notes)


def enabled(key: RunKey | None = None, *, entry: LoginEntry = SERVICE) -> bool:
    return status(key, entry=entry).installed
