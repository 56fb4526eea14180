"""HTML from the Jinja templates in gpen_watch/data/dashboard/, escaped by default: a file name a user dropped is text
on the page, never markup."""

from __future__ import annotations

import time
from datetime import datetime

import jinja2

from gpen_watch.platform import resources


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader(resources.PACKAGE, f"{resources.DATA}/dashboard/templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = when
    env.filters["duration"] = duration
    env.filters["mb"] = lambda v: "" if v is None else f"{v:.0f} MB"
    return env


def when(epoch: float | None, now: float | None = None) -> str:
    """ "14:03:22" today, "Mon 14:03" this week, "2026-11-20 14:03" before."""
    if epoch is None:
        return ""
    t = datetime.fromtimestamp(epoch)
    today = datetime.fromtimestamp(time.time() if now is None else now)
    if t.date() == today.date():
        return t.strftime("%H:%M:%S")
    if 0 < (today.date() - t.date()).days < 7:
        return t.strftime("%a %H:%M")
    return t.strftime("%Y-%m-%d %H:%M")


def duration(seconds: float | None) -> str:
    """ "45 s", "12 min", "3 h 20 min"."""
    if seconds is None:
        return "—"
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    return f"{s // 3600} h {s % 3600 // 60} min"
