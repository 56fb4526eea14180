"""notify.webhook against real HTTP servers on loopback: the sender on its own, and a real headless
service posting its batches (tests/service_harness.py, the fake restorer)."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from service_harness import ServiceProcess, finished, queue_empty, services_fixture, write_atomic

from gpen_watch.base.errors import ConfigError
from gpen_watch.config import Config, NotifyConfig, validate
from gpen_watch.service.webhook import WebhookSender

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and sockets")

FAKE = "fake_restorer:FakeRestorer"
WAIT_S = 30.0


def wait_for(cond: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class Hook:
    """A webhook server: records each JSON body it is posted."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        bodies, headers = self.bodies, self.headers

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                data = self.rfile.read(int(self.headers["Content-Length"]))
                headers.append(dict(self.headers))
                bodies.append(json.loads(data))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook/s3cret"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Silent:
    """A server that accepts every connection and never answers; counts and holds them."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/hook"
        self.conns: list[socket.socket] = []
        self.closed_by_client = 0
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._hold, args=(conn,), daemon=True).start()

    def _hold(self, conn: socket.socket) -> None:
        conn.settimeout(0.2)
        while not self._stop.is_set():
            try:
                if conn.recv(65536) == b"":  # the client gave up and closed it
                    self.closed_by_client += 1
                    return
            except TimeoutError:
                continue
            except OSError:
                return

    def close(self) -> None:
        self._stop.set()
        self.sock.close()
        for c in self.conns:
            c.close()


@pytest.fixture
def hook() -> Iterator[Hook]:
    h = Hook()
    yield h
    h.close()


@pytest.fixture
def silent() -> Iterator[Silent]:
    s = Silent()
    yield s
    s.close()


def refused_url() -> str:
    """A loopback port nothing listens on (bound, then let go)."""
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


# --- the sender ---------------------------------------------------------------------------------


def test_a_body_is_posted_as_json(hook: Hook) -> None:
    sender = WebhookSender(hook.url, 5.0)
    sender.send({"event": "batch_finished", "restored": 2})
    wait_for(lambda: len(hook.bodies) == 1, "the post")
    sender.close(5)
    assert hook.bodies == [{"event": "batch_finished", "restored": 2}]
    assert hook.headers[0]["Content-Type"] == "application/json"
    assert hook.headers[0]["User-Agent"].startswith("gpen-watch/")


def test_a_server_that_never_answers_costs_the_timeout_and_one_retry(silent: Silent) -> None:
    sender = WebhookSender(silent.url, 0.5, backoff_s=0.1)
    started = time.monotonic()
    sender.send({"event": "batch_finished"})
    assert time.monotonic() - started < 0.2  # send never waits for the server
    wait_for(lambda: silent.closed_by_client == 2, "the try and its retry to give up")
    sender.close(5)
    # One try, one retry, each dropped at its timeout: no storm.
    assert len(silent.conns) == 2
    assert sender.posted == 0


def test_a_refusing_port_is_said_once_not_per_notice(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="gpen_watch.service.webhook")
    sender = WebhookSender(refused_url(), 1.0, backoff_s=0.05)
    for n in range(3):
        sender.send({"event": "batch_finished", "n": n})
    sender.close(10)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    line = warnings[0].getMessage()
    assert "notify.webhook (127.0.0.1:" in line and "could not post" in line and "Check the URL" in line
    assert "could not post a notice: connection refused (127.0.0.1:" in line  # words, not "[Errno 111]"
    assert "/hook" not in line  # the URL's path (often its secret) stays out of the log


def test_a_name_no_resolver_finds_is_said_as_no_internet_connection(caplog: pytest.LogCaptureFixture) -> None:
    """A host under the reserved .invalid domain: the resolver's "Name or service not known" is
    said as the photographer would say it, with the name it could not look up."""
    caplog.set_level(logging.WARNING, logger="gpen_watch.service.webhook")
    sender = WebhookSender("http://hooks.gpen-watch-test.invalid/hook", 2.0, backoff_s=0.05)
    sender.send({"event": "batch_finished"})
    sender.close(10)
    (line,) = [r.getMessage() for r in caplog.records]
    assert (
        "could not post a notice: no internet connection (could not look up hooks.gpen-watch-test.invalid)"
        in line
    )
    assert "Name or service" not in line and "Errno" not in line


def test_a_full_queue_drops_the_oldest_with_one_line(
    silent: Silent, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="gpen_watch.service.webhook")
    sender = WebhookSender(silent.url, 5.0, queue_size=2)
    sender.send({"n": 0})
    wait_for(lambda: len(silent.conns) == 1, "the first post in flight")
    for n in range(1, 6):
        sender.send({"n": n})
    dropped = [r for r in caplog.records if "oldest are dropped" in r.getMessage()]
    assert len(dropped) == 1
    assert [b["n"] for b in sender._queue] == [4, 5]
    sender.close(0)


def test_a_url_that_is_not_http_is_refused_with_a_clear_sentence() -> None:
    for url in ("ftp://example.com/hook", "file:///etc/passwd", "example.com/hook", "https://"):
        with pytest.raises(ConfigError) as err:
            validate(Config(notify=NotifyConfig(webhook=url)))
        assert str(err.value).startswith(f"notify.webhook: {url!r} is not an http:// or https:// URL")
        assert '"https://example.com/hook"' in str(err.value)
    validate(Config(notify=NotifyConfig(webhook="https://example.com/hook?token=x")))
    with pytest.raises(ConfigError, match=r"notify\.webhook_timeout"):
        validate(Config(notify=NotifyConfig(webhook_timeout=0)))


def test_run_refuses_a_non_http_webhook_before_it_starts(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpen_watch",
            "run",
            "--no-tray",
            "--inbox",
            str(tmp_path / "in"),
            "--outbox",
            str(tmp_path / "out"),
            "--set",
            "notify.webhook=ftp://nas.local/hook",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "notify.webhook: 'ftp://nas.local/hook' is not an http:// or https:// URL" in done.stderr


# --- a real service -------------------------------------------------------------------------------


class Service(ServiceProcess):
    def __init__(self, root: Path, *extra: str) -> None:
        super().__init__(root, *extra, restorer=FAKE)

    def batch(self, names: list[str]) -> dict[str, Any]:
        """Drop ``names`` while paused, so that they are one batch, then let them go and wait."""
        assert self.request("pause")["ok"]
        before = finished(self.status())
        for name in names:
            write_atomic(self.inbox / name, b"photo " + name.encode())
        self.wait(lambda s: s["queue"]["queued"] >= len(names), what=f"{names} queued")
        assert self.request("resume")["ok"]
        return self.wait(
            lambda s: finished(s) >= before + len(names) and queue_empty(s),
            what=f"{names} finished",
        )


services = services_fixture(Service)


@pytest.mark.slow
def test_a_batch_posts_one_summary(services: Callable[..., Service], hook: Hook) -> None:
    svc = services("--set", f"notify.webhook={hook.url}").start()
    svc.batch(["a.jpg", "b.jpg", "c-bad.jpg"])
    wait_for(lambda: len(hook.bodies) >= 1, "the batch's post")
    (body,) = hook.bodies
    assert body["event"] == "batch_finished"
    assert (body["restored"], body["failed"], body["no_face"]) == (2, 1, 0)
    assert body["failures"] == [{"file": "c-bad.jpg", "reason": body["failures"][0]["reason"]}]
    assert body["failures"][0]["reason"]
    assert body["inboxes"] == [str(svc.inbox)]
    assert body["service"] == socket.gethostname()
    assert body["time"][:2] == "20" and "T" in body["time"]
    assert body["message"] == "2 photos restored, 1 failed (see the failed folder)"
    # The next batch is its own post, and only its photos are counted.
    svc.batch(["d.jpg"])
    wait_for(lambda: len(hook.bodies) >= 2, "the second batch's post")
    assert (hook.bodies[1]["restored"], hook.bodies[1]["failed"], hook.bodies[1]["failures"]) == (1, 0, [])
    assert svc.stop() == 0
    assert len(hook.bodies) == 2


@pytest.mark.slow
def test_faces_that_may_not_look_like_the_same_person_are_counted(
    services: Callable[..., Service], hook: Hook
) -> None:
    """The batch's notice and the webhook's JSON say how many faces were flagged; the status
    counts today's, and the journal keeps each face's check."""
    svc = services("--set", f"notify.webhook={hook.url}").start()
    status = svc.batch(["a.jpg", "b-flagged.jpg", "c-flagged.jpg"])
    wait_for(lambda: len(hook.bodies) >= 1, "the batch's post")
    (body,) = hook.bodies
    assert (body["restored"], body["flagged"]) == (3, 2)
    assert body["message"] == "3 photos restored (2 faces may not look like the same person)"
    assert status["flagged_today"] == 2 and status["throughput"]["flagged"] == 2
    assert svc.stop() == 0
    from gpen_watch.journal.journal import Journal

    with Journal.open() as journal:  # the service's: the test's own state folder
        flagged = journal._read("SELECT rel, flagged, identity FROM jobs ORDER BY id")
        assert [(r[0], r[1], r[2]) for r in flagged] == [
            ("a.jpg", 0, pytest.approx(0.05)),
            ("b-flagged.jpg", 1, pytest.approx(0.5)),
            ("c-flagged.jpg", 1, pytest.approx(0.5)),
        ]


@pytest.mark.slow
def test_a_hung_webhook_never_holds_up_the_queue(services: Callable[..., Service], silent: Silent) -> None:
    # The longest timeout there is: the server holds the post for all of the test.
    svc = services("--set", f"notify.webhook={silent.url}", "--set", "notify.webhook_timeout=60").start()
    svc.batch(["a.jpg"])
    wait_for(lambda: len(silent.conns) == 1, "the post to the silent server")
    # While the post hangs, the next photos are restored as fast as ever.
    svc.batch(["b.jpg", "c.jpg", "d.jpg"])
    assert svc.status()["queue"]["done"] == 4
    assert silent.closed_by_client == 0  # the post was still waiting all that time
    started = time.monotonic()
    assert svc.stop() == 0
    assert time.monotonic() - started < 15  # a stop gives the post in flight 2 s, not 60
