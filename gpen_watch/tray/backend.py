"""Choosing a tray backend (or saying in one sentence why there is none).

The interface is ``base.Backend``; one module per backend: xorg.py (pystray's XEmbed icon, fixed,
with our own menu window), glib.py (gtk and appindicator, through the system's PyGObject),
darwin.py; win32 uses the base as it is.

pystray picks its backend when it is imported; on Linux gpen-watch decides first (glib.choose)
and tells pystray through PYSTRAY_BACKEND, which a user may also set to force one.
"""

from __future__ import annotations

import logging
import os
from collections.abc import MutableMapping
from types import ModuleType

from gpen_watch import platform as platforms
from gpen_watch.tray.base import Backend, TrayUnavailable

log = logging.getLogger(__name__)

# At login the tray may start before the panel that hosts it: wait this long before saying so
# (the xorg and gtk icons dock whenever a tray appears, however late).
TRAY_WAIT_S = 10.0

LINUX_HINT = "for a tray on Linux see docs/tray-and-login.md, 'The tray on Linux'"


def load(
    environ: MutableMapping[str, str] | None = None,
    platform: str | None = None,
    tray_wait_s: float | None = None,
) -> Backend:
    """Choose and import a backend, and check it can show an icon; raises TrayUnavailable otherwise."""
    environ = os.environ if environ is None else environ
    x11 = platforms.current(platform).x11_desktop
    wait_s = TRAY_WAIT_S if tray_wait_s is None else tray_wait_s
    if x11 and not environ.get("DISPLAY") and not environ.get("WAYLAND_DISPLAY"):
        raise TrayUnavailable("no display (DISPLAY and WAYLAND_DISPLAY are not set)")
    if x11:
        from gpen_watch.tray import glib

        glib.import_gi()  # also for a backend forced with PYSTRAY_BACKEND
        if not environ.get("PYSTRAY_BACKEND"):
            name, why = glib.choose()
            log.debug("tray backend %s (%s)", name, why)
            # pystray reads its choice from the environment when it is first imported.
            environ["PYSTRAY_BACKEND"] = name
            if environ is not os.environ:
                os.environ["PYSTRAY_BACKEND"] = name
    try:
        import pystray
    except Exception as exc:  # noqa: BLE001 - ImportError, or Xlib's display errors raised while importing
        reason = f"no usable tray backend ({type(exc).__name__}: {exc})"
        raise TrayUnavailable(f"{reason}; {LINUX_HINT}" if x11 else reason) from None
    name = pystray.Icon.__module__.rpartition("._")[2]
    return wrap(name, pystray, wait_s)


def wrap(name: str, pystray: ModuleType, wait_s: float = 0.0) -> Backend:
    """The Backend for pystray's backend ``name``."""
    if name == "dummy":
        raise TrayUnavailable("PYSTRAY_BACKEND=dummy")
    if name == "xorg":
        from gpen_watch.tray import xorg

        return xorg.XorgBackend(name, pystray, True, False, xorg.wait_for_tray(wait_s))
    if name in ("gtk", "appindicator"):
        from gpen_watch.tray import glib, xorg

        # appindicator shows through D-Bus where a watcher runs (glib.choose); gtk needs a tray.
        present = name == "appindicator" or xorg.wait_for_tray(wait_s)
        return glib.GLibBackend(name, pystray, True, bool(pystray.Icon.HAS_NOTIFICATION), present)
    if name == "darwin":
        from gpen_watch.tray import darwin

        return darwin.DarwinBackend(name, pystray, True, True)
    return Backend(name, pystray, bool(pystray.Icon.HAS_MENU), bool(pystray.Icon.HAS_NOTIFICATION))
