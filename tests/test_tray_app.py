"""The tray app with a stand-in pystray and service: what reaches the icon, what clicks do, lifetimes."""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from test_gpu_nvml import FakeNvml

from gpen_watch.base.errors import GpenWatchError
from gpen_watch.config import Config, InboxConfig
from gpen_watch.gpu.nvml import NvmlMonitor
from gpen_watch.platform.login_common import LoginOptions, LoginResult
from gpen_watch.platform.opener import Opened
from gpen_watch.service.status import Status
from gpen_watch.tray import app as tray_app
from gpen_watch.tray import model
from gpen_watch.tray.app import TrayApp, run_with_tray
from gpen_watch.tray.base import Backend

# --- stand-ins -------------------------------------------------------------------------------------


class FakeMenuItem:
    def __init__(
        self,
        text: str,
        action: Callable[..., None] | None,
        checked: Any = None,
        enabled: bool = True,
        default: bool = False,
    ) -> None:
        self.text, self.action, self.enabled, self.default = text, action, enabled, default
        self.checked = checked(self) if checked is not None else None


class FakeMenu:
    SEPARATOR = FakeMenuItem("----", None)

    def __init__(self, *items: FakeMenuItem) -> None:
        self.items = items


class FakeIcon:
    """Records what the app pushes; run() calls setup and waits for stop(), like a backend's loop."""

    HAS_MENU = True
    HAS_NOTIFICATION = True
    fail_in_loop: Exception | None = None
    loop_ends_after: float | None = None  # the loop ends by itself (display gone)
    made: ClassVar[list[FakeIcon]] = []
    violations: ClassVar[list[str]] = []

    def __init__(self, name: str, icon: Any, title: str, menu: FakeMenu) -> None:
        self.images = [icon]
        self.titles = [title]
        self.menus = [menu]
        self.notices: list[tuple[str, str]] = []
        self.visible = False
        self._stopped = threading.Event()
        FakeIcon.made.append(self)

    def _call(self, record: list[Any], value: Any) -> None:
        # Like pystray's xorg backend, which shares one reply queue between callers: the app must
        # never call from two threads at once, nor after the icon stopped.
        if getattr(self, "_busy", False):
            FakeIcon.violations.append("two threads called the icon at once")
        if self._stopped.is_set():
            FakeIcon.violations.append("called after stop()")
        self._busy = True
        time.sleep(0.002)
        record.append(value)
        self._busy = False

    @property
    def icon(self) -> Any:
        return self.images[-1]

    @icon.setter
    def icon(self, value: Any) -> None:
        self._call(self.images, value)

    @property
    def title(self) -> str:
        return self.titles[-1]

    @title.setter
    def title(self, value: str) -> None:
        self._call(self.titles, value)

    @property
    def menu(self) -> FakeMenu:
        return self.menus[-1]

    @menu.setter
    def menu(self, value: FakeMenu) -> None:
        self._call(self.menus, value)

    def run(self, setup: Callable[[Any], None]) -> None:
        if self.fail_in_loop is not None:
            raise self.fail_in_loop
        threading.Thread(target=setup, args=(self,)).start()
        self._stopped.wait(self.loop_ends_after)

    def stop(self) -> None:
        self._stopped.set()

    def notify(self, message: str, title: str | None = None) -> None:
        self._call(self.notices, (title or "", message))

    def __call__(self) -> None:  # a plain click: the default item, as pystray does
        item = next(i for i in self.menu.items if i.default)
        assert item.action is not None
        item.action(self, item)

    def item(self, text: str) -> FakeMenuItem:
        return next(i for i in self.menu.items if i.text == text)

    def click(self, text: str) -> None:
        item = self.item(text)
        assert item.action is not None
        item.action(self, item)


def fake_backend(
    *, has_menu: bool = True, has_notification: bool = True, tray_present: bool = True, **icon_attrs: Any
) -> Backend:
    icon_cls = type(
        "Icon", (FakeIcon,), {"HAS_MENU": has_menu, "HAS_NOTIFICATION": has_notification, **icon_attrs}
    )
    pystray = SimpleNamespace(Icon=icon_cls, Menu=FakeMenu, MenuItem=FakeMenuItem)
    return Backend("fake", pystray, has_menu, has_notification, tray_present)  # type: ignore[arg-type]


class FakeService:
    def __init__(self, fail: BaseException | None = None) -> None:
        self.ready = threading.Event()
        self.stop_requested = threading.Event()
        self.fail = fail
        self.paused = False
        self.queued = 0
        self.images = 0
        self.failed = 0
        self.problem: str | None = None
        # The problems one by one, as the service sends them (about, text, short).
        self.problems: list[dict[str, str]] = []
        self.dashboard = ""
        self.commands: list[str] = []
        self.ran_on: str | None = None

    def run(self) -> int:
        self.ran_on = threading.current_thread().name
        if self.fail is not None:
            raise self.fail
        self.ready.set()
        self.stop_requested.wait(30)
        return 0

    def request_stop(self) -> None:
        self.stop_requested.set()

    def control(self, request: dict[str, Any]) -> dict[str, Any]:
        cmd = request["cmd"]
        self.commands.append(cmd)
        if cmd in ("pause", "resume"):
            self.paused = cmd == "pause"
            return {"ok": True}
        return {
            "ok": True,
            "paused": self.paused,
            "stopping": False,
            "problem": self.problem,
            "problems": self.problems,
            "dashboard": self.dashboard,
            "queue": {"queued": self.queued, "running": 0},
            "throughput": {"images": self.images, "failed": self.failed},
            "workers": [{"device": "cuda:0 (NVIDIA A100)"}],
            "restored_today": self.images,
        }


class FakePlatform:
    def __init__(self) -> None:
        self.opened: list[Path] = []
        self.urls: list[str] = []
        self.open_fails: OSError | None = None
        self.notices: list[tuple[str, str]] = []
        self.login = False
        self.login_options: list[LoginOptions] = []

    def open_path(self, path: Path) -> None:
        self.opened.append(path)
        if self.open_fails is not None:
            raise self.open_fails

    def open_url(self, url: str) -> Opened:
        self.urls.append(url)
        return Opened(True)

    def notify(self, title: str, message: str) -> bool:
        self.notices.append((title, message))
        return True

    def login_enabled(self) -> bool:
        return self.login

    def install_login(self, options: LoginOptions) -> LoginResult:
        self.login_options.append(options)
        self.login = True
        return LoginResult(True, ["installed"])

    def uninstall_login(self) -> LoginResult:
        self.login = False
        return LoginResult(True, ["removed"])


class Running:
    """A TrayApp running on a thread of its own (the main thread in real use)."""

    def __init__(self, tmp_path: Path, service: FakeService | None = None, **backend_kw: Any) -> None:
        FakeIcon.made.clear()
        self.service = service or FakeService()
        self.platform = FakePlatform()
        self.cfg = Config()
        self.cfg.watch.inboxes = [InboxConfig(tmp_path / "inbox")]
        self.cfg.watch.outbox = tmp_path / "outbox"
        self.nvml = FakeNvml(["NVIDIA A100"])
        self.app = TrayApp(
            self.service,
            lambda: self.cfg,
            fake_backend(**backend_kw),
            log_path=tmp_path / "logs" / "x.log",
            platform=self.platform,
            gpus=NvmlMonitor(self.nvml, environ={}),
            poll_s=0.02,
        )  # type: ignore[arg-type]
        self.result: list[Any] = []
        self.thread = threading.Thread(target=self._run)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.result.append(self.app.run())
        except BaseException as exc:  # noqa: BLE001
            self.result.append(exc)

    @property
    def icon(self) -> FakeIcon:
        wait_for(lambda: FakeIcon.made, "icon made")
        return FakeIcon.made[-1]

    def stop(self) -> Any:
        self.service.request_stop()
        self.thread.join(10)
        assert not self.thread.is_alive()
        return self.result[0]


def wait_for(cond: Callable[[], Any], what: str, timeout: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def running(tmp_path: Path):  # type: ignore[no-untyped-def]
    made: list[Running] = []

    def start(*args: Any, **kw: Any) -> Running:
        r = Running(tmp_path, *args, **kw)
        made.append(r)
        return r

    FakeIcon.violations.clear()
    yield start
    for r in made:
        r.service.request_stop()
        r.thread.join(10)
    assert FakeIcon.violations == []


# --- tests ---------------------------------------------------------------------------------------


def test_service_runs_in_a_background_thread_and_the_icon_follows_it(running: Callable[..., Running]) -> None:
    r = running()
    icon = r.icon
    wait_for(lambda: icon.titles[-1] == "gpen-watch: idle: queue empty", "idle title")
    assert icon.visible
    assert r.service.ran_on == "gpen-watch-service"
    assert icon.titles[0] == "gpen-watch: starting"
    r.service.queued = 3
    wait_for(lambda: icon.titles[-1] == "gpen-watch: working: 3 in the queue", "working title")
    assert r.stop() == 0
    assert icon._stopped.is_set()


def test_icon_is_redrawn_only_when_state_or_badge_change(running: Callable[..., Running]) -> None:
    r = running()
    icon = r.icon
    r.service.queued = 3
    wait_for(lambda: icon.titles[-1].endswith("3 in the queue"), "3 queued")
    drawn = len(icon.images)
    r.service.images = 5  # done today and GPU readings change: no new image
    wait_for(lambda: any(i.text == "Restored today: 5" for i in icon.menu.items), "menu shows 5 done")
    time.sleep(0.1)
    assert len(icon.images) == drawn
    r.service.queued = 4
    wait_for(lambda: len(icon.images) == drawn + 1, "redraw for 4")
    r.service.paused = True
    wait_for(lambda: len(icon.images) == drawn + 2, "redraw for paused")
    time.sleep(0.1)
    assert len(icon.images) == drawn + 2
    r.stop()


def test_menu_shows_status_and_gpu_lines(running: Callable[..., Running]) -> None:
    r = running()
    icon = r.icon
    r.service.queued, r.service.images = 2, 7
    wait_for(lambda: any(i.text == "Restored today: 7" for i in icon.menu.items), "status lines")
    texts = [i.text for i in icon.menu.items]
    assert texts[:3] == [
        "Working: 2 in the queue",
        "Restored today: 7",
        "NVIDIA A100: 40%, 1.0/80.0 GiB, 50 °C",
    ]
    assert not icon.item("Working: 2 in the queue").enabled
    r.stop()
    assert r.nvml.shutdowns == 1  # NVML closed when the tray ends


def test_pause_toggle_is_a_checkbox_that_pauses_and_resumes(running: Callable[..., Running]) -> None:
    r = running()
    icon = r.icon
    wait_for(lambda: icon.titles[-1].startswith("gpen-watch: idle"), "idle")
    assert icon.item("Pause").checked is False
    icon.click("Pause")
    wait_for(lambda: icon.item("Pause").checked is True, "checked")
    assert "pause" in r.service.commands
    assert icon.titles[-1] == "gpen-watch: paused: queue empty"
    icon.click("Pause")
    wait_for(lambda: icon.item("Pause").checked is False, "unchecked")
    assert "resume" in r.service.commands
    r.stop()


def test_without_a_menu_clicking_the_icon_toggles_pause(running: Callable[..., Running]) -> None:
    r = running(has_menu=False)
    icon = r.icon
    wait_for(lambda: icon.titles[-1].startswith("gpen-watch: idle"), "idle")
    icon()
    wait_for(lambda: icon.titles[-1].startswith("gpen-watch: paused"), "paused by a click")
    icon()
    wait_for(lambda: icon.titles[-1].startswith("gpen-watch: idle"), "resumed by a click")
    r.stop()


def test_open_items_open_the_folders_and_the_log(running: Callable[..., Running], tmp_path: Path) -> None:
    r = running()
    icon = r.icon
    wait_for(lambda: r.service.ready.is_set(), "ready")
    for n, text in enumerate(("Open inbox", "Open outbox", "Open failed folder", "Open log"), 1):
        icon.click(text)  # done on a thread of its own: never on the GUI thread
        wait_for(lambda n=n: len(r.platform.opened) == n, text)
    failed = tmp_path / "failed"  # beside the outbox (outbox.naming.failed_root)
    assert r.platform.opened == [tmp_path / "inbox", tmp_path / "outbox", failed, tmp_path / "logs"]
    assert failed.is_dir()  # made so there is something to show
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "x.log").write_text("log\n")
    icon.click("Open log")
    wait_for(lambda: len(r.platform.opened) == 5, "open log")
    assert r.platform.opened[-1] == tmp_path / "logs" / "x.log"
    r.stop()


def test_a_failed_open_is_logged_once(
    running: Callable[..., Running], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """xdg-open missing: one ERROR line naming the folder and why, and the notice; not two lines."""
    caplog.set_level(logging.DEBUG, logger="gpen_watch.tray")
    r = running()
    r.platform.open_fails = OSError("xdg-open not found (install xdg-utils)")
    icon = r.icon
    wait_for(lambda: r.service.ready.is_set(), "ready")
    icon.click("Open outbox")
    wait_for(lambda: icon.notices, "the notice")
    said = [rec for rec in caplog.records if "cannot open" in rec.getMessage()]
    assert [(rec.levelname, rec.getMessage()) for rec in said] == [
        ("ERROR", f"gpen-watch: cannot open {tmp_path / 'outbox'}: xdg-open not found (install xdg-utils)")
    ]
    assert icon.notices == [
        ("gpen-watch", f"cannot open {tmp_path / 'outbox'}: xdg-open not found (install xdg-utils)")
    ]
    r.stop()


def test_the_icon_is_said_shown_only_when_a_tray_shows_it(
    running: Callable[..., Running], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="gpen_watch.tray")
    r = running(tray_present=False)
    wait_for(lambda: r.service.ready.is_set(), "ready")
    wait_for(lambda: any("tray" in rec.getMessage() for rec in caplog.records), "the icon's line")
    lines = [rec.getMessage() for rec in caplog.records if rec.name == "gpen_watch.tray"]
    assert not any("tray icon shown" in line for line in lines), lines
    waiting = [line for line in lines if line.startswith("no system tray on the display yet")]
    assert waiting == [
        "no system tray on the display yet (GNOME needs the AppIndicator extension) (pystray fake "
        "backend): the icon appears when one starts"
    ], lines
    r.stop()
    caplog.clear()
    r = running()
    wait_for(lambda: r.service.ready.is_set(), "ready")
    wait_for(lambda: any("tray icon shown" in rec.getMessage() for rec in caplog.records), "shown")
    r.stop()


def test_start_at_login_toggle(running: Callable[..., Running]) -> None:
    r = running()
    icon = r.icon
    wait_for(lambda: icon.item("Start at login").checked is False, "unchecked")
    icon.click("Start at login")
    wait_for(lambda: icon.item("Start at login").checked is True, "checked")
    # The running tray installs for the next login without starting a second instance now.
    assert r.platform.login_options == [LoginOptions(load_now=False)]
    icon.click("Start at login")
    wait_for(lambda: icon.item("Start at login").checked is False, "unchecked again")
    r.stop()


def test_quit_stops_the_service_gracefully_then_the_icon(running: Callable[..., Running]) -> None:
    r = running()
    icon = r.icon
    wait_for(lambda: r.service.ready.is_set(), "ready")
    icon.click("Quit")
    r.thread.join(10)
    assert r.result == [0]
    assert r.service.stop_requested.is_set()
    assert icon._stopped.is_set()


def test_notifications_batch_finished_and_problems(running: Callable[..., Running]) -> None:
    r = running()
    icon = r.icon
    wait_for(lambda: icon.titles[-1].startswith("gpen-watch: idle"), "idle")
    r.service.queued = 3
    wait_for(lambda: icon.titles[-1].startswith("gpen-watch: working"), "working")
    r.service.queued, r.service.images, r.service.failed = 0, 2, 1
    wait_for(lambda: icon.notices, "batch notice")
    assert icon.notices == [
        ("gpen-watch: batch finished", "2 photos restored, 1 failed (see the failed folder)")
    ]
    r.service.problem = "outbox: [Errno 30] Read-only file system: '/x'; retrying every 30 s"
    wait_for(lambda: len(icon.notices) == 2, "problem notice")
    assert icon.notices[1][0] == "gpen-watch: cannot write to the outbox"
    time.sleep(0.1)
    assert len(icon.notices) == 2
    r.stop()


def test_notifications_fall_back_to_the_platform(running: Callable[..., Running]) -> None:
    r = running(has_notification=False)
    wait_for(lambda: r.service.ready.is_set(), "ready")
    r.service.problem = "cpu#0: GPEN-BFR-512: weights not found in /nowhere; run `gpen-watch models fetch`"
    wait_for(lambda: r.platform.notices, "platform notice")
    assert r.platform.notices[0][0] == "gpen-watch: model weights missing"
    r.stop()


def test_a_model_files_block_is_one_short_notice_and_not_said_again_in_the_log(
    running: Callable[..., Running], caplog: pytest.LogCaptureFixture
) -> None:
    """The service logs the missing files' block itself: the tray's notice of it is one short line
    (shown as a notice, the menu's line and the tooltip), and not a second, longer copy at INFO."""
    caplog.set_level(logging.DEBUG, logger="gpen_watch.tray")
    r = running()
    wait_for(lambda: r.service.ready.is_set(), "ready")
    block = "model files missing: no internet connection\n  GPEN-BFR-512.pth (GPEN-BFR-512, 284.1 MB)"
    short = "model files missing: no internet connection"
    r.service.dashboard = "http://127.0.0.1:4736/"
    r.service.problems = [{"about": "models", "text": block, "short": short}]
    r.service.problem = block
    wait_for(lambda: r.icon.notices, "the problem's notice")
    line = f"{short} (see the dashboard)"
    assert r.icon.notices == [("gpen-watch: model weights missing", line)]
    wait_for(lambda: any(i.text == line for i in r.icon.menu.items), "the menu's line")
    said = [rec for rec in caplog.records if "model files missing" in rec.getMessage()]
    assert said and all(rec.levelno == logging.DEBUG for rec in said)
    r.stop()


def test_service_errors_reach_the_caller(running: Callable[..., Running]) -> None:
    r = running(FakeService(fail=GpenWatchError("gpen-watch is already running (pid 42)")))
    r.thread.join(10)
    assert isinstance(r.result[0], GpenWatchError)
    assert r.icon._stopped.is_set()


def test_backend_failing_in_its_loop_runs_headless(
    running: Callable[..., Running], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "gpen_watch.tray")
    r = running(fail_in_loop=RuntimeError("Could not connect: No such file or directory"))
    wait_for(lambda: r.service.ready.is_set(), "service running")
    assert r.stop() == 0
    lines = [rec.getMessage() for rec in caplog.records]
    assert lines == [
        "no tray icon: the fake backend failed (Could not connect: No such file or directory); "
        "running headless"
    ]


def test_icon_loop_ending_on_its_own_stops_the_service(
    running: Callable[..., Running], caplog: pytest.LogCaptureFixture
) -> None:
    r = running(loop_ends_after=0.3)
    r.thread.join(10)
    assert r.result == [0]
    assert r.service.stop_requested.is_set()
    assert any("event loop ended" in rec.getMessage() for rec in caplog.records)


def test_menu_rebuilds_for_gpu_readings_are_rate_limited(tmp_path: Path) -> None:
    app = TrayApp(
        FakeService(),
        Config,
        fake_backend(),
        platform=FakePlatform(),  # type: ignore[arg-type]
        gpus=NvmlMonitor(FakeNvml([]), environ={}),
    )
    app._icon = FakeIcon("x", None, "", FakeMenu())
    st = {"ok": True, "queue": {"queued": 1}, "workers": [{"device": "cuda:0"}]}

    def view(util: int, queued: int = 1) -> model.TrayView:
        from gpen_watch.gpu.nvml import GpuSample

        return model.view_from_status(
            Status.from_json({**st, "queue": {"queued": queued}}), [GpuSample(0, "A", util, 1, 2**30, 40)]
        )

    app.show(view(10), now=100.0)
    menus = len(app._icon.menus)
    app.show(view(11), now=101.0)
    assert len(app._icon.menus) == menus  # only a reading changed: wait
    app.show(view(12, queued=2), now=101.5)
    assert len(app._icon.menus) == menus + 1  # something else changed: at once
    app.show(view(13, queued=2), now=101.6)
    app.show(view(14, queued=2), now=101.6 + tray_app.GPU_MENU_REFRESH_S)
    assert len(app._icon.menus) == menus + 2


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="DISPLAY is how X11/Wayland desktops are found"
)
def test_run_with_tray_without_a_display_runs_headless_with_one_log_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    caplog.set_level(logging.INFO)
    service = FakeService()
    threading.Timer(0.2, service.request_stop).start()
    assert run_with_tray(service) == 0  # type: ignore[arg-type]
    assert service.ran_on == threading.current_thread().name
    assert [r.getMessage() for r in caplog.records] == [
        "no tray icon: no display (DISPLAY and WAYLAND_DISPLAY are not set); running headless"
    ]


def test_open_dashboard_says_when_no_browser_opened_and_a_click_leaves_no_zombie(
    running: Callable[..., Running], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real LinuxPlatform with a stand-in xdg-open: one that exits 4 (the browser refused to
    start) gets a notice that says so, not silence; one that opens is waited for, so a left-click
    (Open outbox) leaves no xdg-open zombie in the tray's process."""
    from test_opener import FAILS, OPENS, stand_in, zombies

    from gpen_watch.dashboard import access
    from gpen_watch.platform import opener, program
    from gpen_watch.platform.linux import LinuxPlatform

    monkeypatch.delenv("BROWSER", raising=False)
    monkeypatch.setattr(opener, "WAIT_S", 1.0)
    access.load_or_create_token(access.token_path())
    r = running()
    r.app.platform = LinuxPlatform()
    r.service.dashboard = "http://127.0.0.1:4736/"
    icon = r.icon
    wait_for(lambda: any(i.text == "Open dashboard" for i in icon.menu.items), "the dashboard's item")

    failing = tmp_path / "fails"
    calls = stand_in(failing, FAILS)
    monkeypatch.setenv("PATH", f"{failing}{os.pathsep}{os.environ['PATH']}")
    icon.click("Open dashboard")
    wait_for(lambda: icon.notices, "the notice", timeout=20)
    assert icon.notices == [
        (
            "gpen-watch: no browser opened",
            "No browser opened (xdg-open exited with status 4: the browser or application did not start "
            f"(xdg-open: no method available for opening '{calls.read_text().split()[1]}')). The dashboard "
            f"is at http://127.0.0.1:4736/; `{program.command('dashboard --url')}` prints the link that "
            "signs you in.",
        )
    ]
    assert calls.read_text().split()[1].startswith("http://127.0.0.1:4736/?token=")

    opening = tmp_path / "opens"
    calls = stand_in(opening, OPENS)
    monkeypatch.setenv("PATH", f"{opening}{os.pathsep}{os.environ['PATH']}")
    icon()  # a left-click: the default item, Open outbox
    wait_for(lambda: calls.exists(), "xdg-open called", timeout=20)
    wait_for(
        lambda: not any(t.name.startswith("gpen-watch-tray-open") for t in threading.enumerate()),
        "the open done",
        timeout=20,
    )
    assert calls.read_text().split()[1] == str(tmp_path / "outbox")
    assert zombies() == []
    assert len(icon.notices) == 1  # it opened: nothing more to say
    r.stop()


def test_the_problem_line_opens_the_overviews_problems_or_the_log(
    running: Callable[..., Running], tmp_path: Path
) -> None:
    from gpen_watch.dashboard import access

    access.load_or_create_token(access.token_path())
    r = running()
    icon = r.icon
    r.service.problem = "outbox: [Errno 28] No space left on device; retrying every 30 s"
    wait_for(lambda: any(i.text.startswith("outbox: ") and i.action for i in icon.menu.items), "the problem")
    icon.click(next(i.text for i in icon.menu.items if i.text.startswith("outbox: ")))
    wait_for(lambda: r.platform.opened, "the log opened")  # no dashboard: the log says it in full
    assert r.platform.opened == [tmp_path / "logs"] and r.platform.urls == []
    r.service.dashboard = "http://127.0.0.1:4736/"
    wait_for(lambda: any(i.text == "Open dashboard" for i in icon.menu.items), "the dashboard's item")
    icon.click(next(i.text for i in icon.menu.items if i.text.startswith("outbox: ")))
    wait_for(lambda: r.platform.urls, "the dashboard opened")
    assert r.platform.urls == [f"http://127.0.0.1:4736/?token={access.read_token()}#problems"]
    r.stop()


def test_the_menu_and_the_open_items_follow_the_settings_a_reload_put_in_effect(
    running: Callable[..., Running], tmp_path: Path
) -> None:
    r = running()
    icon = r.icon
    wait_for(lambda: any(i.text == "Open inbox" for i in icon.menu.items), "one inbox")
    # `gpen-watch reload`: the service's settings are replaced, not edited in place.
    new = Config()
    new.watch.inboxes = [InboxConfig(tmp_path / "phone"), InboxConfig(tmp_path / "scans")]
    new.watch.outbox = tmp_path / "album"
    r.cfg = new
    wait_for(lambda: any(i.text == "Open inbox: scans" for i in icon.menu.items), "the new inboxes")
    icon.click("Open inbox: scans")
    icon.click("Open outbox")
    wait_for(lambda: len(r.platform.opened) == 2, "both opened")
    assert sorted(r.platform.opened) == sorted([tmp_path / "scans", tmp_path / "album"])
    r.stop()
