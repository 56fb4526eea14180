"""The tray backend interface: a :class:`Backend` makes the icon (a pystray Icon, or a subclass of
one with fixes) and the :class:`Hooks` through which the app's threads reach it. One module per
backend implements it (xorg.py, glib.py, darwin.py; win32 uses this base as it is), in the pattern
of pystray's ``_base``; ``backend.load`` chooses one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from PIL import Image


class TrayUnavailable(Exception):
    """No tray icon can be shown here; the message says why (one log line)."""


class Hooks:
    """How the app's threads reach the icon; most backends take calls from any thread."""

    def loop_started(self) -> None:
        """Called from pystray's setup thread once the backend's loop runs."""

    def submit(self, call: Callable[[], None]) -> None:
        call()

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class Backend:
    """A tray backend as the app sees it. Subclasses change how the icon is made and reached."""

    name: str  # "appindicator", "gtk", "xorg", "darwin", "win32"
    pystray: ModuleType
    has_menu: bool
    has_notification: bool
    # XEmbed icons (xorg, gtk): a tray owned the selection at start; else the icon docks later.
    tray_present: bool = True

    @property
    def click_pauses(self) -> bool:
        """A plain click on the icon toggles pause (else it opens the outbox, the menu's default)."""
        return not self.has_menu

    def create_icon(self, name: str, image: Image.Image, title: str, menu: Any) -> Any:
        return self.pystray.Icon(name, image, title, menu=menu)

    def prepare(self, icon: Any) -> Hooks:
        """Backend-specific set-up of a new icon, before its loop runs (on the main thread)."""
        return Hooks()

    def discard(self, icon: Any) -> None:
        """Take away an icon whose loop failed to start (the app then runs headless)."""

    def waiting_for_tray(self) -> str | None:
        """Why the icon cannot be seen yet (no tray on the display), or None."""
        if self.tray_present:
            return None
        return "no system tray on the display yet (GNOME needs the AppIndicator extension)"
