"""What differs between Linux, macOS and Windows, behind one small interface.

Like pystray (``_xorg``, ``_darwin``, ``_win32``) and platformdirs (``unix``, ``macos``,
``windows``), each operating system gets one module, and :func:`current` picks it. Every platform
module offers the same functions:

    open_path(path)            show a folder in the file manager, or open a file
    notify(title, message)     a desktop notification when the tray backend cannot show one
    install_login(options)     start gpen-watch at login (LoginOptions -> LoginResult)
    uninstall_login()          undo exactly what install_login made (-> LoginResult)
    login_status()             what is installed, where, and what it runs (-> LoginStatus)
    login_enabled()            a cheap "is it installed" for the tray's checkbox

The modules import nothing platform-specific at import time (winreg, AppKit), so every one of
them can be loaded and tested anywhere.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType


def module_name(platform: str = sys.platform) -> str:
    """The gpen_watch.platform module for a ``sys.platform`` value."""
    if platform == "darwin":
        return "macos"
    if platform in ("win32", "cygwin"):
        return "windows"
    # Linux and the BSDs share X11/Wayland desktops, XDG autostart and xdg-open.
    return "linux"


def current(platform: str = sys.platform) -> ModuleType:
    """The platform module for this system (or for ``platform``, in tests)."""
    return importlib.import_module(f"{__name__}.{module_name(platform)}")
