"""The service's own notices, on a thread beside the loop: desktop notices when no tray shows them
(``--no-tray``, or a tray that never came) and the notify.webhook posts, with or without a tray.

The thread looks at the status about once a second, as the tray does, and decides with the same
``notices.NoticeTracker``; the loop only answers that status request, and nothing here waits on
the loop otherwise. Delivering is never on the loop either: the desktop notifier starts a program
and returns, and the webhook has a thread and a queue of its own (``webhook``).
"""

from __future__ import annotations

import datetime
import logging
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from gpen_watch import __version__
from gpen_watch import platform as platforms
from gpen_watch.config import Config, NotifyConfig
from gpen_watch.journal.browse import JournalBrowser
from gpen_watch.service.notices import Notice, NoticeKind, NoticeTracker, facts_of
from gpen_watch.service.status import Status
from gpen_watch.service.webhook import WebhookSender

log = logging.getLogger("gpen_watch.notices")

POLL_S = 1.0
# Failures a webhook body lists, newest first; its "failed" count says how many there were.
MAX_FAILURES = 20
# How long a stopping service gives the webhook's post in flight.
CLOSE_WAIT_S = 2.0


class Desktop(Protocol):
    """The platform's desktop notifier (``platform.api.Platform``)."""

    def desktop_session(self) -> bool: ...
    def notify(self, title: str, message: str) -> bool: ...


class ServiceLike(Protocol):
    """What the notice thread needs of ``daemon.Service``."""

    cfg: Config
    # Set by the tray once its icon shows: it shows (and logs) the notices itself.
    tray_notices: bool

    @property
    def journal_file(self) -> Path: ...
    def control(self, request: dict[str, Any]) -> dict[str, Any]: ...


def start_for(service: ServiceLike) -> Notifier:
    """The notice thread of a service that is ready, started."""

    def status() -> Status | None:
        reply = service.control({"cmd": "status"})
        return Status.from_json(reply) if reply.get("ok") else None

    notifier = Notifier(
        lambda: service.cfg,  # the settings in effect now: a reload may change notify.*
        status,
        desktop=platforms.current(),
        tray_shows=lambda: service.tray_notices,
        journal_path=service.journal_file,
    )
    notifier.start()
    return notifier


class Notifier:
    """Start it once the service is ready; ``close`` when it stops. ``settings``: the service's
    settings in effect now, looked at before each look at the status, so that a changed
    notify.* applies from the next notice."""

    def __init__(
        self,
        settings: Callable[[], Config],
        status: Callable[[], Status | None],
        *,
        desktop: Desktop | None,
        tray_shows: Callable[[], bool],
        journal_path: Path,
        poll_s: float = POLL_S,
    ) -> None:
        self._settings = settings
        self._status = status
        self._platform_desktop = desktop
        self._notify = settings().notify
        self._desktop = desktop if self._notify.desktop else None
        self._tray_shows = tray_shows
        self._journal_path = journal_path
        self._poll_s = poll_s
        self._tracker = NoticeTracker()
        self._stop = threading.Event()
        self._since = _now()  # failures after this belong to the next notice
        self._said_no_desktop = False
        self._browser: JournalBrowser | None = None
        self.webhook = _sender(self._notify)
        self._thread = threading.Thread(target=self._run, name="gpen-watch-notices", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(self._poll_s + CLOSE_WAIT_S)
        if self.webhook is not None:
            self.webhook.close(CLOSE_WAIT_S)

    def follow_settings(self) -> None:
        """Put notify.* as the service has it now in effect (it changes with a reload)."""
        notify = self._settings().notify
        if notify == self._notify:
            return
        old, self._notify = self._notify, notify
        self._desktop = self._platform_desktop if notify.desktop else None
        if (notify.webhook, notify.webhook_timeout) != (old.webhook, old.webhook_timeout):
            if self.webhook is not None:
                self.webhook.close(CLOSE_WAIT_S)  # the post in flight goes to the old URL
            self.webhook = _sender(notify)
        log.info(
            "notices now: %s, %s",
            "on the desktop without a tray" if notify.desktop else "no desktop notices",
            f"posted to {self.webhook.where}" if self.webhook is not None else "no webhook",
        )

    def _run(self) -> None:
        try:
            while not self._stop.wait(self._poll_s):
                try:
                    self.follow_settings()
                    status = self._status()
                    if status is None:
                        continue
                    for notice in self._tracker.update(facts_of(status)):
                        self.deliver(notice, status)
                except Exception:
                    log.exception("deciding or sending a notice failed")
        finally:
            if self._browser is not None:
                self._browser.close()

    def deliver(self, notice: Notice, status: Status) -> None:
        tray = self._tray_shows()
        if not tray:
            # With a tray, the tray logs and shows it; without one this is its line in the log. A
            # problem is in the log already, in the words of what met it: not said twice there.
            log.log(
                logging.DEBUG if notice.kind == NoticeKind.PROBLEM else logging.INFO,
                "%s: %s",
                notice.title,
                notice.message,
            )
            self._show(notice)
        if self.webhook is not None:
            failures = self._failures() if notice.failed else []
            self.webhook.send(body(notice, status, failures))
        if notice.kind in (NoticeKind.BATCH_FINISHED, NoticeKind.FAILURES):
            self._since = _now()

    def _show(self, notice: Notice) -> None:
        if self._desktop is None:
            return
        try:
            shown = self._desktop.desktop_session() and self._desktop.notify(notice.title, notice.message)
        except Exception as exc:  # noqa: BLE001 - a notice never stops the service
            log.debug("desktop notice not shown: %s", exc)
            shown = False
        if not shown and not self._said_no_desktop:
            self._said_no_desktop = True
            log.info(
                "no desktop session to show notices in (headless); they are in this log%s",
                "" if self.webhook is not None else ", and notify.webhook can post them to a URL",
            )

    def _failures(self) -> list[dict[str, str]]:
        """The failures since the last batch or burst notice, newest first, from the journal
        (read-only: the service's writes never wait for it)."""
        try:
            if self._browser is None:
                self._browser = JournalBrowser.open(self._journal_path)
            jobs = self._browser.failures(limit=MAX_FAILURES)
        except Exception as exc:  # noqa: BLE001 - the body goes without the list
            log.debug("could not read the failures for the webhook: %s", exc)
            return []
        since = self._since.timestamp()
        return [
            {"file": j.source.name, "reason": j.error or ""}
            for j in jobs
            if j.finished is not None and j.finished >= since
        ]


def _sender(notify: NotifyConfig) -> WebhookSender | None:
    return WebhookSender(notify.webhook, notify.webhook_timeout) if notify.webhook else None


def body(notice: Notice, status: Status, failures: list[dict[str, str]]) -> dict[str, Any]:
    """The webhook's JSON for one notice (docs/notices.md describes each field)."""
    return {
        "event": str(notice.kind or NoticeKind.PROBLEM),
        "title": notice.title,
        "message": notice.message,
        "restored": notice.restored,
        "failed": notice.failed,
        "no_face": notice.no_face,
        "flagged": notice.flagged,
        "queue": status.queue.depth,
        "problem": status.problem if notice.kind == NoticeKind.PROBLEM else None,
        "inboxes": list(status.inboxes),
        "service": socket.gethostname(),
        "version": __version__,
        "time": _now().isoformat(timespec="seconds"),
        "dashboard": status.dashboard or None,
        "failures": failures[:MAX_FAILURES],
    }


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc).astimezone()
