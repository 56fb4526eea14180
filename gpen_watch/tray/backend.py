"""Choosing the tray backend, or saying in one sentence why there is none.

pystray picks its backend when it is imported: appindicator, then gtk, then xorg on Linux (the
first two need the system's PyGObject, which a venv cannot see unless created with
--system-site-packages), darwin on macOS, win32 on Windows; PYSTRAY_BACKEND forces one. Importing
it connects to the display, so everything that can fail is tried here, before the service starts.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

log = logging.getLogger(__name__)

# At login the tray may start before the panel that hosts it: wait this long for one to appear.
TRAY_WAIT_S = 10.0

LINUX_HINT = (
    "for a tray with a menu install python3-gi and gir1.2-ayatanaappindicator3-0.1, use a venv "
    "made with --system-site-packages, and set PYSTRAY_BACKEND=appindicator"
)


class TrayUnavailable(Exception):
    """No tray icon can be shown here; the message says why (one log line)."""


@dataclass(frozen=True)
class Backend:
    name: str  # "appindicator", "gtk", "xorg", "darwin", "win32"
    pystray: ModuleType
    has_menu: bool
    has_notification: bool


def load(
    environ: Mapping[str, str] | None = None, platform: str | None = None, tray_wait_s: float | None = None
) -> Backend:
    """Import pystray and check it can show an icon; raises TrayUnavailable otherwise."""
    environ = os.environ if environ is None else environ
    x11 = (platform or sys.platform) not in ("darwin", "win32", "cygwin")
    if x11 and not environ.get("DISPLAY") and not environ.get("WAYLAND_DISPLAY"):
        raise TrayUnavailable("no display (DISPLAY and WAYLAND_DISPLAY are not set)")
    try:
        import pystray
    except Exception as exc:  # ImportError, or Xlib's display errors raised while importing
        reason = f"no usable tray backend ({type(exc).__name__}: {exc})"
        raise TrayUnavailable(f"{reason}; {LINUX_HINT}" if x11 else reason) from None
    name = pystray.Icon.__module__.rpartition("._")[2]
    if name == "xorg":
        _wait_for_x_tray(TRAY_WAIT_S if tray_wait_s is None else tray_wait_s)
    if name == "dummy":
        raise TrayUnavailable("PYSTRAY_BACKEND=dummy")
    return Backend(name, pystray, bool(pystray.Icon.HAS_MENU), bool(pystray.Icon.HAS_NOTIFICATION))


class Hooks:
    """How the app's threads reach the icon; most backends take calls from any thread."""

    def loop_started(self) -> None:
        """Called from pystray's setup thread once the backend's loop runs."""

    def submit(self, call: Callable[[], None]) -> None:
        call()

    def close(self) -> None:
        pass


class XorgHooks(Hooks):
    def __init__(self, icon: Any) -> None:
        from gpen_watch.tray import xorg

        xorg.enable_clicks(icon)
        self._runner: Any = None
        try:
            self._runner = xorg.LoopRunner(icon)
        except Exception as exc:  # pystray internals changed: call it directly, as documented
            log.debug("xorg tray calls go directly to pystray: %s", exc)

    def submit(self, call: Callable[[], None]) -> None:
        if self._runner is None:
            call()
        else:
            self._runner.submit(call)

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()


class GLibHooks(Hooks):
    """gtk and appindicator: pystray sets SIGINT back to the default (die at once) when its GLib loop
    starts; gpen-watch's handler stops gracefully (images in flight finish), so it is put back."""

    def __init__(self) -> None:
        import signal

        self._sigint = signal.getsignal(signal.SIGINT)  # on the main thread, before the loop

    def loop_started(self) -> None:
        import signal

        from gi.repository import GLib  # loaded by pystray already

        def restore() -> bool:  # runs on the loop (main) thread, the only one that may set handlers
            if callable(self._sigint):
                signal.signal(signal.SIGINT, self._sigint)
            return False  # once

        GLib.idle_add(restore)


class AppKitHooks(Hooks):
    """darwin: AppKit objects may be used from the main thread only, and pystray's darwin backend
    calls them from whichever thread sets a property; so calls are sent to the main run loop.
    pystray also routes SIGINT to NSApp.terminate (exit at once); gpen-watch's own handlers (graceful
    stop) are put back, through PyObjC's Mach-port signals so they run inside the Cocoa loop.
    Not run on a Mac by the test suite (it needs AppKit)."""

    def __init__(self) -> None:
        import signal

        self._handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}

    def loop_started(self) -> None:
        def restore() -> None:
            from PyObjCTools import MachSignals

            for signum, handler in self._handlers.items():
                if callable(handler):
                    MachSignals.signal(signum, lambda n, h=handler: h(n, None))

        self.submit(restore)

    def submit(self, call: Callable[[], None]) -> None:
        from PyObjCTools import AppHelper

        def guarded() -> None:  # an exception must not reach the Cocoa loop
            try:
                call()
            except Exception:
                log.exception("tray icon update failed")

        AppHelper.callAfter(guarded)


def prepare(icon: Any, backend: Backend) -> Hooks:
    """Backend-specific fixes for a new icon, applied before its loop runs (on the main thread)."""
    if backend.name == "xorg":
        return XorgHooks(icon)
    if backend.name in ("gtk", "appindicator"):
        return GLibHooks()
    if backend.name == "darwin":
        return AppKitHooks()
    return Hooks()


def _wait_for_x_tray(wait_s: float) -> None:
    """The xorg backend docks only into a running system tray (XEmbed); without one it is invisible."""
    import Xlib.display

    display = Xlib.display.Display()
    try:
        selection = f"_NET_SYSTEM_TRAY_S{display.get_default_screen()}"
        atom = display.intern_atom(selection)
        deadline = time.monotonic() + wait_s
        while display.get_selection_owner(atom) == 0:  # X.NONE
            if time.monotonic() >= deadline:
                raise TrayUnavailable(
                    f"no system tray on display {display.get_display_name()} (nothing owns {selection} "
                    f"after {wait_s:g} s; GNOME needs the AppIndicator extension); {LINUX_HINT}"
                )
            time.sleep(0.25)
    finally:
        display.close()
