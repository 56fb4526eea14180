"""workers.schedule in a real service (a `gpen-watch run` subprocess with the stand-in restorer):
outside its windows photos are recorded and wait, the status says why and until when, `resume`
does not override it, a reload into a window or the clock reaching one lets them through, and the
user's own pause outlasts a window's start. The clock is the file GPEN_WATCH_NOW_FILE names
(service.standby), so no test waits for real time."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from service_harness import ServiceProcess, services_fixture, write_atomic

from gpen_watch.cli.control import format_status
from gpen_watch.service.status import Status

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and sockets"),
]

FAKE = "fake_restorer:FakeRestorer"
# 2026-03-02 is a Monday.
MONDAY_NOON = "2026-03-02T12:00:00"
WAITING = "waiting: outside workers.schedule (next start Mon 19:00)"


class Service(ServiceProcess):
    """The service on ``root/config.toml`` (which a reload reads again), with its clock in
    ``root/now.txt``."""

    def __init__(self, root: Path, schedule: list[str]) -> None:
        self.config = root / "config.toml"
        self.now_file = root / "now.txt"
        root.mkdir(parents=True, exist_ok=True)
        self.set_now(MONDAY_NOON)
        self.set_schedule(schedule)
        env = {"GPEN_WATCH_NOW_FILE": str(self.now_file)}
        super().__init__(root, "--config", str(self.config), restorer=FAKE, env=env)

    def set_now(self, when: str) -> None:
        write_atomic(self.now_file, when.encode())

    def set_schedule(self, schedule: list[str]) -> None:
        entries = ", ".join(f'"{e}"' for e in schedule)
        text = f"[workers]\nschedule = [{entries}]\npause_on_battery = false\n"
        write_atomic(self.config, text.encode())

    def done(self) -> int:
        return len(list(self.outbox.rglob("*.jpg"))) if self.outbox.exists() else 0


services = services_fixture(Service)


def waiting_with(n: int) -> Any:
    """A status condition: ``n`` photos recorded and queued, none taken, outside the schedule."""
    return lambda s: s["standby"] == "schedule" and s["queue"]["queued"] == n and s["queue"]["in_flight"] == 0


def test_outside_the_schedule_photos_wait_and_a_reload_into_a_window_lets_them_through(services: Any) -> None:
    svc = services(["mon-fri 19:00-07:00"]).start()
    write_atomic(svc.inbox / "a.jpg", b"photo a")
    s = svc.wait(waiting_with(1), what="the photo recorded, waiting for the schedule")
    assert s["standby_text"] == WAITING and s["standby_until"] == "Mon 19:00"
    assert not s["paused"]  # the user did not pause
    # `gpen-watch status` says it on its first line.
    first = format_status(Status.from_json(s)).splitlines()[0]
    assert f": {WAITING} (pid" in first
    # The user's resume is no override; its reply says so, and the photo still waits.
    reply = svc.request("resume")
    assert reply["ok"] and "outside workers.schedule until Mon 19:00; photos wait" in reply["said"]
    s = svc.wait(waiting_with(1), what="still waiting after resume")
    assert s["queue"]["done"] == 0 and svc.done() == 0

    svc.set_schedule(["mon-fri 19:00-07:00", "mon 11:00-13:00"])
    reply = svc.request("reload")
    assert reply["ok"] and "workers.schedule" in reply["changed"] and not reply["workers_restart"]
    s = svc.wait(lambda s: s["queue"]["done"] == 1, what="the photo restored once inside a window")
    assert s["standby"] == "" and s["standby_text"] == ""
    assert svc.done() == 1
    assert s["workers"][0]["restarts"] == 0  # no worker restart for it


def test_the_next_window_start_resumes_by_itself_but_not_the_users_pause(services: Any) -> None:
    svc = services(["mon-fri 19:00-07:00"]).start()
    write_atomic(svc.inbox / "a.jpg", b"photo a")
    svc.wait(waiting_with(1), what="waiting for the schedule")

    svc.set_now("2026-03-02T19:00:05")  # the window opens: no one has to do anything
    s = svc.wait(lambda s: s["queue"]["done"] == 1, what="restored at the window's start")
    assert s["standby"] == ""

    # The user pauses; the window ends and starts again; the pause stays.
    assert svc.request("pause")["ok"]
    svc.set_now("2026-03-03T08:00:00")  # Tuesday morning, outside
    s = svc.wait(lambda s: s["standby"] == "schedule", what="outside again")
    assert s["paused"] and s["standby_until"] == "Tue 19:00"
    assert "also waiting: outside workers.schedule (next start Tue 19:00)" in format_status(
        Status.from_json(s)
    )
    write_atomic(svc.inbox / "b.jpg", b"photo b")
    svc.set_now("2026-03-03T19:30:00")
    s = svc.wait(
        lambda s: s["standby"] == "" and s["queue"]["queued"] == 1, what="inside, the photo still paused"
    )
    assert s["paused"] and s["queue"]["done"] == 1
    assert svc.request("resume")["said"] == "resumed"
    svc.wait(lambda s: s["queue"]["done"] == 2, what="restored after the user's resume")
