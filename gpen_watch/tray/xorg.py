"""Work-arounds for pystray 0.19's xorg backend, the fallback on Linux without PyGObject.

1. It handles ButtonPress but never asks the X server for it (pystray issue #151), so clicks on
   the icon, the only input that backend has, do nothing.
2. Calls from other threads (a new image, a new title, stop) are posted to its loop through the
   loop's own X connection, and the caller waits for the loop's answer. While the loop blocks in
   python-xlib waiting for input, python-xlib queues such a request without sending it, so the
   caller waits until something else happens on screen; and it waits forever if the loop ended
   meanwhile. Measured here: a stop that never arrives, a tray that never exits.

So our threads never call the icon. :class:`LoopRunner` queues each call and wakes the loop with
an event sent from an X connection of our own; the loop runs the queued calls itself, where pystray
calls its implementation directly. Nothing waits.

Everything here touches pystray's private attributes (_window, _display, _message_handlers);
each step is skipped, with a debug line, where they are not there (a pystray that changed).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

ATOM = "_GPEN_WATCH_RUN"


def enable_clicks(icon: Any) -> None:
    """Before the loop runs (main thread): ask X for button presses on the icon window."""
    try:
        import Xlib.X

        icon._window.change_attributes(
            event_mask=Xlib.X.ExposureMask | Xlib.X.StructureNotifyMask | Xlib.X.ButtonPressMask
        )
        icon._display.flush()
    except Exception as exc:
        log.debug("could not enable clicks on the xorg tray icon: %s", exc)


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
        pystray_handler = handlers[Xlib.X.ClientMessage]

        def on_client_message(event: Any) -> None:
            if event.client_type == self._atom:
                self._run_queued()
            else:
                pystray_handler(event)

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
            except Exception as exc:  # the X server went away
                log.debug("waking the xorg tray loop failed: %s", exc)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._calls.clear()
            try:
                self._display.close()
            except Exception:
                pass

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
