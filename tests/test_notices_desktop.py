"""Desktop notices from a headless service: a real private D-Bus session bus (dbus-daemon) with a
small freedesktop notification server on it (jeepney), and a real `gpen-watch run --no-tray`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from service_harness import ServiceProcess, finished, queue_empty, services_fixture, write_atomic

from gpen_watch.platform import linux_notify

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the freedesktop notifications of Linux"),
    pytest.mark.skipif(shutil.which("dbus-daemon") is None, reason="dbus-daemon is not installed"),
]
jeepney = pytest.importorskip("jeepney")
from jeepney.bus_messages import message_bus  # noqa: E402 - after the skip
from jeepney.io.blocking import open_dbus_connection  # noqa: E402

FAKE = "fake_restorer:FakeRestorer"
WAIT_S = 30.0
NAME = "org.freedesktop.Notifications"


def wait_for(cond: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@dataclass
class NotificationServer:
    """The Notifications service on ``address``: answers Notify and records (app, summary, body)."""

    address: str
    shown: list[tuple[str, str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._conn = open_dbus_connection(bus=self.address)
        reply = self._conn.send_and_get_reply(message_bus.RequestName(NAME), timeout=10)
        assert reply.body[0] == 1, reply.body  # primary owner
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                msg = self._conn.receive(timeout=0.2)
            except TimeoutError:
                continue
            except OSError:
                return
            header = msg.header
            if header.message_type != jeepney.MessageType.method_call:
                continue
            member = header.fields.get(jeepney.HeaderFields.member)
            if member == "Notify":
                app, _replaces, _icon, summary, body, *_ = msg.body
                self.shown.append((app, summary, body))
                self._conn.send(jeepney.new_method_return(msg, "u", (len(self.shown),)))
            elif member == "GetServerInformation":
                self._conn.send(jeepney.new_method_return(msg, "ssss", ("test", "gpen-watch", "1", "1.2")))
            else:
                self._conn.send(jeepney.new_error(msg, "org.freedesktop.DBus.Error.UnknownMethod"))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._conn.close()


@pytest.fixture
def session_bus(tmp_path: Path) -> Iterator[str]:
    """A private session bus of the test's own, its address."""
    proc = subprocess.Popen(
        ["dbus-daemon", "--session", "--nofork", "--nopidfile", "--print-address=1"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        address = proc.stdout.readline().strip()
        assert address.startswith("unix:"), address
        yield address
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.fixture
def notifications(session_bus: str) -> Iterator[NotificationServer]:
    server = NotificationServer(session_bus)
    yield server
    server.close()


def test_no_session_bus_means_no_desktop(tmp_path: Path) -> None:
    assert linux_notify.session_bus({"XDG_RUNTIME_DIR": str(tmp_path)}) is None
    assert (
        linux_notify.notify("t", "m", {"XDG_RUNTIME_DIR": str(tmp_path), "PATH": os.environ["PATH"]}) is False
    )
    assert linux_notify.session_bus({"DBUS_SESSION_BUS_ADDRESS": "unix:path=/x"}) == "unix:path=/x"


def test_a_notice_reaches_the_notification_server(notifications: NotificationServer) -> None:
    if linux_notify.command("t", "m") is None:
        pytest.skip("neither notify-send nor gdbus is installed")
    env = {"DBUS_SESSION_BUS_ADDRESS": notifications.address, "PATH": os.environ["PATH"]}
    text = "2 photos restored, \"quoted\" \\ and\na newline; 'single' -- and -x"
    assert linux_notify.notify("gpen-watch: batch finished", text, env)
    wait_for(lambda: notifications.shown, "the notice")
    assert notifications.shown == [("gpen-watch", "gpen-watch: batch finished", text)]


class Service(ServiceProcess):
    def __init__(self, root: Path, *extra: str, env: dict[str, str] | None = None) -> None:
        super().__init__(root, *extra, restorer=FAKE, env=env)

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
def test_a_headless_service_shows_one_notice_per_batch(
    services: Callable[..., Service], notifications: NotificationServer
) -> None:
    if linux_notify.command("t", "m") is None:
        pytest.skip("neither notify-send nor gdbus is installed")
    svc = services(env={"DBUS_SESSION_BUS_ADDRESS": notifications.address}).start()
    svc.batch(["a.jpg", "b.jpg", "c.jpg", "d-bad.jpg"])
    wait_for(lambda: notifications.shown, "the batch's notice")
    svc.batch(["e.jpg", "f.jpg"])
    wait_for(lambda: len(notifications.shown) >= 2, "the second batch's notice")
    assert svc.stop() == 0
    assert notifications.shown == [
        ("gpen-watch", "gpen-watch: batch finished", "3 photos restored, 1 failed (see the failed folder)"),
        ("gpen-watch", "gpen-watch: batch finished", "2 photos restored"),
    ]
    assert "gpen-watch: batch finished: 2 photos restored" in svc.log_text()


@pytest.mark.slow
def test_without_a_session_bus_the_notices_go_to_the_log(services: Callable[..., Service]) -> None:
    # The test's own XDG_RUNTIME_DIR (tests/conftest.py) holds no bus socket.
    svc = services(env={"DBUS_SESSION_BUS_ADDRESS": ""}).start()
    svc.batch(["a.jpg"])
    wait_for(
        lambda: "gpen-watch: batch finished: 1 photo restored" in svc.log_text(), "the notice's log line"
    )
    assert svc.stop() == 0
    log = svc.log_text()
    assert log.count("no desktop session to show notices in (headless)") == 1
