"""What differs between Linux, macOS and Windows, behind one small interface.

Like pystray (``_xorg``, ``_darwin``, ``_win32``) and platformdirs (``unix``, ``macos``,
``windows``), each operating system gets one module with one ``Platform`` subclass (the interface
is ``api.Platform``), and :func:`current` picks it.

The modules import nothing platform-specific at import time (winreg, AppKit), so every one of
them can be loaded and tested anywhere.
"""

from __future__ import annotations

import importlib
import sys

from gpen_watch.platform.api import Platform


def module_name(platform: str = sys.platform) -> str:
    """The gpen_watch.platform module for a ``sys.platform`` value."""
    if platform == "darwin":
        return "macos"
    if platform in ("win32", "cygwin"):
        return "windows"
    # Linux and the BSDs share X11/Wayland desktops, XDG autostart and xdg-open.
    return "linux"


def current(platform: str | None = None) -> Platform:
    """The platform of this system (or of ``platform``, a ``sys.platform`` value, in tests)."""
    module = importlib.import_module(f"{__name__}.{module_name(platform or sys.platform)}")
    found = [
        c
        for c in vars(module).values()
        if isinstance(c, type) and issubclass(c, Platform) and c is not Platform
    ]
    return found[0]()
