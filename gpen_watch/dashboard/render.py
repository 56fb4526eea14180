"""HTML from the Jinja templates in gpen_watch/data/dashboard/, escaped by default: a file name a user dropped is text
on the page, never markup."""

from __future__ import annotations

import time
from datetime import datetime

import jinja2
from markupsafe import Markup, escape

from gpen_watch.platform import program, resources


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
    env.filters["file_name"] = file_name
    # A command named on a page, as the user can run it: {{ command("stop") }}.
    env.globals["command"] = program.command
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


def file_name(name: str) -> Markup:
    """A file name that wraps where a person would break it: after "_", "-", "." and spaces of its
    stem (``<wbr>``), never inside its extension, which stays with the last piece."""
    stem, dot, ext = str(name).rpartition(".")
    if not dot or not stem:
        stem, ext = str(name), ""
    pieces, current = [], ""
    for ch in stem:
        current += ch
        if ch in "_-. ":
            pieces.append(current)
            current = ""
    tail = Markup('<span class="ext">{}</span>').format(current + "." + ext) if ext else escape(current)
    return Markup("<wbr>").join([*(escape(p) for p in pieces), tail])
