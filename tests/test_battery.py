"""Pausing on battery power: Linux's power_supply folders read from a fake sysfs tree, macOS's
pmset and Windows's GetSystemPowerStatus from canned outputs (those two never run here), the
service's standby rules with an injected clock and power source, and a real service paused by a
fake sysfs tree flipping to battery and back (GPEN_WATCH_POWER_SUPPLY)."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from service_harness import ServiceProcess, services_fixture, write_atomic

from gpen_watch.config import WorkerConfig
from gpen_watch.platform import power
from gpen_watch.platform.linux import LinuxPlatform
from gpen_watch.service.standby import Standby, StandbyReason


def supply(root: Path, name: str, **files: str) -> Path:
    """One /sys/class/power_supply/NAME folder with its attribute files (as the kernel writes
    them, with a newline)."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    for attr, value in files.items():
        (folder / attr).write_text(value + "\n")
    return folder


def laptop(root: Path, *, plugged: bool) -> Path:
    supply(root, "AC", type="Mains", online="1" if plugged else "0")
    supply(root, "BAT0", type="Battery", status="Charging" if plugged else "Discharging", scope="System")
    return root


def test_a_laptop_on_mains_and_on_battery(tmp_path: Path) -> None:
    assert power.sysfs_on_battery(laptop(tmp_path, plugged=True)) is False
    assert power.sysfs_on_battery(laptop(tmp_path, plugged=False)) is True


def test_a_machine_without_a_battery_is_never_on_battery(tmp_path: Path) -> None:
    assert power.sysfs_on_battery(tmp_path) is False  # a desktop: the folder is empty
    supply(tmp_path, "AC", type="Mains", online="0")  # a Mains supply that reads offline
    supply(tmp_path, "ups", type="UPS", online="0", status="Discharging")
    assert power.sysfs_on_battery(tmp_path) is False


def test_a_wireless_mouses_battery_is_not_this_machines(tmp_path: Path) -> None:
    supply(tmp_path, "hidpp_battery_0", type="Battery", status="Discharging", scope="Device")
    assert power.sysfs_on_battery(tmp_path) is False


def test_usb_c_power_counts_as_mains(tmp_path: Path) -> None:
    supply(tmp_path, "BAT1", type="Battery", status="Not charging")
    supply(tmp_path, "ucsi-source-psy-USBC000:001", type="USB", online="0")
    # Every external supply offline beside a battery: on battery, whatever the battery's status says.
    assert power.sysfs_on_battery(tmp_path) is True
    supply(tmp_path, "ucsi-source-psy-USBC000:002", type="USB", online="1")
    assert power.sysfs_on_battery(tmp_path) is False


def test_a_battery_discharging_with_no_external_supply_listed(tmp_path: Path) -> None:
    supply(tmp_path, "BAT0", type="Battery", status="Discharging")
    assert power.sysfs_on_battery(tmp_path) is True
    (tmp_path / "BAT0" / "status").write_text("Full\n")
    assert power.sysfs_on_battery(tmp_path) is False


def test_no_sysfs_says_nothing(tmp_path: Path) -> None:
    assert power.sysfs_on_battery(tmp_path / "missing") is None


def test_the_linux_platform_reads_its_sysfs_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(LinuxPlatform, "power_supply", laptop(tmp_path, plugged=False))
    assert LinuxPlatform().on_battery() is True


# Canned outputs of `pmset -g batt` (macOS 14).
PMSET_BATTERY = (
    "Now drawing from 'Battery Power'\n"
    " -InternalBattery-0 (id=4653155)\t87%; discharging; 5:12 remaining present: true\n"
)
PMSET_AC = "Now drawing from 'AC Power'\n -InternalBattery-0 (id=4653155)\t100%; charged; 0:00 remaining present: true\n"
PMSET_DESKTOP = "Now drawing from 'AC Power'\n"


def test_pmset_outputs() -> None:
    assert power.pmset_on_battery(PMSET_BATTERY) is True
    assert power.pmset_on_battery(PMSET_AC) is False
    assert power.pmset_on_battery(PMSET_DESKTOP) is False
    assert power.pmset_on_battery("") is None


@pytest.mark.parametrize(
    ("ac_line", "flag", "expected"),
    [
        (0, 0, True),  # offline, battery high
        (0, 8, True),  # offline, charging flag stale
        (1, 8, False),  # online, charging
        (1, 1, False),
        (0, 128, False),  # no system battery: a desktop whatever it says of the line
        (255, 128, False),
        (255, 1, None),  # the line status unknown
        (0, 255, True),  # the battery's status unknown (255 has the 128 bit set: not "no battery")
    ],
)
def test_windows_power_status(ac_line: int, flag: int, expected: bool | None) -> None:
    assert power.windows_on_battery(ac_line, flag) is expected


class Clock:
    def __init__(self) -> None:
        self.mono = 0.0
        self.now = datetime(2026, 3, 2, 12, 0)  # a Monday
        self.battery: bool | None = False
        self.asked = 0

    def on_battery(self) -> bool | None:
        self.asked += 1
        return self.battery


def standby(clock: Clock) -> Standby:
    return Standby(lambda: clock.now, clock.on_battery, 30.0, lambda: clock.mono)


def test_standby_asks_the_power_source_every_30_s_and_says_so() -> None:
    clock, cfg = Clock(), WorkerConfig()
    s = standby(clock)
    assert s.update(cfg) is False and not s.on and clock.asked == 1
    clock.battery = True
    clock.mono = 10.0
    assert s.update(cfg) is False and clock.asked == 1  # not asked again within 30 s
    clock.mono = 31.0
    assert s.update(cfg) is True and s.reason is StandbyReason.BATTERY and clock.asked == 2
    assert s.text == "paused: on battery power"
    assert "photos wait until mains power is back" in s.reply
    clock.battery = False
    clock.mono = 62.0
    assert s.update(cfg) is True and not s.on and s.text == "" and s.reply == ""


def test_pause_on_battery_off_never_asks_and_the_schedule_comes_first() -> None:
    clock = Clock()
    clock.battery = True
    s = standby(clock)
    assert s.update(WorkerConfig(pause_on_battery=False)) is False and clock.asked == 0 and not s.on
    cfg = WorkerConfig(schedule=["mon-fri 19:00-07:00"])
    assert s.update(cfg) is True  # a new schedule is looked at at once
    assert s.reason is StandbyReason.SCHEDULE and s.until == "Mon 19:00"
    clock.now, clock.mono = datetime(2026, 3, 2, 19, 0), 2.0
    assert s.update(cfg) is True and s.reason is StandbyReason.BATTERY  # inside, but on battery


def test_a_power_source_that_fails_is_taken_for_mains() -> None:
    def broken() -> bool | None:
        raise OSError("pmset: no such file")

    s = Standby(lambda: datetime(2026, 3, 2, 12, 0), broken)
    assert s.update(WorkerConfig()) is False and not s.on


FAKE = "fake_restorer:FakeRestorer"


class Service(ServiceProcess):
    """The service reading its power source from ``root/power_supply`` (GPEN_WATCH_POWER_SUPPLY)."""

    def __init__(self, root: Path) -> None:
        self.sysfs = laptop(root / "power_supply", plugged=True)
        super().__init__(root, restorer=FAKE, env={"GPEN_WATCH_POWER_SUPPLY": str(self.sysfs)})

    def plug(self, plugged: bool) -> None:
        laptop(self.sysfs, plugged=plugged)


services = services_fixture(Service)


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and sockets")
def test_a_service_pauses_on_battery_and_goes_on_with_mains_power(services: Any) -> None:
    svc = services().start()
    write_atomic(svc.inbox / "a.jpg", b"photo a")
    svc.wait(lambda s: s["queue"]["done"] == 1, what="restored on mains power")

    svc.plug(False)
    s = svc.wait(lambda s: s["standby"] == "battery", what="paused on battery")
    assert s["standby_text"] == "paused: on battery power" and not s["paused"]
    write_atomic(svc.inbox / "b.jpg", b"photo b")
    svc.wait(lambda s: s["queue"]["queued"] == 1, what="the new photo recorded")
    reply = svc.request("resume")  # no override: its reply says why the photo still waits
    assert "on battery power; photos wait until mains power is back" in reply["said"]
    s = svc.wait(lambda s: s["queue"]["queued"] == 1 and s["queue"]["in_flight"] == 0, what="still waiting")
    assert s["queue"]["done"] == 1

    svc.plug(True)
    s = svc.wait(lambda s: s["queue"]["done"] == 2, what="restored once mains power is back")
    assert s["standby"] == ""
    assert "on mains power again" in svc.log_text()
