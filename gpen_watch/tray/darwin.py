"""The darwin backend: pystray's AppKit icon, reached from the main run loop only.

Not run on a Mac by the test suite (it needs AppKit).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpen_watch.tray.base import Backend, Hooks

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DarwinBackend(Backend):
    def prepare(self, icon: Any) -> Hooks:
        return AppKitHooks()


class AppKitHooks(Hooks):
    """AppKit objects may be used from the main thread only, and pystray's darwin backend calls them
    from whichever thread sets a property; so calls are sent to the main run loop. pystray also
    routes SIGINT to NSApp.terminate (exit at once); gpen-watch's own handlers (graceful stop) are
    put back, through PyObjC's Mach-port signals so they run inside the Cocoa loop."""

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
