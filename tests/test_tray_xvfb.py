"""A real tray: `gpen-watch run`'s service with the tray icon, on Xvfb with trayer as the tray host.

The service is the real one (watcher, journal, worker processes with the fake restorer); the icon is
pystray's xorg backend, docked into trayer through XEmbed. The test clicks the icon through XTEST,
drops photos, and reads the icon's window name and pixels back from the X server. Skipped where
Xvfb or trayer cannot be had (.ci/run installs them on Debian).
"""

from __future__ import annotations

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
from PIL import Image

from gpen_watch import paths
from gpen_watch.service import control
from gpen_watch.tray import icon as icons
from gpen_watch.tray import model

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Xvfb and trayer are X11 programs"),
    pytest.mark.skipif(shutil.which("Xvfb") is None, reason="Xvfb not installed (Debian: xvfb)"),
]

Xlib = pytest.importorskip("Xlib.display")
from Xlib import X  # noqa: E402
from Xlib.ext import xtest  # noqa: E402

TESTS_DIR = Path(__file__).parent

# What `gpen-watch run` does once run_cli hands the service to the tray (see gpen_watch/tray/app.py).
DRIVER = """
import argparse, faulthandler, os, signal, sys
faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test asks for stacks when it hangs
from gpen_watch import config
from gpen_watch.service import run_cli
from gpen_watch.service.daemon import Service
from gpen_watch.tray import backend
from gpen_watch.tray.app import run_with_tray
backend.TRAY_WAIT_S = float(os.environ.get("TEST_TRAY_WAIT_S", backend.TRAY_WAIT_S))
parser = argparse.ArgumentParser()
run_cli.add_arguments(parser, "run")
args = parser.parse_args(sys.argv[1:])
cfg = config.load(args.config, run_cli.overrides(args))
log_path = run_cli.setup_logging(True)
service = Service(cfg, factory=os.environ["GPEN_WATCH_RESTORER"], stop_grace=args.stop_grace)
for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # as run_cli does
    signal.signal(signum, lambda *_: service.request_stop())
sys.exit(run_with_tray(service, cfg, log_path=log_path))
"""


@dataclass
class XServer:
    name: str
    display: Any  # Xlib.display.Display
    procs: list[subprocess.Popen[bytes]]

    def start_tray_host(self, tmp_path: Path) -> None:
        if shutil.which("trayer") is None:
            pytest.skip("trayer not installed (Debian: trayer)")
        log = open(tmp_path / "trayer.log", "wb")  # noqa: SIM115 - lives as long as the process
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
    log = open(tmp_path / "xvfb.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write_fd), "-screen", "0", "640x240x24", "-nolisten", "tcp"],
        pass_fds=(write_fd,),
        stdout=log,
        stderr=log,
    )
    os.close(write_fd)
    with os.fdopen(read_fd) as f:
        number = f.readline().strip()
    if not number.isdigit():
        proc.kill()
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

    def __init__(self, root: Path, x: XServer, **env: str) -> None:
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
        self.env.pop("PYSTRAY_BACKEND", None)
        self.env.pop("WAYLAND_DISPLAY", None)
        self.stderr = root / "tray-stderr.txt"
        with open(self.stderr, "wb") as err:
            self.proc = subprocess.Popen(
                [
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
            )

    def logs(self) -> str:
        log = paths.log_dir() / "gpen-watch.log"
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
        return find_window(self.x.display, lambda w: (w.get_wm_name() or "").startswith("gpen-watch"))

    def title(self) -> str:
        w = self.icon_window()
        return (w.get_wm_name() or "") if w is not None else ""

    def wait_title(self, title: str, timeout: float = 60.0) -> None:
        self.wait(lambda: self.title() == title, f"icon title {title!r} (now {self.title()!r})", timeout)

    def click(self) -> None:
        x, y, w, h = geometry(self.x.display, self.icon_window())
        d = self.x.display
        xtest.fake_input(d, X.MotionNotify, x=x + w // 2, y=y + h // 2)
        xtest.fake_input(d, X.ButtonPress, 1)
        xtest.fake_input(d, X.ButtonRelease, 1)
        d.sync()

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


@pytest.fixture
def trays(tmp_path: Path) -> Iterator[Callable[..., Tray]]:
    made: list[Tray] = []

    def make(x: XServer, **env: str) -> Tray:
        t = Tray(tmp_path, x, **env)
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


def find_window(display: Any, match: Callable[[Any], bool]) -> Any:
    root = display.screen().root
    stack = list(root.query_tree().children)
    while stack:
        w = stack.pop()
        try:
            if match(w) and w.query_tree().parent.id != root.id:
                return w
            stack.extend(w.query_tree().children)
        except Exception:  # windows come and go while we look
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


def expected_icon(view: model.TrayView, size: tuple[int, int]) -> Image.Image:
    """Our rendering, scaled and flattened the way pystray's xorg backend puts it on its window."""
    image = icons.render(icons.load_base(), model.badge(view))
    flat = Image.new("RGB", size)
    flat.paste(image.resize(size, Image.Resampling.LANCZOS))
    return flat


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


def test_icon_docks_shows_the_queue_and_a_click_pauses(
    xserver: XServer, trays: Callable[..., Tray], tmp_path: Path
) -> None:
    xserver.start_tray_host(tmp_path)
    tray = trays(xserver)
    tray.wait_title("gpen-watch: idle: queue empty")
    window = tray.icon_window()
    assert window is not None  # docked: find_window only accepts windows reparented into the tray
    idle = tray.shot(tmp_path / "tray-idle.png")
    assert difference(idle, expected_icon(model.TrayView("idle", 0), idle.size)) < 2.0
    assert colour_pixels(idle, model.BADGE_COLOURS["idle"][0]) > 10

    tray.click()  # xorg has no menu: a click toggles pause
    tray.wait_title("gpen-watch: paused: queue empty", timeout=15)
    for name in ("a.jpg", "b.jpg", "c.png"):
        drop(tray.inbox, name, f"photo {name}".encode())
    tray.wait_title("gpen-watch: paused: 3 in the queue", timeout=30)
    paused = tray.shot(tmp_path / "tray-paused-3.png")
    want = expected_icon(model.TrayView("paused", 3), paused.size)
    assert difference(paused, want) < 2.0, (
        f"screenshot {tmp_path / 'tray-paused-3.png'} differs from the rendering"
    )
    assert difference(paused, idle) > 10.0  # the queue depth and state show in the pixels
    assert colour_pixels(paused, model.BADGE_COLOURS["paused"][0]) > 10
    assert colour_pixels(paused, model.BADGE_COLOURS["idle"][0], tol=10) == 0

    tray.click()  # resume: the three photos go through
    tray.wait(lambda: len(list(tray.outbox.glob("*.*"))) == 3, "3 results in the outbox", 60)
    tray.wait_title("gpen-watch: idle: queue empty", timeout=15)
    assert tray.stop() == 0
    log = (paths.log_dir() / "gpen-watch.log").read_text()
    assert "tray icon shown (pystray xorg backend; no menu: click the icon to pause or resume)" in log
    assert "no tray icon" not in log


def test_without_a_tray_host_it_runs_headless_and_says_why_once(
    xserver: XServer, trays: Callable[..., Tray]
) -> None:
    tray = trays(xserver, TEST_TRAY_WAIT_S="1")
    tray.wait(lambda: _status_ok(), "the service answering", 60)
    drop(tray.inbox, "a.jpg", b"photo a")
    tray.wait(lambda: (tray.outbox / "a.jpg").exists(), "a.jpg restored", 60)
    assert tray.stop() == 0
    lines = [
        ln for ln in (paths.log_dir() / "gpen-watch.log").read_text().splitlines() if "gpen_watch.tray" in ln
    ]
    assert len(lines) == 1, lines
    assert f"no tray icon: no system tray on display {xserver.name}" in lines[0]
    assert lines[0].endswith("running headless")


def test_unreachable_display_runs_headless(trays: Callable[..., Tray], tmp_path: Path) -> None:
    x = XServer(":9999", None, [])  # nothing listens there
    tray = trays(x)
    tray.wait(lambda: _status_ok(), "the service answering", 60)
    assert tray.stop() == 0
    lines = [
        ln for ln in (paths.log_dir() / "gpen-watch.log").read_text().splitlines() if "gpen_watch.tray" in ln
    ]
    assert len(lines) == 1 and "no tray icon: no usable tray backend" in lines[0], lines


def _status_ok() -> bool:
    try:
        return bool(control.request("status").get("ok"))
    except control.ControlError:
        return False
