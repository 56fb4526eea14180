"""notify.webhook: each notice's JSON summary POSTed to the user's URL, on a thread of its own.

The service must never wait for someone else's server, so ``send`` only puts the body in a small
queue and returns. One post is in flight at a time, each connection and read waits at most the
timeout, and a post that failed is tried once more after a back-off, never again: a server that is
down costs one try and one retry per notice, not a storm. When the queue is full the oldest body
goes (a notice that old is stale anyway). A server that stays unreachable is said once in the
log, and once more when it answers again, not once per notice.

Log lines name the URL's host only: a webhook URL often carries its secret in the path.
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from typing import Any

from gpen_watch import __version__
from gpen_watch.base.network_errors import in_words

log = logging.getLogger(__name__)

QUEUE_SIZE = 8
# The wait before the one retry of a post that failed.
BACKOFF_S = 10.0


def host_of(url: str) -> str:
    """How log lines name the webhook: its host (and port), never its path or query."""
    try:
        parts = urllib.parse.urlsplit(url)
        return parts.netloc.rpartition("@")[2] or url
    except ValueError:
        return "(unreadable URL)"


class PostFailed(Exception):
    """Why one post did not reach the server; ``retry``: worth one more try (no answer, 5xx)."""

    def __init__(self, reason: str, *, retry: bool) -> None:
        super().__init__(reason)
        self.retry = retry


class WebhookSender:
    """Posts JSON bodies to ``url``, oldest first, from its own daemon thread."""

    def __init__(
        self,
        url: str,
        timeout: float,
        *,
        queue_size: int = QUEUE_SIZE,
        backoff_s: float = BACKOFF_S,
    ) -> None:
        self.url = url
        self.timeout = timeout
        self.backoff_s = backoff_s
        self.where = f"notify.webhook ({host_of(url)})"
        self._queue: deque[dict[str, Any]] = deque()
        self._size = queue_size
        self._cond = threading.Condition()
        self._closed = threading.Event()
        self._failing = False  # the last post failed (and was said in the log)
        self._dropping = False  # bodies were dropped since the queue last had room
        self.posted = 0  # bodies the server took (tests, the log)
        self._thread = threading.Thread(target=self._run, name="gpen-watch-webhook", daemon=True)
        self._thread.start()

    def send(self, body: dict[str, Any]) -> None:
        """Queue ``body``; never waits."""
        with self._cond:
            if self._closed.is_set():
                return
            if len(self._queue) >= self._size:
                self._queue.popleft()
                if not self._dropping:
                    log.warning(
                        "%s: %d notices wait for the server; the oldest are dropped until it catches up",
                        self.where,
                        self._size,
                    )
                self._dropping = True
            self._queue.append(body)
            self._cond.notify()

    def close(self, wait: float = 0.0) -> None:
        """Stop taking bodies; give the one in flight up to ``wait`` seconds (the thread is a
        daemon: a hung server never holds up the service's exit)."""
        with self._cond:
            self._closed.set()
            self._cond.notify()
        self._thread.join(wait)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed.is_set():
                    self._cond.wait()
                if not self._queue:
                    return
                body = self._queue.popleft()
                if not self._queue:
                    self._dropping = False
            self._deliver(body)

    def _deliver(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode("utf-8")
        try:
            self._post(data)
        except PostFailed as first:
            if not first.retry or self._closed.wait(self.backoff_s):
                self._failed(first)
                return
            try:
                self._post(data)
            except PostFailed as second:
                self._failed(second)
                return
        self.posted += 1
        if self._failing:
            self._failing = False
            log.info("%s answers again; notices are posted to it", self.where)

    def _failed(self, exc: PostFailed) -> None:
        if self._failing:
            log.debug("%s: still failing: %s", self.where, exc)
            return
        self._failing = True
        log.warning(
            "%s: could not post a notice: %s; the service goes on, and notices are tried as they come"
            " (this is said again only once it answers). Check the URL and that the server is up.",
            self.where,
            exc,
        )

    def _post(self, data: bytes) -> None:
        request = urllib.request.Request(
            self.url,
            data=data,
            method="POST",
            headers={"Content-Type": "application/json", "User-Agent": f"gpen-watch/{__version__}"},
        )
        try:
            with urllib.request.urlopen(
                request, timeout=self.timeout
            ) as reply:  # http(s) only: config.schema.valid_webhook_url
                reply.read(65536)
        except urllib.error.HTTPError as exc:
            failure = in_words(exc, host_of(self.url))
            raise PostFailed(failure.reason, retry=exc.code >= 500) from None
        except OSError as exc:
            # URLError and timeouts too: the resolver's and the socket's words, said plainly.
            raise PostFailed(in_words(exc, host_of(self.url), self.timeout).reason, retry=True) from None
