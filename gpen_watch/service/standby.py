"""Standby: why the service takes no new photo though the user did not pause it: outside
workers.schedule, or on battery power (workers.pause_on_battery). The service loop asks
``Standby.update`` before each claim; the photos the workers hold finish, new ones are recorded and
wait, as on a pause, and work goes on by itself at the next window or when mains power is back. The
user's own pause is apart: ``resume`` does not end a standby, and a standby ending does not lift
the user's pause.

Two development hooks stand in for what a test cannot wait for or change: ``GPEN_WATCH_NOW_FILE``
names a file holding the local time to use as now (ISO 8601, "2026-03-02T18:59:00"), read again
on every look, and ``GPEN_WATCH_POWER_SUPPLY`` a folder laid out like /sys/class/power_supply,
read instead of what the OS says, every second rather than every 30 s.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from gpen_watch import platform as platforms
from gpen_watch.base.strenum import StrEnum
from gpen_watch.config import WorkerConfig
from gpen_watch.config.schedule import Schedule, clock_text
from gpen_watch.platform import power

log = logging.getLogger(__name__)

NOW_FILE_ENV = "GPEN_WATCH_NOW_FILE"
POWER_SUPPLY_ENV = "GPEN_WATCH_POWER_SUPPLY"
# How often the power source is asked (cheap everywhere, but macOS runs pmset for it).
POWER_POLL_S = 30.0
# With the power hook: a test flips its folder and should not wait long.
HOOK_POWER_POLL_S = 1.0
# The schedule is looked at this often (and whenever the settings change).
SCHEDULE_POLL_S = 1.0


class StandbyReason(StrEnum):
    NONE = ""
    SCHEDULE = "schedule"
    BATTERY = "battery"


def local_now() -> datetime:
    return datetime.now().astimezone()


def clock_from_environ(environ: Mapping[str, str]) -> Callable[[], datetime]:
    """The local clock, or the time in the file ``GPEN_WATCH_NOW_FILE`` names (tests)."""
    name = environ.get(NOW_FILE_ENV, "")
    if not name:
        return local_now

    def from_file() -> datetime:
        try:
            return datetime.fromisoformat(Path(name).read_text(encoding="utf-8").strip())
        except (OSError, ValueError) as exc:
            log.warning("%s: %s is no time to use as now (%s); using the clock", NOW_FILE_ENV, name, exc)
            return local_now()

    return from_file


def power_from_environ(environ: Mapping[str, str]) -> tuple[Callable[[], bool | None], float]:
    """What says whether the machine runs on battery, and how often to ask it."""
    folder = environ.get(POWER_SUPPLY_ENV, "")
    if folder:
        return (lambda: power.sysfs_on_battery(Path(folder))), HOOK_POWER_POLL_S
    return platforms.current().on_battery, POWER_POLL_S


@dataclass
class Standby:
    clock: Callable[[], datetime] = local_now
    on_battery: Callable[[], bool | None] = field(default=lambda: None)
    power_poll_s: float = POWER_POLL_S
    monotonic: Callable[[], float] = time.monotonic
    reason: StandbyReason = StandbyReason.NONE
    next_start: datetime | None = None  # while outside the schedule: when its next window starts
    battery: bool = False  # on battery, as last asked, and workers.pause_on_battery is on
    _said_battery: bool = False  # what the power source said when last asked
    _power_at: float | None = None
    _looked_at: float | None = None
    _entries: tuple[str, ...] = ()
    _schedule: Schedule = field(default_factory=Schedule)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Standby:
        env = os.environ if environ is None else environ
        on_battery, every = power_from_environ(env)
        return cls(clock_from_environ(env), on_battery, every)

    @property
    def on(self) -> bool:
        return self.reason is not StandbyReason.NONE

    def update(self, cfg: WorkerConfig) -> bool:
        """Look again (at most every second; the power every ``power_poll_s``); True when the
        reason changed."""
        mono = self.monotonic()
        entries = tuple(cfg.schedule)
        recent = self._looked_at is not None and mono - self._looked_at < SCHEDULE_POLL_S
        if entries == self._entries and recent:
            return False
        if entries != self._entries:
            self._entries, self._schedule = entries, Schedule.parse(entries)  # checked when loaded
        self._looked_at = mono
        self.battery = cfg.pause_on_battery and self._battery(mono)
        now = self.clock()
        inside = self._schedule.inside(now)
        self.next_start = None if inside else self._schedule.next_change(now)
        was = self.reason
        if not inside:
            self.reason = StandbyReason.SCHEDULE
        elif self.battery:
            self.reason = StandbyReason.BATTERY
        else:
            self.reason = StandbyReason.NONE
        if self.reason == was:
            return False
        if self.on:
            log.info("%s; the photos being restored finish, new ones wait", self.text)
        else:
            back = "inside workers.schedule" if was is StandbyReason.SCHEDULE else "on mains power"
            log.info("%s again: photos are taken again", back)
        return True

    def _battery(self, mono: float) -> bool:
        if self._power_at is None or mono - self._power_at >= self.power_poll_s:
            self._power_at = mono
            try:
                self._said_battery = bool(self.on_battery())
            except Exception:  # a power source that cannot be read must not stop the service
                log.exception("could not tell whether this machine runs on battery")
                self._said_battery = False
        return self._said_battery

    @property
    def until(self) -> str:
        """ "Mon 19:00", the next start while outside the schedule; "" otherwise."""
        return clock_text(self.next_start) if self.next_start is not None else ""

    @property
    def text(self) -> str:
        """The standby in words, for the status: "waiting: outside workers.schedule (next start Mon
        19:00)", "paused: on battery power"; "" when there is none."""
        if self.reason is StandbyReason.SCHEDULE:
            return f"waiting: outside workers.schedule (next start {self.until})"
        if self.reason is StandbyReason.BATTERY:
            return "paused: on battery power"
        return ""

    @property
    def reply(self) -> str:
        """What a ``resume`` adds while held: it does not lift this."""
        if self.reason is StandbyReason.SCHEDULE:
            return f"outside workers.schedule until {self.until}; photos wait"
        if self.reason is StandbyReason.BATTERY:
            return "on battery power; photos wait until mains power is back (workers.pause_on_battery)"
        return ""
