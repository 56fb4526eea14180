"""The gtk and appindicator backends for real: Xvfb, trayer as the tray host, a D-Bus session bus.

The venv has no PyGObject of its own: these run only where the system's (Debian: python3-gi,
gir1.2-gtk-3.0, gir1.2-ayatanaappindicator3-0.1) is built for this Python, which is what
gpen-watch itself looks for (gpen_watch/tray/glib.py). With no StatusNotifierWatcher on the bus,
as here, both backends show an XEmbed icon (GtkStatusIcon) with a GTK menu.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import test_tray_xvfb as xvfb
from test_tray_xvfb import (
    Tray,
    XServer,
    assert_square_icon,
    click_at,
    colour_pixels,
    find_window,
    geometry,
    grab,
)

from gpen_watch.platform import paths
from gpen_watch.service import control
from gpen_watch.tray import glib, model

# The Xvfb, trayer and tray-process fixtures of the xorg tests.
xserver, trays, shots = xvfb.xserver, xvfb.trays, xvfb.shots

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Xvfb and trayer are X11 programs"),
    pytest.mark.skipif(shutil.which("Xvfb") is None, reason="Xvfb not installed (Debian: xvfb)"),
    pytest.mark.skipif(
        shutil.which("dbus-run-session") is None, reason="no dbus-run-session (Debian: dbus-bin)"
    ),
]


def _system_gi(*versions: tuple[str, str]) -> str | None:
    """Why the system's PyGObject with these typelibs cannot be used here (None: it can)."""
    folder = glib.find_system_gi(glib.system_site_dirs())
    if folder is None:
        return f"no system PyGObject built for Python {sys.version_info.major}.{sys.version_info.minor} (Debian: python3-gi)"
    code = "import gi\n" + "".join(f"gi.require_version({n!r}, {v!r})\n" for n, v in versions)
    env = {**os.environ, "PYTHONPATH": str(folder)}
    env.pop("DISPLAY", None)
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if result.returncode != 0:
        return f"missing typelibs {versions}: {result.stderr.strip().splitlines()[-1]}"
    return None


GTK = ("Gtk", "3.0")
INDICATOR = ("AyatanaAppIndicator3", "0.1")
DBUS = ("dbus-run-session", "--")


def xembed_client(tray: Tray, window: Any) -> bool:
    d = tray.x.display
    return (
        window.get_full_property(d.intern_atom("_XEMBED_INFO"), 0) is not None
        and window.get_geometry().width > 1
    )


def gtk_icon(tray: Tray) -> Any:
    tray.is_icon = lambda w: xembed_client(tray, w)  # type: ignore[method-assign]
    return tray.wait(tray.icon_window, "the GTK icon docked in trayer", 60)


def status(field: str) -> Any:
    try:
        return control.request("status").get(field)
    except control.ControlError:
        return None


def log_text() -> str:
    log = paths.log_file()
    return log.read_text() if log.exists() else ""


def _settled_geometry(tray: Tray, xserver: XServer, window: Any) -> tuple[int, int, int, int]:
    """The icon's place once it has stayed the same for a second."""
    seen: list[tuple[tuple[int, int, int, int], float]] = []

    def settled() -> tuple[int, int, int, int] | None:
        now = geometry(xserver.display, window), time.monotonic()
        if not seen or seen[-1][0] != now[0]:
            seen.append(now)
            return None
        return now[0] if now[1] - seen[-1][1] >= 1.0 else None

    return tray.wait(settled, "the icon's place to settle", 30)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gtk", "appindicator"])
def test_glib_icon_docks_redraws_and_has_a_menu(
    name: str, xserver: XServer, trays: Callable[..., Tray], tmp_path: Path, shots: Path
) -> None:
    why = _system_gi(GTK, INDICATOR) if name == "appindicator" else _system_gi(GTK)
    if why:
        pytest.skip(why)
    xserver.start_tray_host(tmp_path)
    env = {"PYSTRAY_BACKEND": name} if name == "appindicator" else {}  # gtk: chosen by gpen-watch
    tray = trays(xserver, DBUS, **env)
    window = gtk_icon(tray)
    tray.wait(lambda: status("paused") is False, "the service answering", 60)
    assert f"tray icon shown (pystray {name} backend)" in log_text()
    tray.wait(
        lambda: _drawn(tray, model.TrayView("idle", 0), shots / f"tray-{name}-idle.png"), "idle icon", 15
    )
    # The tray host sizes a new icon after docking it (16 px wide, then its slot); under load that
    # can come after the first draw, so the place to hold is the one it settles at.
    first = _settled_geometry(tray, xserver, window)
    for n in range(50):  # every pause/resume redraws the icon
        control.request("pause" if n % 2 == 0 else "resume")
        paused = n % 2 == 0
        view = model.TrayView("paused" if paused else "idle", 0, paused=paused)
        tray.wait(
            lambda v=view: _drawn(tray, v, shots / f"tray-{name}-redraw.png"),  # type: ignore[misc]
            f"the {view.state} icon after {n + 1} redraws",
            15,
        )
        assert geometry(xserver.display, tray.icon_window()) == first, f"after {n + 1} redraws"

    tray.click(3)  # GTK's own menu
    menu = tray.wait(lambda: _popup(xserver.display), "the GTK menu", 15)
    x, y, w, h = geometry(xserver.display, menu)
    screen = grab(xserver.display)
    screen.save(shots / f"tray-{name}-menu-screen.png")
    screen.crop((x, y, x + w, y + h)).save(shots / f"tray-{name}-menu.png")
    assert h > 200, (w, h)
    assert w > 120, (w, h)
    click_at(xserver.display, 5, 380)  # outside: closes it
    tray.wait(lambda: _popup(xserver.display) is None, "the GTK menu to close", 15)

    host = xserver.procs.pop()  # the tray host restarts: GTK docks the icon into the new one
    host.terminate()
    host.wait(10)
    xserver.start_tray_host(tmp_path)
    tray.wait(tray.icon_window, "the icon docked in the new tray", 30)
    assert geometry(xserver.display, tray.icon_window())[2:] == first[2:]
    view = model.TrayView("idle", 0)
    tray.wait(lambda: _drawn(tray, view, shots / f"tray-{name}-redocked.png"), "the icon redrawn", 15)
    assert tray.stop() == 0
    assert "no tray icon" not in log_text()


def _drawn(tray: Tray, view: model.TrayView, path: Path) -> bool:
    """gtk: our image at the size GTK gives, square. appindicator without a StatusNotifierWatcher
    falls back to libayatana's own GtkStatusIcon, which scales the file past its 48x46 slot (the
    badge's corner is cut off; gpen-watch picks gtk in that case): only the state colour is checked."""
    try:
        if tray.env.get("PYSTRAY_BACKEND") == "appindicator":
            crop = tray.shot(path)
            others = [s for s in model.BADGE_COLOURS if s != view.state]
            return colour_pixels(crop, model.BADGE_COLOURS[view.state][0], tol=20) > 20 and all(
                colour_pixels(crop, model.BADGE_COLOURS[s][0], tol=10) < 5
                for s in others
                if s in ("idle", "paused")
            )
        assert_square_icon(tray, view, path)
        return True
    except AssertionError:
        return False


def _popup(display: Any) -> Any:
    """A mapped override-redirect window (a menu) other than trayer's own."""
    from Xlib import X

    for w in display.screen().root.query_tree().children:
        try:
            a = w.get_attributes()
            if a.override_redirect and a.map_state == X.IsViewable and w.get_geometry().height > 50:
                return w
        except Exception:  # noqa: BLE001
            continue
    return None


def test_gtk_without_dbus_is_headless_with_nothing_left_in_the_tray(
    xserver: XServer, trays: Callable[..., Tray], tmp_path: Path
) -> None:
    why = _system_gi(GTK)
    if why:
        pytest.skip(why)
    xserver.start_tray_host(tmp_path)
    tray = trays(xserver, PYSTRAY_BACKEND="gtk", DBUS_SESSION_BUS_ADDRESS="unix:path=/nonexistent")
    tray.wait(lambda: "running headless" in log_text(), "the headless line", 60)
    tray.wait(lambda: status("paused") is False, "the service answering", 60)
    # Any XEmbed window in the tray, however narrow (it was a 1x46 empty one).
    tray.is_icon = lambda w: w.get_full_property(xserver.display.intern_atom("_XEMBED_INFO"), 0) is not None  # type: ignore[method-assign]
    assert tray.icon_window() is None
    assert tray.stop() == 0


def test_without_dbus_it_picks_the_xorg_icon(
    xserver: XServer, trays: Callable[..., Tray], tmp_path: Path
) -> None:
    """Not forced: no session bus means no gtk/appindicator, and the xorg icon (with its menu) instead."""
    if _system_gi(GTK):
        pytest.skip(_system_gi(GTK))
    xserver.start_tray_host(tmp_path)
    tray = trays(xserver, DBUS_SESSION_BUS_ADDRESS="unix:path=/nonexistent")
    tray.wait_title("gpen-watch: idle: queue empty")
    assert "tray icon shown (pystray xorg backend" in log_text()
    assert find_window(xserver.display, lambda w: xembed_client(tray, w)).id == tray.icon_window().id
    assert tray.stop() == 0


def test_gtk_icon_waits_for_a_late_tray(
    xserver: XServer, trays: Callable[..., Tray], tmp_path: Path, shots: Path
) -> None:
    """No tray at start: gtk says so once, and GTK docks the icon when the panel comes."""
    why = _system_gi(GTK)
    if why:
        pytest.skip(why)
    tray = trays(xserver, DBUS, TEST_TRAY_WAIT_S="1")
    tray.wait(lambda: status("paused") is False, "the service answering", 60)
    assert "tray icon shown" not in log_text()  # not while no tray shows it
    tray.is_icon = lambda w: xembed_client(tray, w)  # type: ignore[method-assign]
    assert tray.icon_window() is None
    xserver.start_tray_host(tmp_path)
    tray.wait(tray.icon_window, "the GTK icon docked in the late tray", 30)
    tray.wait(lambda: _drawn(tray, model.TrayView("idle", 0), shots / "tray-gtk-late.png"), "idle icon", 15)
    assert tray.stop() == 0
    waiting = [ln for ln in log_text().splitlines() if "no system tray on the display yet" in ln]
    assert len(waiting) == 1, waiting
    assert waiting[0].endswith("the icon appears when one starts"), waiting


@pytest.mark.slow
def test_a_left_click_on_the_gtk_icon_opens_the_outbox_once(
    xserver: XServer, trays: Callable[..., Tray], tmp_path: Path
) -> None:
    """GTK's left click runs the menu's default item (Open outbox): one click, one xdg-open."""
    why = _system_gi(GTK)
    if why:
        pytest.skip(why)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    opened = tmp_path / "opened.txt"
    opener = bin_dir / "xdg-open"
    opener.write_text(f'#!/bin/sh\necho "$1" >> "{opened}"\n')
    opener.chmod(0o755)
    xserver.start_tray_host(tmp_path)
    tray = trays(xserver, DBUS, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    gtk_icon(tray)
    tray.wait(lambda: status("paused") is False, "the service answering", 60)
    tray.click(1)
    tray.wait(lambda: opened.exists() and opened.read_text(), "the outbox opened", 15)
    # A second open would follow within GTK's double-click time; give it that long, and more.
    with contextlib.suppress(AssertionError):
        tray.wait(lambda: len(opened.read_text().splitlines()) > 1, "a second open", 2)
    assert opened.read_text().splitlines() == [str(tray.outbox)]
    assert tray.stop() == 0
