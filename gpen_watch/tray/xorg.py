"""The xorg backend: pystray 0.19's XEmbed icon with its docking, drawing and input fixed.

Root cause of the icon that collapsed to 1x46 in trayer (and other XEmbed trays): pystray's
``_update_icon`` sends SYSTEM_TRAY_REQUEST_DOCK again on every new image. Each request makes the
tray embed the already-embedded window once more (a new socket, a new parent each time); after a
few the host lays out a socket whose plug is gone and the icon is 1 px wide for good. So here a
window is docked once per tray manager: again only when that manager goes away and a new one
announces itself (the MANAGER message on the root window, from a restarted or late tray).

Also fixed: clicks were never asked for (pystray issue #151); the title went out as Latin-1 only
(WM_NAME), so "…" raised UnicodeEncodeError inside the loop; the image was stretched to the
window (24x46 in trayer) instead of drawn square; and there was no menu (see xmenu.py: right click).

Calls from other threads (a new image, a new title, stop) must not go through pystray's own
cross-thread dispatch: it posts on the loop's X connection and waits for an answer, which
python-xlib may not send until something else happens, and never once the loop ended. So
:class:`LoopRunner` queues each call and wakes the loop with an event sent from an X connection of
our own; the loop runs the queued calls itself. Nothing waits.

Everything here builds on pystray's private xorg attributes (_window, _display, _systray_manager,
_message_handlers); ``create_icon`` fails, and the app runs headless saying why, where they changed.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PIL import Image

from gpen_watch.tray import model
from gpen_watch.tray.base import Backend, Hooks

log = logging.getLogger(__name__)

ATOM = "_GPEN_WATCH_RUN"


@dataclass(frozen=True)
class XorgBackend(Backend):
    """A left click toggles pause; a right click opens gpen-watch's own menu window."""

    @property
    def click_pauses(self) -> bool:
        return True

    def create_icon(self, name: str, image: Image.Image, title: str, menu: Any) -> Any:
        return icon_class(self.pystray)(name, image, title, menu=menu)

    def prepare(self, icon: Any) -> Hooks:
        return XorgHooks(icon)


def tray_owner(display: Any) -> int:
    """The id of the window owning this screen's system tray selection, 0 when there is none."""
    atom = display.intern_atom(f"_NET_SYSTEM_TRAY_S{display.get_default_screen()}")
    owner = display.get_selection_owner(atom)
    return 0 if owner == 0 else int(owner.id)


def wait_for_tray(wait_s: float) -> bool:
    """Whether a system tray (XEmbed) runs on the display, waiting up to ``wait_s`` for one."""
    import Xlib.display

    display = Xlib.display.Display()
    try:
        deadline = time.monotonic() + wait_s
        while not tray_owner(display):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.25)
        return True
    finally:
        display.close()


def icon_class(pystray: Any) -> type:
    """pystray's xorg Icon with gpen-watch's fixes (made on demand: pystray's xorg module opens the
    display when imported)."""
    import Xlib.X
    import Xlib.Xatom
    from pystray import _xorg

    from gpen_watch.tray import xmenu

    class XorgIcon(_xorg.Icon):  # type: ignore[misc]
        HAS_MENU = True  # our own menu window
        HAS_NOTIFICATION = False
        # pystray's, set in its __init__ (mypy cannot see into the untyped base).
        _systray_manager: Any
        _icon_data: Any
        _icon: Any

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._menu_window: xmenu.MenuWindow | None = None
            super().__init__(*args, **kwargs)
            d = self._display
            self._utf8 = d.intern_atom("UTF8_STRING")
            self._net_wm_name = d.intern_atom("_NET_WM_NAME")
            self._manager_atom = d.intern_atom("MANAGER")
            # A tray that starts or restarts announces itself with MANAGER on the root window.
            d.screen().root.change_attributes(event_mask=Xlib.X.StructureNotifyMask)
            self._window.change_attributes(
                event_mask=Xlib.X.ExposureMask | Xlib.X.StructureNotifyMask | Xlib.X.ButtonPressMask,
                background_pixmap=Xlib.X.ParentRelative,  # the panel shows around the square icon
            )
            self._set_names(self.title)
            handlers = self._message_handlers
            pystray_client_message = handlers[Xlib.X.ClientMessage]

            def on_client_message(event: Any) -> None:
                if event.client_type == self._manager_atom and event.data[1][1] == self._net_system_tray_sx:
                    log.info("a system tray appeared on the display: docking the icon")
                    self._dock_window()
                else:
                    pystray_client_message(event)

            handlers[Xlib.X.ClientMessage] = on_client_message
            for kind in (Xlib.X.ButtonPress, Xlib.X.Expose, Xlib.X.ConfigureNotify):
                handlers[kind] = self._routed(handlers[kind], kind)
            handlers[Xlib.X.MotionNotify] = self._routed(lambda _e: None, Xlib.X.MotionNotify)
            handlers[Xlib.X.KeyPress] = self._routed(lambda _e: None, Xlib.X.KeyPress)
            d.flush()

        def _routed(self, handler: Callable[[Any], None], kind: int) -> Callable[[Any], None]:
            """Events for the open menu go to it (it grabs the pointer: every click is its)."""

            def route(event: Any) -> None:
                menu = self._menu_window
                if menu is not None and (kind == Xlib.X.ButtonPress or event.window.id == menu.window.id):
                    menu.handle(event)
                    if menu.closed:
                        self._menu_window = None
                else:
                    handler(event)

            return route

        # --- docking ---------------------------------------------------------------------------

        def _show(self) -> None:
            if self._systray_manager is None:  # the first image may have docked it already
                self._dock_window()  # no tray yet: MANAGER docks it later

        def _update_icon(self) -> None:
            # The root-cause fix: redraw in place. A dock request for a docked window re-embeds it.
            self._icon_data = None
            if self._systray_manager is None:
                self._dock_window()
            self._draw()
            self._icon_valid = True

        def _on_destroy_notify(self, event: Any) -> None:
            manager = self._systray_manager
            if manager is None or event.window.id != manager.id:
                return
            log.info("the system tray went away: the icon docks again when a tray appears")
            self._systray_manager = None
            # The tray's save-set put our window back on the root window, mapped: hide it there.
            self._window.unmap()
            self._display.flush()
            self._dock_window()  # another tray may already own the selection

        def _on_button_press(self, event: Any) -> None:
            if event.detail == 1:
                self()
            elif event.detail == 3 and self.menu is not None:
                top = event.root_y - event.event_y  # the icon's edges on the screen
                height = self._window.get_geometry().height
                self._menu_window = xmenu.MenuWindow.open(
                    self._display, self.menu, self, event.root_x, top, top + height
                )

        # --- drawing and names -----------------------------------------------------------------

        def _assert_icon_data(self, width: int, height: int) -> None:
            if self._icon_data is not None and self._icon_data.size == (width, height):
                return
            self._icon_data = square_on(self._background(width, height), self._icon)
            self._icon_data.tostring = self._icon_data.tobytes  # what python-xlib's put_pil_image calls

        def _background(self, width: int, height: int) -> Image.Image:
            """What the panel shows behind the icon (ParentRelative), black where that is unknown."""
            try:
                self._window.clear_area(0, 0, width, height)
                raw = self._window.get_image(0, 0, width, height, Xlib.X.ZPixmap, 0xFFFFFFFF)
                return Image.frombytes("RGB", (width, height), raw.data, "raw", "BGRX")
            except Exception:  # noqa: BLE001
                return Image.new("RGB", (width, height))

        def _update_title(self) -> None:
            self._set_names(self.title)

        def _set_names(self, title: str) -> None:
            # EWMH readers take _NET_WM_NAME (UTF-8); WM_NAME is Latin-1 by definition.
            self._window.change_text_property(self._net_wm_name, self._utf8, title.encode("utf-8"))
            self._window.set_wm_name(model.encodable(title, "latin-1").encode("latin-1"))

    return XorgIcon


def square_on(background: Image.Image, image: Image.Image) -> Image.Image:
    """``image`` drawn square, as large as fits and centred, over ``background`` (a new image)."""
    out = background.convert("RGB")
    side = max(1, min(out.width, out.height))
    icon = image.convert("RGBA").resize((side, side), Image.Resampling.LANCZOS)
    out.paste(icon, ((out.width - side) // 2, (out.height - side) // 2), icon)
    return out


class XorgHooks(Hooks):
    def __init__(self, icon: Any) -> None:
        self._runner = LoopRunner(icon)

    def submit(self, call: Callable[[], None]) -> None:
        self._runner.submit(call)

    def close(self) -> None:
        self._runner.close()


class LoopRunner:
    """Runs calls on the icon's loop thread without waiting for them. Make it before the loop runs."""

    def __init__(self, icon: Any) -> None:
        import Xlib.display
        import Xlib.protocol.event
        import Xlib.X

        self._calls: deque[Callable[[], None]] = deque()
        self._lock = threading.Lock()  # the queue, and our connection (used by several threads)
        self._closed = False
        self._display = Xlib.display.Display(icon._display.get_display_name())
        # An event for a window that is gone (the loop ended) fails harmlessly: do not print it.
        self._display.set_error_handler(lambda *_args: None)
        self._atom = self._display.intern_atom(ATOM)  # atoms are server-wide: the loop sees the same
        self._window = self._display.create_resource_object("window", icon._window.id)
        self._event = Xlib.protocol.event.ClientMessage(
            window=self._window, client_type=self._atom, data=(32, [0] * 5)
        )
        handlers = icon._message_handlers
        inner = handlers[Xlib.X.ClientMessage]

        def on_client_message(event: Any) -> None:
            if event.client_type == self._atom:
                self._run_queued()
            else:
                inner(event)

        handlers[Xlib.X.ClientMessage] = on_client_message

    def submit(self, call: Callable[[], None]) -> None:
        """Queue ``call`` for the loop thread and wake the loop (any thread)."""
        with self._lock:
            if self._closed:
                return
            self._calls.append(call)
            try:
                # event_mask 0: delivered to the client that made the window, which is the loop.
                self._window.send_event(self._event, event_mask=0)
                self._display.flush()
            except Exception as exc:  # noqa: BLE001 - the X server went away
                log.debug("waking the xorg tray loop failed: %s", exc)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._calls.clear()
            with contextlib.suppress(Exception):
                self._display.close()

    def _run_queued(self) -> None:
        """On the loop thread. An exception here would end pystray's loop: log it instead."""
        while True:
            with self._lock:
                if not self._calls:
                    return
                call = self._calls.popleft()
            try:
                call()
            except Exception:
                log.exception("tray icon update failed")
