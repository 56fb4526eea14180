"""workers.schedule's pure rules (gpen_watch.config.schedule): parsing, "is now inside", the next
change, on fixed datetimes, days on which the clocks change included; and the config's refusal."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from gpen_watch import config
from gpen_watch.base.errors import ConfigError
from gpen_watch.config.schedule import Schedule, clock_text, parse_entry

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
# 2026-03-02 is a Monday.
MON = datetime(2026, 3, 2)


def at(day: int, hhmm: str, tz: ZoneInfo | None = None) -> datetime:
    """Day ``day`` after Monday 2026-03-02 (0: that Monday), at ``hhmm``."""
    h, m = map(int, hhmm.split(":"))
    return (MON + timedelta(days=day, hours=h, minutes=m)).replace(tzinfo=tz)


def test_an_empty_schedule_is_always_inside_and_never_changes() -> None:
    s = Schedule.parse([])
    assert s.inside(at(0, "03:00")) and s.inside(at(6, "23:59"))
    assert s.next_change(at(0, "03:00")) is None


@pytest.mark.parametrize(
    ("entry", "days"),
    [
        ("daily 10:00-11:00", set(range(7))),
        ("wed 10:00-11:00", {2}),
        ("mon-fri 10:00-11:00", {0, 1, 2, 3, 4}),
        ("fri-mon 10:00-11:00", {4, 5, 6, 0}),
        ("sat,sun 10:00-11:00", {5, 6}),
        ("mon-tue,thu 10:00-11:00", {0, 1, 3}),
        ("  SAT,Sun   9:30-11:00 ", {5, 6}),
    ],
)
def test_days_parse(entry: str, days: set[int]) -> None:
    assert parse_entry(entry).days == frozenset(days)


def test_a_window_within_a_day() -> None:
    s = Schedule.parse(["mon-fri 09:00-17:30"])
    assert not s.inside(at(0, "08:59"))
    assert s.inside(at(0, "09:00"))
    assert s.inside(at(4, "17:29"))
    assert not s.inside(at(4, "17:30"))
    assert not s.inside(at(5, "12:00"))  # Saturday
    assert s.next_change(at(0, "08:00")) == at(0, "09:00")
    assert s.next_change(at(0, "10:00")) == at(0, "17:30")
    # From Friday evening the next start is Monday's.
    assert s.next_change(at(4, "18:00")) == at(7, "09:00")


def test_a_window_past_midnight_runs_into_the_next_morning() -> None:
    s = Schedule.parse(["mon-fri 19:00-07:00"])
    assert s.inside(at(0, "19:00")) and s.inside(at(1, "06:59"))  # Monday evening to Tuesday morning
    assert not s.inside(at(1, "07:00"))
    assert s.inside(at(5, "03:00"))  # Friday's night ends on Saturday morning
    assert not s.inside(at(5, "19:30"))  # but Saturday evening is no window
    assert not s.inside(at(0, "03:00"))  # Monday morning: Sunday had no evening window
    assert s.next_change(at(0, "12:00")) == at(0, "19:00")
    assert s.next_change(at(0, "20:00")) == at(1, "07:00")
    assert s.next_change(at(5, "08:00")) == at(7, "19:00")  # Saturday: Monday 19:00
    assert clock_text(s.next_change(at(5, "08:00")) or MON) == "Mon 19:00"


def test_24_00_ends_a_day_and_windows_that_touch_are_one() -> None:
    s = Schedule.parse(["sat,sun 00:00-24:00", "fri 18:00-24:00"])
    assert s.inside(at(4, "23:59")) and s.inside(at(5, "00:00")) and s.inside(at(6, "23:59"))
    assert not s.inside(at(7, "00:00"))
    # Friday 18:00 to Monday 00:00 is one stretch: its end is the next change, not Friday's 24:00.
    assert s.next_change(at(4, "19:00")) == at(7, "00:00")


def test_a_schedule_covering_the_week_never_changes() -> None:
    s = Schedule.parse(["daily 00:00-24:00"])
    assert s.inside(at(3, "12:00"))
    assert s.next_change(at(3, "12:00")) is None


def test_the_next_change_is_strictly_later_than_now() -> None:
    s = Schedule.parse(["daily 19:00-20:00"])
    assert s.next_change(at(0, "19:00")) == at(0, "20:00")
    assert s.next_change(at(0, "20:00")) == at(1, "19:00")
    assert s.next_change(at(0, "18:59") + timedelta(seconds=59)) == at(0, "19:00")


def test_aware_times_are_read_off_their_clock() -> None:
    s = Schedule.parse(["mon 19:00-20:00"])
    assert s.inside(at(0, "19:30", BERLIN))
    assert not s.inside(at(0, "19:30", BERLIN).astimezone(NEW_YORK))  # 13:30 there
    assert s.next_change(at(0, "12:00", BERLIN)) == at(0, "19:00")


def test_the_day_the_clocks_go_forward() -> None:
    # Europe/Berlin, Sunday 2026-03-29: 02:00 becomes 03:00; 02:30 never shows on the clock.
    s = Schedule.parse(["sun 02:30-04:00"])
    before = datetime(2026, 3, 29, 1, 59, tzinfo=BERLIN)
    # (Aware arithmetic in one zone is wall-clock arithmetic: go through UTC for real time.)
    jumped = (before.astimezone(ZoneInfo("UTC")) + timedelta(minutes=1)).astimezone(BERLIN)
    assert (jumped.hour, jumped.minute) == (3, 0)
    assert not s.inside(before)
    assert s.inside(jumped)  # the window starts as the clock jumps past its start
    assert s.next_change(before) == datetime(2026, 3, 29, 2, 30)
    assert s.next_change(jumped) == datetime(2026, 3, 29, 4, 0)
    # A window through the night is as long as the clock says: inside until 07:00 summer time.
    night = Schedule.parse(["sat 22:00-07:00"])
    assert night.inside(datetime(2026, 3, 29, 6, 59, tzinfo=BERLIN))
    assert not night.inside(datetime(2026, 3, 29, 7, 0, tzinfo=BERLIN))


def test_the_night_the_clocks_go_back() -> None:
    # Europe/Berlin, Sunday 2026-10-25: 03:00 becomes 02:00 again; 02:30 shows twice.
    s = Schedule.parse(["sun 02:00-02:45"])
    first = datetime(2026, 10, 25, 2, 30, tzinfo=BERLIN)
    second = datetime(2026, 10, 25, 2, 30, fold=1, tzinfo=BERLIN)
    assert first.utcoffset() != second.utcoffset()
    assert s.inside(first) and s.inside(second)
    assert s.next_change(second) == datetime(2026, 10, 25, 2, 45)
    # The week after the change the same window, and the next start after it, read the same.
    assert s.next_change(datetime(2026, 10, 25, 12, 0, tzinfo=BERLIN)) == datetime(2026, 11, 1, 2, 0)


def test_a_next_start_across_a_clock_change_keeps_its_clock_time() -> None:
    s = Schedule.parse(["mon-fri 19:00-07:00"])
    # Saturday before the spring change (US: 2026-03-08): the next start is Monday 19:00 local.
    sat = datetime(2026, 3, 7, 12, 0, tzinfo=NEW_YORK)
    assert s.next_change(sat) == datetime(2026, 3, 9, 19, 0)


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ("mon", "the days, a space, then the hours"),
        ("mon 19:00", "no range of hours"),
        ("xyz 10:00-11:00", '"xyz" is no day'),
        ("mon-xyz 10:00-11:00", '"xyz" is no day'),
        ("mon 7-8", '"7" is no time'),
        ("mon 25:00-26:00", '"25:00" is no time of day'),
        ("mon 10:60-11:00", '"10:60" is no time of day'),
        ("mon 24:00-10:00", "24:00 only ends a window"),
        ("mon 10:00-10:00", "starts and ends at the same time"),
        ("mon 10:00-11:00 extra", "the days, a space, then the hours"),
    ],
)
def test_invalid_entries_are_refused_quoting_them_with_an_example(entry: str, why: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_entry(entry)
    text = str(caught.value)
    assert f'"{entry}" is not a time window' in text
    assert why in text
    assert '"mon-fri 19:00-07:00"' in text  # a valid example to copy


def test_the_config_refuses_an_invalid_schedule_naming_the_file(tmp_path: Path) -> None:
    file = tmp_path / "config.toml"
    file.write_text('[workers]\nschedule = ["mon-fri 19:00-07:00", "weekends 10:00-12:00"]\n')
    with pytest.raises(ConfigError) as caught:
        config.load(file, {})
    text = str(caught.value)
    assert str(file) in text and "workers.schedule" in text and '"weekends 10:00-12:00"' in text
    file.write_text('[workers]\nschedule = ["mon-fri 19:00-07:00", "sat,sun 00:00-24:00"]\n')
    cfg = config.load(file, {})
    assert cfg.workers.schedule == ["mon-fri 19:00-07:00", "sat,sun 00:00-24:00"]
    assert cfg.workers.pause_on_battery is True


def test_schedule_and_battery_changes_apply_without_a_restart() -> None:
    from gpen_watch.config.applies import Applies, applies

    assert applies("workers.schedule") is Applies.AT_ONCE
    assert applies("workers.pause_on_battery") is Applies.AT_ONCE
    assert applies("workers.devices") is Applies.WORKERS


def test_the_settings_form_keeps_commas_inside_schedule_entries() -> None:
    from gpen_watch.config import edit

    here = Path("config.toml")
    text = edit.apply_form("", {"workers.schedule": "mon-fri 19:00-07:00; sat,sun 00:00-24:00"}, 1)
    assert config.from_text(text, here).workers.schedule == ["mon-fri 19:00-07:00", "sat,sun 00:00-24:00"]
    # Other lists still take commas.
    text = edit.apply_form("", {"workers.devices": "cuda:0, cuda:1"}, 1)
    assert config.from_text(text, here).workers.devices == ["cuda:0", "cuda:1"]


def test_the_status_the_tray_and_the_overview_tell_a_standby_from_the_users_pause() -> None:
    from gpen_watch.cli.control import format_status
    from gpen_watch.dashboard import overview
    from gpen_watch.service.status import QueueStatus, Status
    from gpen_watch.tray import model

    text = "waiting: outside workers.schedule (next start Mon 19:00)"
    waiting = Status(
        queue=QueueStatus(queued=3), standby="schedule", standby_text=text, standby_until="Mon 19:00"
    )
    battery = Status(standby="battery", standby_text="paused: on battery power")
    paused = Status(paused=True, queue=QueueStatus(queued=3))

    assert format_status(waiting).splitlines()[0].startswith(f"gpen-watch ?: {text} (pid")
    assert format_status(battery).splitlines()[0].startswith("gpen-watch ?: paused: on battery power (pid")
    assert format_status(paused).splitlines()[0].startswith("gpen-watch ?: paused (pid")

    view = model.view_from_status(waiting)
    assert view.state == "waiting" and not view.paused  # the Pause checkbox stays the user's
    assert model.title(view) == "gpen-watch: waiting until Mon 19:00: 3 in the queue"
    assert len(model.title(view)) <= model.MAX_TITLE
    assert text[0].upper() + text[1:] in model.summary_lines(view)
    assert model.title(model.view_from_status(battery)) == "gpen-watch: paused on battery: queue empty"
    assert model.view_from_status(paused).state == "paused"

    facts = overview.facts(waiting)
    assert facts.headline == "Waiting for the schedule" and facts.standby.startswith("Waiting: outside")
    assert facts.eta_note == text
    assert overview.facts(battery).headline == "Paused on battery"
    assert overview.facts(paused).headline == "Paused" and overview.facts(paused).standby == ""
