"""workers.schedule: the hours of the week when the workers run, as clock readings.

Each entry is "DAYS HH:MM-HH:MM": DAYS is ``daily``, a day (``mon``..``sun``), a range
(``mon-fri``; ``fri-mon`` wraps over the weekend) or a comma list of those (``sat,sun``). A window
that ends before it starts runs past midnight into the next day: ``mon-fri 19:00-07:00`` is each
of those evenings to the next morning. ``24:00`` may end a window. No entry at all: always.

Everything here is pure: the caller passes ``now``, a datetime in the machine's local time. The
windows are read off its clock face (weekday, hour, minute), so a day on which the clocks change
needs no rule of its own: a window starting at a time the clocks skip starts as they jump past
it, and on the night they go back the repeated hour is inside or outside twice, as it reads.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, time, timedelta

from gpen_watch.base.errors import ConfigError

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
DAY_TITLES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
MINUTES_A_DAY = 24 * 60
EXAMPLE = '"mon-fri 19:00-07:00" or "sat,sun 00:00-24:00"'
_TIME = re.compile(r"(\d{1,2}):(\d{2})")


@dataclass(frozen=True)
class Window:
    """One entry: the days it starts on (0 is Monday) and its start and end in minutes after
    midnight; ``end <= start`` runs into the next day."""

    days: frozenset[int]
    start: int
    end: int

    def holds(self, weekday: int, minute: int) -> bool:
        if self.start < self.end:
            return weekday in self.days and self.start <= minute < self.end
        # Past midnight: the evening of a day it starts on, or the morning after one.
        return (weekday in self.days and minute >= self.start) or (
            (weekday - 1) % 7 in self.days and minute < self.end
        )


def _refuse(entry: str, why: str) -> ConfigError:
    return ConfigError(
        f'workers.schedule: "{entry}" is not a time window: {why}; write it as DAYS HH:MM-HH:MM, '
        f"for example {EXAMPLE}"
    )


def _day(entry: str, name: str) -> int:
    if name not in DAYS:
        raise _refuse(entry, f'"{name}" is no day (use daily, {", ".join(DAYS)}, a range or a comma list)')
    return DAYS.index(name)


def _days(entry: str, text: str) -> frozenset[int]:
    if text == "daily":
        return frozenset(range(7))
    days: set[int] = set()
    for part in text.split(","):
        first, dash, last = part.partition("-")
        a = _day(entry, first)
        b = _day(entry, last) if dash else a
        days.update((a + k) % 7 for k in range((b - a) % 7 + 1))
    return frozenset(days)


def _minute(entry: str, text: str, *, end: bool) -> int:
    match = _TIME.fullmatch(text)
    if match is None:
        raise _refuse(entry, f'"{text}" is no time (use HH:MM, such as 07:30)')
    hour, minute = int(match[1]), int(match[2])
    if end and (hour, minute) == (24, 0):
        return MINUTES_A_DAY
    if hour > 23 or minute > 59:
        span = "00:00 to 24:00" if end else "00:00 to 23:59; 24:00 only ends a window"
        raise _refuse(entry, f'"{text}" is no time of day ({span})')
    return hour * 60 + minute


def parse_entry(entry: str) -> Window:
    """One entry as a window; ConfigError quoting it, with an example, when it is none."""
    parts = entry.strip().lower().split()
    if len(parts) != 2:
        raise _refuse(entry, "it needs the days, a space, then the hours")
    days_text, hours = parts
    start_text, dash, end_text = hours.partition("-")
    if not dash:
        raise _refuse(entry, f'"{hours}" is no range of hours (use HH:MM-HH:MM)')
    days = _days(entry, days_text)
    start = _minute(entry, start_text, end=False)
    end = _minute(entry, end_text, end=True)
    if start == end:
        raise _refuse(entry, "it starts and ends at the same time (for a whole day use 00:00-24:00)")
    return Window(days, start, end)


@dataclass(frozen=True)
class Schedule:
    """The windows of workers.schedule; none: always inside."""

    windows: tuple[Window, ...] = ()

    @classmethod
    def parse(cls, entries: Sequence[str]) -> Schedule:
        return cls(tuple(parse_entry(e) for e in entries))

    @property
    def always(self) -> bool:
        return not self.windows

    def inside(self, now: datetime) -> bool:
        if self.always:
            return True
        minute = now.hour * 60 + now.minute
        return any(w.holds(now.weekday(), minute) for w in self.windows)

    def next_change(self, now: datetime) -> datetime | None:
        """The clock reading (naive, local) at which ``inside`` next differs from ``inside(now)``:
        the next start while outside, the next end while inside; None when it never changes."""
        if self.always:
            return None
        wall = now.replace(tzinfo=None)
        state = self.inside(wall)
        midnight = datetime.combine(wall.date(), time())
        for t in sorted(self._boundaries(midnight)):
            if t > wall and self.inside(t) != state:
                return t
        return None  # the windows cover the whole week

    def _boundaries(self, midnight: datetime) -> set[datetime]:
        """Every start and end of a window from the day before ``midnight`` through eight days on:
        a week is the schedule's period, so a change, if any, is among them."""
        out: set[datetime] = set()
        for offset in range(-1, 9):
            day = midnight + timedelta(days=offset)
            for w in self.windows:
                if day.weekday() in w.days:
                    end = w.end + (MINUTES_A_DAY if w.end <= w.start else 0)
                    out.update((day + timedelta(minutes=w.start), day + timedelta(minutes=end)))
        return out


def check(entries: Sequence[str], where: str = "") -> None:
    """Refuse the first entry that is no window (config validation; ``where`` prefixes the
    sentence: the file it is in)."""
    try:
        Schedule.parse(entries)
    except ConfigError as exc:
        raise ConfigError(f"{where}{exc}") from None


def clock_text(t: datetime) -> str:
    """ "Mon 19:00"."""
    return f"{DAY_TITLES[t.weekday()]} {t:%H:%M}"
