"""`gpen-watch run` with a tray icon: the icon on the main thread, the service in background threads.

The main thread must run the tray's event loop (macOS allows GUI work on no other), so the service
loop moves to a thread of its own and a poller thread asks it for its status about once a second,
samples the GPUs through NVML and updates the icon, its title and its menu when they change.

Lifetimes: Quit (or SIGTERM, or `gpen-watch stop`) stops the service; when the service has
finished its work in flight and returned, the icon goes. If the icon's loop ends first (the display
went away at logout), the service is stopped too: it belonged to that session.

It is a little over 400 lines because the tray's threads (icon, poller, service) and the actions
its menu starts share one object's state and are read together; the menu itself is ``model`` and
``menu``, and each backend has its own module.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from gpen_watch import platform as platforms
from gpen_watch.base.errors import GpenWatchError
from gpen_watch.config import Config
from gpen_watch.dashboard import access
from gpen_watch.gpu.nvml import GpuSample, NvmlMonitor
from gpen_watch.outbox.naming import failed_root
from gpen_watch.platform import paths
from gpen_watch.platform.api import Platform
from gpen_watch.platform.login_common import LoginOptions
from gpen_watch.service.status import Status
from gpen_watch.tray import icon as icons
from gpen_watch.tray import menu as menus
from gpen_watch.tray import model
from gpen_watch.tray.backend import load
from gpen_watch.tray.base import Backend, Hooks, TrayUnavailable
from gpen_watch.tray.notices import Notice, NoticeKind, NoticeTracker

if TYPE_CHECKING:
    from gpen_watch.service.daemon import Service

log = logging.getLogger("gpen_watch.tray")

POLL_S = 1.0
# An open GTK/AppIndicator menu is rebuilt when its text changes; GPU readings alone change every
# second, so lines that differ only in them are refreshed at most this often.
GPU_MENU_REFRESH_S = 3.0
# The Overview's section that says each problem in full (the menu's problem line opens it).
PROBLEMS = "#problems"
# How long the service thread waits to stop the icon when another thread is stuck in a call to it.
ICON_STOP_WAIT_S = 5.0


class ServiceLike(Protocol):
    """What the tray needs of gpen_watch.service.daemon.Service (tests pass a stand-in)."""

    ready: threading.Event
    # True while the tray shows the desktop notices; else the service's notice thread does.
    tray_notices: bool

    def run(self) -> int: ...
    def control(self, request: dict[str, Any]) -> dict[str, Any]: ...
    def request_stop(self) -> None: ...


def run_with_tray(service: Service, *, log_path: Path | None = None) -> int:
    """Run ``service`` with a tray icon until it stops; headless (one log line why) if none can be shown.

    Call it on the main thread, after the signal handlers are set; it returns service.run()'s
    exit status and raises what service.run() raises (AlreadyRunning, ConfigError...).
    """
    try:
        backend = load()
    except TrayUnavailable as exc:
        log.warning("no tray icon: %s; running headless", exc)
        return service.run()
    # The service's settings as they are now: `gpen-watch reload` replaces them (the inboxes'
    # menu items, the folders the Open items show).
    return TrayApp(service, lambda: service.cfg, backend, log_path=log_path).run()


class TrayApp:
    def __init__(
        self,
        service: ServiceLike,
        settings: Callable[[], Config],
        backend: Backend,
        *,
        log_path: Path | None = None,
        platform: Platform | None = None,
        gpus: NvmlMonitor | None = None,
        poll_s: float = POLL_S,
    ) -> None:
        self.service = service
        self.settings = settings
        self.backend = backend
        self.log_path = log_path or paths.log_file()
        self.platform = platform or platforms.current()
        self.gpus = gpus or NvmlMonitor()
        self.poll_s = poll_s
        self.base = icons.load_base()
        self._icon: Any = None
        self._hooks = Hooks()
        # Our threads reach the icon one at a time, through the backend's hooks (the xorg backend
        # takes calls only on its loop thread, see tray/xorg.py), and not at all once it is gone.
        self._icon_lock = threading.Lock()
        self._icon_dead = False
        self._kick = threading.Event()  # refresh now (after a click), or wake up to finish
        self._service_done = threading.Event()
        self._quitting = False
        self._stopping = False
        self._rc = 0
        self._error: BaseException | None = None
        self._last_status: Status | None = None
        self._notices = NoticeTracker()
        self._shows_notices = False  # the icon is on a tray: its notices are ours to show
        self._setup_lock = threading.Lock()
        self._service_thread: threading.Thread | None = None
        self._poll_thread: threading.Thread | None = None
        # What the icon shows now; compared with each new view so only changes reach the backend.
        self._view = model.view_from_status(None, login_enabled=self._login_enabled())
        self._shown_key: tuple[str, str] | None = None
        self._shown_title = ""
        self._shown_menu: list[model.Entry] | None = None
        self._menu_gpus_at = 0.0

    # --- life -----------------------------------------------------------------------------------

    def run(self) -> int:
        view = self._view
        entries = self._entries(view)
        try:
            self._icon = self.backend.create_icon(
                "gpen-watch",
                icons.render(self.base, model.badge(view)),
                model.title(view),
                self._build_menu(entries),
            )
            self._hooks = self.backend.prepare(self._icon)
        except Exception as exc:  # noqa: BLE001 - the backend could not make its window or indicator
            log.warning("no tray icon: the %s backend failed (%s); running headless", self.backend.name, exc)
            return self.service.run()
        self._shown_key, self._shown_title, self._shown_menu = (
            model.icon_key(view),
            model.title(view),
            entries,
        )
        try:
            self._icon.run(setup=self._setup)
        except Exception as exc:  # noqa: BLE001
            # The backend failed inside its loop (the gtk backend without a D-Bus session bus).
            with self._setup_lock:
                self._icon_dead = True
                started = self._service_thread is not None
            if not started:
                self._release_setup_thread()
                self._hooks.close()
                try:
                    self.backend.discard(self._icon)
                except Exception:
                    log.debug("could not take the failed tray icon away", exc_info=True)
                log.warning(
                    "no tray icon: the %s backend failed (%s); running headless", self.backend.name, exc
                )
                return self.service.run()
            if self._service_done.is_set() or self._quitting:
                # pystray's gtk backend fails while finishing when no notification daemon runs.
                log.debug("the tray icon failed while stopping: %s", exc)
            else:
                log.warning("the tray icon failed (%s); the service goes on without it", exc)
                self._set_shows_notices(False)
        else:
            self._icon_dead = True
            if not self._service_done.is_set() and not self._quitting:
                # Normally the icon goes only after the service stopped: the display went away.
                log.warning("the tray icon's event loop ended (display gone?); stopping the service")
                self.service.request_stop()
        with self._setup_lock:  # _setup may still be starting the threads
            service_thread, poll_thread = self._service_thread, self._poll_thread
        if service_thread is not None:
            service_thread.join()
        if poll_thread is not None:
            poll_thread.join(ICON_STOP_WAIT_S)  # a daemon: never holds up the exit
        self._hooks.close()
        if self._error is not None:
            raise self._error
        return self._rc

    def _release_setup_thread(self) -> None:
        """pystray's setup thread waits (not as a daemon) for a loop that never started: let it go."""
        with contextlib.suppress(Exception):
            self._icon._mark_ready()  # it calls _setup, which sees _icon_dead and returns

    def _setup(self, icon: Any) -> None:
        """Runs in pystray's setup thread once the loop is up: show the icon, start the threads."""
        with self._setup_lock:
            if self._icon_dead:
                return
            try:
                self._hooks.loop_started()
                self._with_icon(lambda icon: setattr(icon, "visible", True))
                backend = f"pystray {self.backend.name} backend{self._click_help()}"
                waiting = self.backend.waiting_for_tray()
                # No tray host (yet): the service's notice thread shows them through the platform.
                self._set_shows_notices(not waiting)
                if waiting:  # "shown" would not be true: nothing on the display shows it yet
                    log.warning("%s (%s): the icon appears when one starts", waiting, backend)
                else:
                    log.info("tray icon shown (%s)", backend)
            except Exception:
                log.exception("showing the tray icon failed")
            self._service_thread = threading.Thread(target=self._run_service, name="gpen-watch-service")
            self._poll_thread = threading.Thread(target=self._poll, name="gpen-watch-tray-poll", daemon=True)
            self._service_thread.start()
            self._poll_thread.start()

    def _click_help(self) -> str:
        if not self.backend.has_menu:
            return "; no menu: click the icon to pause or resume"
        if self.backend.click_pauses:
            return "; click the icon to pause or resume, right-click for the menu"
        return ""

    def _run_service(self) -> None:
        try:
            self._rc = self.service.run()
        except BaseException as exc:  # noqa: BLE001 - re-raised on the main thread, where the CLI reports it
            self._error = exc
        finally:
            self._service_done.set()
            self._kick.set()
            self._stop_icon()

    def _stop_icon(self) -> None:
        if not self._icon_lock.acquire(timeout=ICON_STOP_WAIT_S):
            log.debug("tray icon busy; not stopping it")
            return
        try:
            if not self._icon_dead:
                self._icon_dead = True
                self._hooks.submit(self._icon.stop)
        except Exception:
            log.debug("stopping the tray icon failed", exc_info=True)
        finally:
            self._icon_lock.release()

    def _poll(self) -> None:
        try:
            while not self._service_done.is_set() and not self._icon_dead:
                try:
                    self.refresh()
                except Exception:
                    log.exception("tray update failed")
                self._kick.wait(self.poll_s)
                self._kick.clear()
        finally:
            self.gpus.close()

    def _with_icon(self, call: Callable[[Any], None]) -> None:
        with self._icon_lock:
            if not self._icon_dead:
                icon = self._icon
                self._hooks.submit(lambda: call(icon))

    # --- showing ----------------------------------------------------------------------------------

    def refresh(self) -> model.TrayView:
        view = model.view_from_status(
            self._status(),
            self._sample_gpus(),
            login_enabled=self._login_enabled(),
            stopping=self._quitting or self._stopping,
        )
        self.show(view)
        for notice in self._notices.update(view):
            if self._shows_notices:
                # A problem is in the log already, in the words of what met it (a block for the
                # model files): its notice is not said there a second time.
                self._notify(notice, logging.DEBUG if notice.kind == NoticeKind.PROBLEM else logging.INFO)
        return view

    def _set_shows_notices(self, shows: bool) -> None:
        self._shows_notices = shows
        self.service.tray_notices = shows

    def show(self, view: model.TrayView, now: float | None = None) -> None:
        """Push what changed to the backend: icon image, title, menu."""
        now = time.monotonic() if now is None else now
        self._view = view
        key = model.icon_key(view)
        if key != self._shown_key:
            image = icons.render(self.base, model.badge(view))
            self._with_icon(lambda icon: setattr(icon, "icon", image))
            self._shown_key = key
        title = model.title(view)
        if title != self._shown_title:
            self._with_icon(lambda icon: setattr(icon, "title", title))
            self._shown_title = title
        entries = self._entries(view)
        if entries != self._shown_menu:
            readings_only = _without_readings(entries) == _without_readings(self._shown_menu)
            if not readings_only or now - self._menu_gpus_at >= GPU_MENU_REFRESH_S:
                built = self._build_menu(entries)
                self._with_icon(lambda icon: setattr(icon, "menu", built))
                self._shown_menu = entries
                self._menu_gpus_at = now

    def _entries(self, view: model.TrayView) -> list[model.Entry]:
        names = [i.path.name or str(i.path) for i in self.settings().watch.inboxes]
        return model.menu(
            view, inbox_names=names, has_menu=self.backend.has_menu, click_pauses=self.backend.click_pauses
        )

    def _build_menu(self, entries: list[model.Entry]) -> Any:
        return menus.build(self.backend.pystray, entries, self.on_action)

    def _status(self) -> Status | None:
        if not self.service.ready.is_set():
            return None
        reply = self.service.control({"cmd": "status"})
        if reply.get("ok"):
            self._last_status = Status.from_json(reply)
        elif "stopping" in str(reply.get("error", "")):
            self._stopping = True
        return self._last_status

    def _sample_gpus(self) -> list[GpuSample]:
        gpus = self.gpus.sample()
        if not gpus and self.gpus.reason:
            log.info("tray: CPU mode (%s)", self.gpus.reason)
            self.gpus.reason = None  # said once
        return gpus

    def _login_enabled(self) -> bool:
        try:
            return bool(self.platform.login_enabled())
        except Exception:  # noqa: BLE001
            return False

    def _notify(self, notice: Notice, level: int = logging.INFO) -> None:
        """Show a notice (from our threads only: it may wait for the GUI thread), and log it: the
        one line in the log for it, at ``level``."""
        log.log(level, "%s: %s", notice.title, notice.message)
        try:
            if self.backend.has_notification:
                self._with_icon(lambda icon: icon.notify(notice.message, notice.title))
            else:
                self.platform.notify(notice.title, notice.message)
        except Exception as exc:  # noqa: BLE001
            log.debug("notification not shown: %s", exc)

    # --- clicks -------------------------------------------------------------------------------------

    def on_action(self, action: str) -> None:
        """A menu item (or, without a menu, the icon) was clicked.

        Runs on the GUI thread, which must not wait: control requests wait for the service loop, and
        calls into the icon wait for this very thread. So everything but Quit runs on a thread.
        """
        name, _, arg = action.partition(":")
        handlers: dict[str, Callable[[], None]] = {
            "toggle_pause": self._toggle_pause,
            "open_inbox": lambda: self._open_inbox(int(arg or 0)),
            "open_outbox": lambda: self._open(self.settings().watch.outbox),
            "open_failed": lambda: self._open(failed_root(self.settings().watch.outbox)),
            "open_log": self._open_log,
            "toggle_login": self._toggle_login,
            "open_dashboard": self._open_dashboard,
            "open_problem": self._open_problem,
        }
        if name == "quit":
            self.quit()
        elif name in handlers:
            threading.Thread(target=handlers[name], name=f"gpen-watch-tray-{name}", daemon=True).start()
        else:
            log.error("tray: unknown action %r", action)

    def quit(self) -> None:
        log.info("Quit chosen in the tray: stopping")
        self._quitting = True
        self.service.request_stop()
        self._kick.set()

    def _toggle_pause(self) -> None:
        cmd = "resume" if self._view.paused else "pause"
        reply = self.service.control({"cmd": cmd})
        if not reply.get("ok"):
            log.warning("tray: %s refused: %s", cmd, reply.get("error"))
        self._kick.set()

    def _toggle_login(self) -> None:
        try:
            if self.platform.login_enabled():
                result = self.platform.uninstall_login()
            else:
                # This instance is running: install for the next login without starting another.
                result = self.platform.install_login(LoginOptions(load_now=False))
        except (GpenWatchError, OSError) as exc:
            self._notify(Notice("gpen-watch: start at login", str(exc)), logging.ERROR)
        else:
            for line in result.messages:
                log.info("start at login: %s", line)
        self._kick.set()

    def _open_problem(self) -> None:
        """The menu's problem line: where the whole of it is said, the Overview's problems, or
        the log where the service serves no dashboard."""
        if self._view.dashboard:
            self._open_dashboard(PROBLEMS)
        else:
            self._open_log()

    def _open_log(self) -> None:
        self._open(self.log_path if self.log_path.exists() else self.log_path.parent)

    def _open_inbox(self, index: int) -> None:
        inboxes = self.settings().watch.inboxes
        if index < len(inboxes):  # a menu built before a reload took an inbox away
            self._open(inboxes[index].path)

    def _open_dashboard(self, where: str = "") -> None:
        """On a thread of its own: the opener is waited for (platform.opener), a few seconds at
        most. ``where``: a part of the Overview ("#problems")."""
        plain = self._view.dashboard
        if not plain:  # the menu has no such item then; a click that raced a reload
            self._notify(Notice("gpen-watch", "the service serves no dashboard (dashboard.enabled = false)"))
            return
        url = access.login_url(plain)
        if url is None:
            self._notify(Notice("gpen-watch", f"{access.token_path()}: no dashboard sign-in token to read"))
            return
        opened = self.platform.open_url(url + where)
        if not opened.ok:
            self._notify(Notice("gpen-watch: no browser opened", access.no_browser(opened.why, plain)))

    def _open(self, path: Path) -> None:
        try:
            if path == failed_root(self.settings().watch.outbox):
                path.mkdir(parents=True, exist_ok=True)  # made on the first failure; show it empty
            self.platform.open_path(path)
        except OSError as exc:
            self._notify(Notice("gpen-watch", f"cannot open {path}: {exc}"), logging.ERROR)


def _without_readings(entries: list[model.Entry] | None) -> list[model.Entry] | None:
    """The menu minus its GPU lines (which change with every reading)."""
    if entries is None:
        return None
    return [e for e in entries if not e.live]
