"""A real tray: `gpen-watch run`'s service with the tray icon, on Xvfb with trayer as the tray host.

The service is the real one (watcher, journal, worker processes with the fake restorer); the icon is
pystray's xorg backend, docked into trayer through XEmbed. The test clicks the icon through XTEST,
drops photos, and reads the icon's window name and pixels back from the X server. Skipped where
Xvfb or trayer cannot be had (.ci/run installs them on Debian). Screenshots go to the test's tmp
folder, or to $TRAY_SHOTS to keep them (the folder is printed; `pytest -s` shows it).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageChops

from gpen_watch.platform import paths
from gpen_watch.service import control
from gpen_watch.tray import icon as icons
from gpen_watch.tray import model, xmenu, xorg

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Xvfb and trayer are X11 programs"),
    pytest.mark.skipif(shutil.which("Xvfb") is None, reason="Xvfb not installed (Debian: xvfb)"),
]

Xlib = pytest.importorskip("Xlib.display")

from Xlib import X  # noqa: E402
from Xlib.ext import xtest  # noqa: E402

TESTS_DIR = Path(__file__).parent

# What `gpen-watch run` does once gpen_watch.cli.run hands the service to the tray (see gpen_watch/tray/app.py).
DRIVER = """
import argparse, faulthandler, os, signal, sys
faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test asks for stacks when it hangs
from gpen_watch import config
from gpen_watch.cli import run as run_cli
from gpen_watch.service.daemon import Service, engine_from_environ
from gpen_watch.tray import backend
from gpen_watch.tray.app import run_with_tray
backend.TRAY_WAIT_S = float(os.environ.get("TEST_TRAY_WAIT_S", backend.TRAY_WAIT_S))
parser = argparse.ArgumentParser()
run_cli.add_arguments(parser, "run")
args = parser.parse_args(sys.argv[1:])
cfg = config.load(args.config, run_cli.overrides(args))
log_path = run_cli.setup_logging(True)
service = Service(cfg, engine=engine_from_environ(os.environ), stop_grace=args.stop_grace)
for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # as gpen_watch.cli.run does
    signal.signal(signum, lambda *_: service.request_stop())
sys.exit(run_with_tray(service, log_path=log_path))
"""


@dataclass
class XServer:
    name: str
    display: Any  # Xlib.display.Display
    procs: list[subprocess.Popen[bytes]]

    def start_tray_host(self, tmp_path: Path) -> None:
        if shutil.which("trayer") is None:
            pytest.skip("trayer not installed (Debian: trayer)")
        # The child writes to its own copy of the descriptor: ours can close at once.
        with open(tmp_path / "trayer.log", "wb") as log:
            self.procs.append(
                subprocess.Popen(
                    [
                        "trayer",
                        "--edge",
                        "top",
                        "--align",
                        "right",
                        "--widthtype",
                        "request",
                        "--height",
                        "48",
                        "--SetDockType",
                        "true",
                        "--transparent",
                        "false",
                        "--tint",
                        "0x333333",
                    ],
                    env={**os.environ, "DISPLAY": self.name},
                    stdout=log,
                    stderr=log,
                )
            )
        atom = self.display.intern_atom("_NET_SYSTEM_TRAY_S0")
        wait_for(lambda: self.display.get_selection_owner(atom) != 0, "trayer to own the system tray", 20)


@pytest.fixture
def xserver(tmp_path: Path) -> Iterator[XServer]:
    read_fd, write_fd = os.pipe()
    with open(tmp_path / "xvfb.log", "wb") as log:
        proc = subprocess.Popen(
            ["Xvfb", "-displayfd", str(write_fd), "-screen", "0", "640x400x24", "-nolisten", "tcp"],
            pass_fds=(write_fd,),
            stdout=log,
            stderr=log,
        )
    os.close(write_fd)
    with os.fdopen(read_fd) as f:
        number = f.readline().strip()
    if not number.isdigit():
        proc.kill()
        proc.wait()
        pytest.skip(f"Xvfb did not start: {(tmp_path / 'xvfb.log').read_text(errors='replace')[-500:]}")
    name = f":{number}"
    display = Xlib.Display(name)
    server = XServer(name, display, [proc])
    try:
        yield server
    finally:
        display.close()
        for p in reversed(server.procs):
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()


class Tray:
    """One service + tray process on the X server."""

    def __init__(self, root: Path, x: XServer, prefix: tuple[str, ...] = (), **env: str) -> None:
        self.root, self.x = root, x
        self.inbox, self.outbox = root / "inbox", root / "outbox"
        self.env = {
            **os.environ,
            "DISPLAY": x.name,
            "GPEN_WATCH_RESTORER": "fake_restorer:FakeRestorer",
            "PYTHONPATH": os.pathsep.join([str(TESTS_DIR), os.environ.get("PYTHONPATH", "")]).strip(
                os.pathsep
            ),
            **env,
        }
        self.env.pop("WAYLAND_DISPLAY", None)
        if "PYSTRAY_BACKEND" not in env:
            self.env.pop("PYSTRAY_BACKEND", None)
        self.stderr = root / "tray-stderr.txt"
        with open(self.stderr, "wb") as err:
            self.proc = subprocess.Popen(
                [
                    *prefix,
                    sys.executable,
                    "-c",
                    DRIVER,
                    "--inbox",
                    str(self.inbox),
                    "--outbox",
                    str(self.outbox),
                    "--set",
                    "watch.settle_seconds=0.2",
                    "--stop-grace",
                    "5",
                ],
                env=self.env,
                stdout=subprocess.DEVNULL,
                stderr=err,
                # Its own process group: close() also ends what a prefix started (a D-Bus daemon).
                start_new_session=True,
            )

    def logs(self) -> str:
        log = paths.log_file()
        text = log.read_text(errors="replace")[-5000:] if log.exists() else "(no log)"
        return f"--- log ---\n{text}\n--- stderr ---\n{self.stderr.read_text(errors='replace')[-3000:]}"

    def wait(self, cond: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
        def check() -> Any:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"tray exited with {self.proc.returncode} waiting for {what}\n{self.logs()}"
                )
            return cond()

        try:
            return wait_for(check, what, timeout)
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n{self.logs()}") from None

    def icon_window(self) -> Any:
        """Our icon's X window, once docked (its parent is the tray host's, not the root window)."""
        return find_window(self.x.display, self.is_icon)

    def is_icon(self, window: Any) -> bool:
        return (window.get_wm_name() or "").startswith("gpen-watch")

    def title(self) -> str:
        """The icon's name as EWMH readers see it (UTF-8 _NET_WM_NAME), else WM_NAME."""
        w = self.icon_window()
        if w is None:
            return ""
        d = self.x.display
        utf8 = w.get_full_text_property(d.intern_atom("_NET_WM_NAME"), d.intern_atom("UTF8_STRING"))
        return utf8 or w.get_wm_name() or ""

    def wait_title(self, title: str, timeout: float = 60.0) -> None:
        self.wait(lambda: self.title() == title, f"icon title {title!r} (now {self.title()!r})", timeout)

    def click(self, button: int = 1) -> None:
        x, y, w, h = geometry(self.x.display, self.icon_window())
        click_at(self.x.display, x + w // 2, y + h // 2, button)

    def shot(self, path: Path) -> Image.Image:
        """The icon as the X server shows it (and the whole screen, saved beside it)."""
        x, y, w, h = geometry(self.x.display, self.icon_window())
        screen = grab(self.x.display)
        screen.save(path.with_name(path.stem + "-screen.png"))
        crop = screen.crop((x, y, x + w, y + h))
        crop.save(path)
        return crop

    def stop(self) -> int:
        control.request("stop")
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGUSR1)
            time.sleep(1)
            raise AssertionError(f"the tray did not exit after stop\n{self.logs()}") from None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)


@pytest.fixture
def trays(tmp_path: Path) -> Iterator[Callable[..., Tray]]:
    made: list[Tray] = []

    def make(x: XServer, prefix: tuple[str, ...] = (), **env: str) -> Tray:
        t = Tray(tmp_path, x, prefix, **env)
        made.append(t)
        return t

    yield make
    for t in made:
        t.close()


# --- X helpers -------------------------------------------------------------------------------------


def wait_for(cond: Callable[[], Any], what: str, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.1)
    raise TimeoutError(f"timed out waiting for {what}")


def click_at(display: Any, x: int, y: int, button: int = 1) -> None:
    xtest.fake_input(display, X.MotionNotify, x=x, y=y)
    xtest.fake_input(display, X.ButtonPress, button)
    xtest.fake_input(display, X.ButtonRelease, button)
    display.sync()


def find_window(display: Any, match: Callable[[Any], bool]) -> Any:
    root = display.screen().root
    stack = list(root.query_tree().children)
    while stack:
        w = stack.pop()
        try:
            if match(w) and w.query_tree().parent.id != root.id:
                return w
            stack.extend(w.query_tree().children)
        except Exception:  # noqa: BLE001 - windows come and go while we look
            continue
    return None


def geometry(display: Any, window: Any) -> tuple[int, int, int, int]:
    root = display.screen().root
    g = window.get_geometry()
    pos = root.translate_coords(window, 0, 0)
    return pos.x, pos.y, g.width, g.height


def grab(display: Any) -> Image.Image:
    root = display.screen().root
    g = root.get_geometry()
    raw = root.get_image(0, 0, g.width, g.height, X.ZPixmap, 0xFFFFFFFF)
    return Image.frombytes("RGB", (g.width, g.height), raw.data, "raw", "BGRX")


def expected_icon(view: model.TrayView, crop: Image.Image) -> Image.Image:
    """Our rendering as the xorg backend draws it: square, centred, over the panel's colour (which
    shows at the crop's corner: the icon is a square in a taller slot)."""
    image = icons.render(icons.load_base(), model.badge(view))
    return xorg.square_on(Image.new("RGB", crop.size, crop.getpixel((0, 0))), image)


def drawn_box(crop: Image.Image) -> tuple[int, int, int, int]:
    """The bounding box of what differs from the panel colour (the icon as drawn)."""
    bg = Image.new("RGB", crop.size, crop.getpixel((0, 0)))
    mask = ImageChops.difference(crop.convert("RGB"), bg).convert("L").point(lambda v: 255 if v > 24 else 0)
    box = mask.getbbox()
    assert box is not None, "nothing drawn in the icon's window"
    return box


def difference(a: Image.Image, b: Image.Image) -> float:
    da, db = a.convert("RGB").tobytes(), b.convert("RGB").tobytes()
    assert len(da) == len(db)
    return sum(abs(p - q) for p, q in zip(da, db)) / len(da)


def colour_pixels(image: Image.Image, hex_colour: str, tol: int = 40) -> int:
    want = [int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)]
    data = image.convert("RGB").tobytes()
    return sum(
        1
        for px in zip(data[0::3], data[1::3], data[2::3])
        if all(abs(a - b) <= tol for a, b in zip(px, want))
    )


def drop(folder: Path, name: str, data: bytes) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{name}.part"
    tmp.write_bytes(data)
    os.replace(tmp, folder / name)


# --- tests -------------------------------------------------------------------------------------------

XORG = {"PYSTRAY_BACKEND": "xorg"}


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    """Where screenshots go: $TRAY_SHOTS (to keep and look at them), else the test's tmp folder."""
    folder = Path(os.environ.get("TRAY_SHOTS") or tmp_path / "shots")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"tray screenshots in {folder}")
    return folder


def assert_square_icon(tray: Tray, view: model.TrayView, path: Path, tolerance: int = 1) -> Image.Image:
    """The icon fills its slot's shorter side, square to ``tolerance`` px, and shows ``view``."""
    crop = tray.shot(path)
    left, top, right, bottom = drawn_box(crop)
    side = min(crop.size)
    # Square and as large as the slot allows (not stretched to the slot into an oval).
    assert abs((right - left) - (bottom - top)) <= tolerance, (
        f"{path}: icon drawn in {right - left}x{bottom - top} px of a {crop.width}x{crop.height} slot"
    )
    assert right - left >= side - 2, (
        f"{path}: icon drawn in {right - left}x{bottom - top} px of a {crop.width}x{crop.height} slot"
    )
    drawn = crop.crop((left, top, right, bottom))
    want = icons.render(icons.load_base(), model.badge(view)).resize(drawn.size, Image.Resampling.LANCZOS)
    flat = Image.new("RGB", drawn.size, crop.getpixel((0, 0)))
    flat.paste(want, (0, 0), want)
    assert difference(drawn, flat) < 2.5, f"{path} differs from the rendering of {view.state}"
    return crop


def test_icon_docks_shows_the_queue_and_a_click_pauses(
    xserver: XServer, trays: Callable[..., Tray], tmp_path: Path, shots: Path
) -> None:
    xserver.start_tray_host(tmp_path)
    tray = trays(xserver, **XORG)
    tray.wait_title("gpen-watch: idle: queue empty")
    window = tray.icon_window()
    assert window is not None  # docked: find_window only accepts windows reparented into the tray
    idle = assert_square_icon(tray, model.TrayView("idle", 0), shots / "tray-idle.png")
    assert colour_pixels(idle, model.BADGE_COLOURS["idle"][0]) > 10

    tray.click()  # a left click toggles pause
    tray.wait_title("gpen-watch: paused: queue empty", timeout=15)
    for name in ("a.jpg", "b.jpg", "c.png"):
        drop(tray.inbox, name, f"photo {name}".encode())
    tray.wait_title("gpen-watch: paused: 3 in the queue", timeout=30)
    paused = assert_square_icon(tray, model.TrayView("paused", 3), shots / "tray-paused-3.png")
    assert difference(paused, idle) > 10.0  # the queue depth and state show in the pixels
    assert colour_pixels(paused, model.BADGE_COLOURS["paused"][0]) > 10
    assert colour_pixels(paused, model.BADGE_COLOURS["idle"][0], tol=10) == 0

    tray.click()  # resume: the three photos go through
    tray.wait(lambda: len(list(tray.outbox.glob("*.*"))) == 3, "3 results in the outbox", 60)
    tray.wait_title("gpen-watch: idle: queue empty", timeout=15)
    assert tray.stop() == 0
    log = (paths.log_file()).read_text()
    assert "tray icon shown (pystray xorg backend; click the icon to pause or resume, right-click" in log
    assert "no tray icon" not in log


@pytest.mark.slow
def test_icon_keeps_its_size_and_pixels_through_50_clicks(
    xserver: XServer, trays: Callable[..., Tray], tmp_path: Path, shots: Path
) -> None:
    """Once, after a few redraws (six clicks; a resume with 25 queued; 15 files dropped while
    paused) the icon collapsed to 1x46 for good. Every click here redraws it (pause <-> idle)."""
    xserver.start_tray_host(tmp_path)
    tray = trays(xserver, **XORG)
    tray.wait_title("gpen-watch: idle: queue empty")
    window = tray.icon_window()
    first = geometry(xserver.display, window)
    assert first[2] >= 16, first
    assert first[3] >= 16, first
    for n in range(50):
        tray.click()
        paused = n % 2 == 0
        view = model.TrayView("paused" if paused else "idle", 0, paused=paused)
        tray.wait_title(model.title(view), timeout=15)
        assert tray.icon_window().id == window.id
        assert geometry(xserver.display, window) == first, f"after {n + 1} clicks"
        path = shots / ("tray-click-50.png" if n == 49 else "tray-click.png")
        tray.wait(
            lambda v=view, p=path: difference(tray.shot(p), expected_icon(v, tray.shot(p))) < 2.0,  # type: ignore[misc]
            f"the {view.state} icon drawn after {n + 1} clicks ({path})",
            10,
        )
    # Paused with 15 dropped, then resumed with them queued: the other two cases that collapsed it.
    tray.click()
    tray.wait_title("gpen-watch: paused: queue empty", timeout=15)
    for i in range(15):
        drop(tray.inbox, f"p{i:02}.jpg", f"photo {i}".encode())
    tray.wait_title("gpen-watch: paused: 15 in the queue", timeout=30)
    assert_square_icon(tray, model.TrayView("paused", 15), shots / "tray-paused-15.png")
    tray.click()
    tray.wait(lambda: len(list(tray.outbox.glob("*.*"))) == 15, "15 results in the outbox", 60)
    tray.wait_title("gpen-watch: idle: queue empty", timeout=15)
    assert geometry(xserver.display, tray.icon_window()) == first
    assert_square_icon(tray, model.TrayView("idle", 0), shots / "tray-idle-after.png")
    assert tray.stop() == 0


def test_a_problem_with_a_long_message_shows_in_the_title(
    xserver: XServer, trays: Callable[..., Tray], tmp_path: Path, shots: Path
) -> None:
    """A problem message cut with "…": the title must change too (it raised UnicodeEncodeError)."""
    xserver.start_tray_host(tmp_path)
    tray = trays(xserver, FAKE_LOAD="model_error", **XORG)
    tray.wait(lambda: tray.title().startswith("gpen-watch: needs attention"), "the problem title", 60)
    title = tray.title()
    assert title.endswith(model.ELLIPSIS), title
    assert len(title) == model.MAX_TITLE, title
    assert "GPEN-BFR-512: weights" in title
    # WM_NAME is Latin-1: it says the same with "..." (older trays and tools read only that).
    assert tray.icon_window().get_wm_name() == title[:-1] + "..."
    red = tray.shot(shots / "tray-problem.png")
    assert colour_pixels(red, model.BADGE_COLOURS["error"][0]) > 10
    log = (paths.log_file()).read_text()
    assert "UnicodeEncodeError" not in log
    assert "tray icon update failed" not in log
    assert tray.stop() == 0


@pytest.mark.slow
def test_icon_docks_again_when_the_tray_host_restarts(
    xserver: XServer, trays: Callable[..., Tray], tmp_path: Path, shots: Path
) -> None:
    xserver.start_tray_host(tmp_path)
    tray = trays(xserver, **XORG)
    tray.wait_title("gpen-watch: idle: queue empty")
    first = geometry(xserver.display, tray.icon_window())
    host = xserver.procs.pop()
    host.terminate()
    host.wait(10)
    tray.wait(lambda: tray.icon_window() is None, "the icon to leave the dead tray", 15)
    control.request("pause")  # a redraw while no tray is there
    xserver.start_tray_host(tmp_path)
    tray.wait(lambda: tray.icon_window() is not None, "the icon to dock in the new tray", 30)
    tray.wait_title("gpen-watch: paused: queue empty", timeout=15)
    assert geometry(xserver.display, tray.icon_window())[2:] == first[2:]
    assert_square_icon(tray, model.TrayView("paused", 0), shots / "tray-redocked.png")
    tray.click()  # and it still takes clicks
    tray.wait_title("gpen-watch: idle: queue empty", timeout=15)
    assert tray.stop() == 0
    log = (paths.log_file()).read_text()
    assert "Failed to dock" not in log
    assert "AssertionError" not in log
    assert "a system tray appeared on the display: docking the icon" in log


def test_a_tray_that_appears_late_gets_the_icon(
    xserver: XServer, trays: Callable[..., Tray], tmp_path: Path, shots: Path
) -> None:
    """At login the panel may come up after gpen-watch: it said so once and docks when it comes."""
    tray = trays(xserver, TEST_TRAY_WAIT_S="1", **XORG)
    tray.wait(lambda: _status_ok(), "the service answering", 60)
    drop(tray.inbox, "a.jpg", b"photo a")
    tray.wait(lambda: (tray.outbox / "a.jpg").exists(), "a.jpg restored", 60)
    assert tray.icon_window() is None
    xserver.start_tray_host(tmp_path)
    tray.wait_title("gpen-watch: idle: queue empty", timeout=30)
    assert_square_icon(tray, model.TrayView("idle", 0), shots / "tray-late.png")
    tray.click()
    tray.wait_title("gpen-watch: paused: queue empty", timeout=15)
    assert tray.stop() == 0
    lines = [ln for ln in (paths.log_file()).read_text().splitlines() if "gpen_watch.tray" in ln]
    waiting = [ln for ln in lines if "no system tray on the display yet" in ln]
    assert len(waiting) == 1, lines
    assert waiting[0].endswith("the icon appears when one starts"), lines
    assert not any("running headless" in ln for ln in lines), lines


def menu_row_centre(entries: list[model.Entry], text: str) -> int:
    """Where xmenu draws the row of ``text``, from its top edge."""
    top = 1
    for e in entries:
        height = xmenu.SEPARATOR_ROW if e.separator else xmenu.ROW
        if e.text == text and not e.separator:
            return top + height // 2
        top += height
    raise AssertionError(f"no menu row {text!r}")


def test_right_click_opens_a_menu_that_pauses_and_quits(
    xserver: XServer, trays: Callable[..., Tray], tmp_path: Path, shots: Path
) -> None:
    xserver.start_tray_host(tmp_path)
    tray = trays(xserver, **XORG)
    tray.wait_title("gpen-watch: idle: queue empty")

    def open_menu() -> Any:
        tray.click(3)
        return tray.wait(lambda: _menu_window(xserver.display), "the menu window", 15)

    menu = open_menu()
    x, y, w, h = geometry(xserver.display, menu)
    _icon_x, icon_y, _icon_w, icon_h = geometry(xserver.display, tray.icon_window())
    assert y == icon_y + icon_h  # right below the icon, which stays visible
    entries = model.menu(model.TrayView("idle", 0), click_pauses=True)
    xtest.fake_input(xserver.display, X.MotionNotify, x=x + w // 2, y=y + menu_row_centre(entries, "Pause"))
    xserver.display.sync()
    hover = xmenu.COLOURS["hover"]
    tray.wait(
        lambda: colour_pixels(grab(xserver.display).crop((x, y, x + w, y + h)), hover, 8) > 500, "hover", 10
    )
    screen = grab(xserver.display)
    screen.save(shots / "tray-menu-screen.png")
    shot = screen.crop((x, y, x + w, y + h))
    shot.save(shots / "tray-menu.png")
    assert w >= xmenu.MIN_WIDTH
    assert h > 10 * xmenu.ROW
    assert abs(h - menu_row_centre(entries, "Quit") - xmenu.ROW // 2 - 1) <= 1  # every entry is drawn
    assert xmenu.render(*_layout(entries), None) is not None

    click_at(xserver.display, x + w // 2, y + menu_row_centre(entries, "Pause"))
    tray.wait_title("gpen-watch: paused: queue empty", timeout=15)
    tray.wait(lambda: _menu_window(xserver.display) is None, "the menu to close", 10)

    menu = open_menu()  # a click outside closes it and does nothing else
    click_at(xserver.display, 5, 380)
    tray.wait(lambda: _menu_window(xserver.display) is None, "the menu to close", 10)
    assert tray.proc.poll() is None

    menu = open_menu()
    x, y, w, h = geometry(xserver.display, menu)
    click_at(xserver.display, x + w // 2, y + menu_row_centre(entries, "Quit"))
    assert tray.proc.wait(30) == 0
    assert "Quit chosen in the tray: stopping" in (paths.log_file()).read_text()


def _menu_window(display: Any) -> Any:
    root = display.screen().root
    for w in root.query_tree().children:
        try:
            if w.get_wm_name() == "gpen-watch menu" and w.get_attributes().map_state == X.IsViewable:
                return w
        except Exception:  # noqa: BLE001
            continue
    return None


def _layout(entries: list[model.Entry]) -> tuple[list[xmenu.Row], int, int]:
    rows = [
        xmenu.Row(0, xmenu.SEPARATOR_ROW, "", None, False, None)
        if e.separator
        else xmenu.Row(0, xmenu.ROW, e.text, e, e.action is not None, e.checked)
        for e in entries
    ]
    return rows, xmenu.MIN_WIDTH, sum(r.height for r in rows) + 2


def test_unreachable_display_runs_headless(trays: Callable[..., Tray], tmp_path: Path) -> None:
    x = XServer(":9999", None, [])  # nothing listens there
    tray = trays(x)
    tray.wait(lambda: _status_ok(), "the service answering", 60)
    assert tray.stop() == 0
    lines = [
        ln
        for ln in (paths.log_file()).read_text().splitlines()
        if "gpen_watch.tray" in ln and " DEBUG " not in ln
    ]
    assert len(lines) == 1, lines
    assert "no tray icon: no usable tray backend" in lines[0], lines


def _status_ok() -> bool:
    try:
        return bool(control.request("status").get("ok"))
    except control.ControlError:
        return False
