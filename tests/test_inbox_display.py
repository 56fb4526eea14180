"""Each inbox's watch state as the user sees it (issue 35): an inbox away, one polled (a network
share, the inotify limit, the setting) and one holding cloud placeholders say so in the status
JSON, in `gpen-watch status`, on the dashboard's Overview and in the tray's tooltip; a plain local
inbox watched with OS events adds nothing to any of them.

The status is built by the service's own ``report.build_status`` from a real ``Running`` (a real
journal, a pool with no worker) holding the watcher's states; the page is the real template."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from service_harness import ServiceProcess, services_fixture, write_atomic
from test_dashboard_activity import get, make_site
from test_overview_truths import live, said

from gpen_watch.cli.control import format_status
from gpen_watch.config import Config, InboxConfig, WatchConfig
from gpen_watch.dispatch.pool import Pool
from gpen_watch.journal import Journal
from gpen_watch.service.report import build_status
from gpen_watch.service.running import Running
from gpen_watch.service.status import Status
from gpen_watch.tray.model import summary_lines, title, view_from_status
from gpen_watch.watch.events import InboxPresence, InboxState

AWAY_WHY = "the drive or share holding it is not mounted (its mount point /media/usb is empty now)"
LIMIT_WHY = (
    "the inotify watch limit is reached (fs.inotify.max_user_watches); raise it with "
    "sysctl fs.inotify.max_user_watches=524288"
)


def state(root: Path, **kw: Any) -> InboxState:
    fields: dict[str, Any] = {
        "presence": InboxPresence.WATCHED, "reason": "", "mode": "events", "mode_reason": "",
        "waiting_download": 0, "next_rescan_s": 42.0,
    }  # fmt: skip
    return InboxState(root, **{**fields, **kw})


@pytest.fixture
def status_of(tmp_path: Path) -> Iterator[Any]:
    """status_of(*states) -> (the service's status as JSON, the inboxes' paths by name): each state
    names its inbox by folder name (local, nas, usb, icloud, many), all configured in that order."""
    names = ["local", "nas", "usb", "icloud", "many"]
    roots = {n: tmp_path / n for n in names}
    cfg = Config(
        watch=WatchConfig(
            inboxes=[InboxConfig(r) for r in roots.values()], outbox=tmp_path / "out", poll_interval=2.0
        )
    )
    journal = Journal.open(tmp_path / "journal.sqlite3")
    run = Running(cfg, journal, Pool([], cfg.restore, cfg.workers), None, threading.Event())

    def build(*states: tuple[str, dict[str, Any]]) -> dict[str, Any]:
        # Given out of order: the status lists them as the settings do.
        run.inbox_states = {roots[n]: state(roots[n], **kw) for n, kw in reversed(states)}
        return dict(json.loads(json.dumps(build_status(run).to_json())))  # as the wire carries it

    yield build, roots
    journal.close()


def page_of(tmp_path: Path, s: dict[str, Any]) -> str:
    Journal.open(tmp_path / "page.sqlite3").close()
    return live(get(make_site(tmp_path / "page.sqlite3", tmp_path, s), "/"))


NAS = ("nas", {"mode": "polling", "mode_reason": "network share (cifs)"})
USB = ("usb", {"presence": InboxPresence.AWAY, "reason": AWAY_WHY, "mode": "polling", "mode_reason": "x (y)"})
ICLOUD = ("icloud", {"waiting_download": 3})


def test_polling_away_and_waiting_downloads_are_said_everywhere(status_of: Any, tmp_path: Path) -> None:
    build, roots = status_of
    s = build(("local", {}), NAS, USB, ICLOUD, ("many", {"mode": "polling", "mode_reason": LIMIT_WHY}))

    # The JSON: one entry per inbox, in the settings' order, each field as the watcher said it.
    entries = {Path(e["path"]).name: e for e in s["inbox_states"]}
    assert [Path(e["path"]).name for e in s["inbox_states"]] == ["local", "nas", "usb", "icloud", "many"]
    assert entries["local"] == {
        "path": str(roots["local"]), "watched": True, "away_reason": "", "mode": "events", "mode_reason": "",
        "poll_interval_s": 0.0, "waiting_download": 0, "next_rescan_s": 42.0,
    }  # fmt: skip
    assert (entries["nas"]["mode"], entries["nas"]["mode_reason"], entries["nas"]["poll_interval_s"]) == (
        "polling",
        "network share (cifs)",
        2.0,
    )
    assert (entries["usb"]["watched"], entries["usb"]["away_reason"]) == (False, AWAY_WHY)
    assert entries["icloud"]["waiting_download"] == 3
    assert s["inboxes"] == [str(r) for r in roots.values()]  # the old field as it was

    # `gpen-watch status`: one line for each thing worth saying, none for the plain inbox.
    text = format_status(Status.from_json(s))
    lines = [line for line in text.splitlines() if line.startswith("inbox ")]
    assert lines == [
        f"inbox {roots['nas']}: polling every 2 s (network share, cifs)",
        f"inbox {roots['usb']}: away: {AWAY_WHY}; photos there wait until it is back",
        f"inbox {roots['icloud']}: 3 photos waiting for download "
        "(cloud placeholders are not read; each is taken once downloaded)",
        f"inbox {roots['many']}: polling every 2 s: {LIMIT_WHY}",
    ], text
    assert str(roots["local"]) not in text.replace(f"inboxes: {', '.join(s['inboxes'])}", "")

    # The Overview: the away inbox as a warning banner among the problems, the rest as quiet notes.
    page = page_of(tmp_path, s)
    banners = re.findall(r'<p class="banner warn inbox-away">(.*?)</p>', page, re.S)
    assert [said(b) for b in banners] == [
        f"Inbox {roots['usb']} is away: {AWAY_WHY}; photos there wait until it is back."
    ], page
    problems = page.split('aria-label="Problems"', 1)[1].split("</section>", 1)[0]
    assert banners[0] in problems
    notes = [said(n) for n in re.findall(r'<p class="muted inbox-note">(.*?)</p>', page, re.S)]
    assert notes == [
        f"Inbox {roots['nas']}: polling every 2 s (network share, cifs).",
        f"Inbox {roots['icloud']}: 3 photos waiting for download "
        "(cloud placeholders are not read; each is taken once downloaded).",
        f"Inbox {roots['many']}: polling every 2 s: {LIMIT_WHY}.",
    ], page
    assert str(roots["local"]) not in said(page)

    # The tray's tooltip names the away inbox when there is no problem to say first (the pool here
    # has no worker), and its menu says it in a line of its own.
    view = view_from_status(Status.from_json({**s, "problem": None, "problems": []}))
    assert title(view) == f"gpen-watch: idle: queue empty - inbox away: {roots['usb']}"[:62] + "…"
    assert f"Inbox away: {roots['usb']}"[:63] + "…" in summary_lines(view)


def test_a_plain_local_inbox_adds_nothing(status_of: Any, tmp_path: Path) -> None:
    build, _ = status_of
    s = build(("local", {}), ("nas", {}))
    quiet = Status.from_json(s)
    before = Status.from_json({**s, "inbox_states": []})
    assert len(quiet.inbox_states) == 2
    assert format_status(quiet) == format_status(before)
    assert page_of(tmp_path, s) == page_of(tmp_path, before.to_json())
    assert "inbox-away" not in page_of(tmp_path, s) and "inbox-note" not in page_of(tmp_path, s)
    assert title(view_from_status(quiet)) == title(view_from_status(before))


def test_one_photo_waiting_and_an_away_inbox_without_a_reason_read_well(status_of: Any) -> None:
    build, roots = status_of
    s = Status.from_json(
        build(("icloud", {"waiting_download": 1}), ("usb", {"presence": InboxPresence.AWAY, "reason": ""}))
    )
    text = format_status(s)
    assert (
        f"inbox {roots['icloud']}: 1 photo waiting for download (cloud placeholders are not read; it is"
        in text
    )
    assert f"inbox {roots['usb']}: away: it cannot be reached; photos there wait until it is back" in text


def test_a_status_from_a_service_without_inbox_states_still_reads(tmp_path: Path) -> None:
    # A service one release older sends no inbox_states: nothing is said, nothing breaks.
    s = Status.from_json({"version": "1", "inboxes": ["/in"], "queue": {}, "throughput": {}})
    assert s.inbox_states == ()
    assert "inbox /in" not in format_status(s)


class Service(ServiceProcess):
    def __init__(self, root: Path, *extra: str, **kw: Any) -> None:
        super().__init__(root, *extra, restorer="fake_restorer:FakeRestorer", **kw)


services = services_fixture(Service)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_real_service_counts_an_icloud_stub_as_waiting_for_download(services: Any) -> None:
    svc = services()
    svc.inbox.mkdir(parents=True)
    write_atomic(svc.inbox / ".IMG_1.jpg.icloud", b"bplist00 a placeholder, not a photo")
    svc.start()
    s = svc.wait(lambda s: any(e["waiting_download"] for e in s.get("inbox_states", [])), 30, "the stub")
    (entry,) = s["inbox_states"]
    assert (entry["watched"], entry["mode"], entry["waiting_download"]) == (True, "events", 1), entry
    assert s["queue"]["queued"] + s["queue"]["running"] + s["queue"]["failed"] == 0  # never read
    out = subprocess.run(
        [sys.executable, "-m", "gpen_watch", "status"],
        capture_output=True,
        text=True,
        timeout=60,
        env=svc.env,
    )
    assert f"inbox {entry['path']}: 1 photo waiting for download" in out.stdout, out
    assert (svc.inbox / ".IMG_1.jpg.icloud").exists()
    assert svc.stop() == 0
