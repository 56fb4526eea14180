"""The Activity page, in-process on a journal the test writes: one line per run with its outcome,
its journal steps folded under it, the failures alone with ``?only=failed`` (kept in its links and
its live stream), dates before today, and pages that stay bounded reads with many runs."""

from __future__ import annotations

import asyncio
import hashlib
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import make_mocked_request

from gpen_watch.config import Config
from gpen_watch.dashboard.render import environment
from gpen_watch.dashboard.site import Site
from gpen_watch.journal import Journal
from gpen_watch.journal.browse import JournalBrowser
from gpen_watch.journal.states import Hidden

NOON = time.mktime((2026, 5, 6, 12, 0, 0, 0, 0, -1))


class Clock:
    def __init__(self, now: float = NOON) -> None:
        self.now = now

    def __call__(self) -> float:
        self.now += 0.001  # events keep their order in time too
        return self.now


def add(j: Journal, name: str, inbox: str = "/in") -> int:
    digest = hashlib.sha256(name.encode()).hexdigest()
    return j.add(f"{inbox}/{name}", inbox, name, 10, 1000.0, digest).job.id


def make_site(journal_path: Path, tmp_path: Path, status: dict[str, Any] | None = None) -> Site:
    reply = {"ok": True, **(status or {})}
    return Site(
        Config(),
        control=lambda request: reply,
        journal=JournalBrowser.open(journal_path),
        views_root=tmp_path / "views",
        templates=environment(),
    )


def get(site: Site, url: str) -> str:
    handler = {"/activity": site.activity_page, "/": site.overview_page}[url.split("?")[0]]
    response = asyncio.run(handler(make_mocked_request("GET", url)))
    return str(response.text)


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[tuple[Journal, Path, Clock]]:
    clock = Clock()
    path = tmp_path / "journal.sqlite3"
    j = Journal.open(path, clock=clock)
    yield j, path, clock
    j.close()


def runs_of(html: str) -> list[str]:
    return re.findall(r'<li class="run outcome-[a-z]+">(.*?)</li>\s*(?=<li class="run|</ol>)', html, re.S)


def test_one_line_per_photo_with_its_outcome_and_its_steps_folded_under_it(
    journal: tuple[Journal, Path, Clock], tmp_path: Path
) -> None:
    j, path, _ = journal
    ids = {
        name: add(j, name) for name in ("faces.jpg", "landscape.jpg", "broken.jpg", "busy.jpg", "later.jpg")
    }
    j.claim_batch(4, "w")
    for job_id in ids.values():
        j.log_event(job_id, "output-reserved", "/out/x.jpg")  # the internal steps of a real run
    j.finish(ids["faces.jpg"], "/out/faces.jpg", faces=3)
    j.finish(ids["landscape.jpg"], "/out/landscape.jpg", faces=0)
    j.fail(ids["broken.jpg"], "truncated JPEG")
    redo = j.add_redo(j.require(ids["faces.jpg"]), "/arch/faces.jpg", {"restore.strength": 0.5})
    html = get(make_site(path, tmp_path), "/activity")

    lines = runs_of(html)
    assert len(lines) == 6, html  # five photos and one redo: a line each, not one per event
    text = [re.sub(r"<time>.*?</time>|<[^>]+>", "", line.split("<details")[0]).split() for line in lines]
    outcomes = {" ".join(words) for words in text}
    assert {
        f"faces.jpg restored 3 faces; redone (run {redo.id})",
        "landscape.jpg no face: copied through",
        "broken.jpg failed: truncated JPEG",
        "busy.jpg restoring",
        "later.jpg waiting",
        "faces.jpg redo waiting",
    } == outcomes, outcomes
    # Newest activity first: the redo was asked last (its photo's line says so too).
    assert [words[0] for words in text[:2]] == ["faces.jpg", "faces.jpg"], text
    # The journal's own steps are under each line, folded.
    assert html.count("<details") == 6
    broken = next(line for line in lines if "broken.jpg" in line)
    steps = broken.split("<details", 1)[1]
    assert "output-reserved" in steps and "claimed" in steps and "added" in steps
    assert "output-reserved" not in broken.split("<details", 1)[0]


def test_failures_only_keeps_its_filter_in_its_links_and_its_live_stream(
    journal: tuple[Journal, Path, Clock], tmp_path: Path
) -> None:
    j, path, _ = journal
    good = [add(j, f"good-{i}.jpg") for i in range(5)]
    bad = [add(j, f"bad-{i}.jpg") for i in range(60)]
    j.claim_batch(100, "w")
    for job_id in good:
        j.finish(job_id, f"/out/{job_id}.jpg", faces=1)
    for job_id in bad:
        j.fail(job_id, f"reason {job_id}")
    j.hide(bad[0], Hidden.DISMISSED, "taken off the Failed page")
    site = make_site(path, tmp_path)

    html = get(site, "/activity?only=failed")
    assert 'data-live="/live/activity?only=failed"' in html
    lines = runs_of(html)
    assert len(lines) == 48 and all("failed: reason" in line for line in lines)
    assert "good-" not in html
    older = re.search(r'href="(/activity\?only=failed&amp;before=[^"]+)"', html)
    assert older, "the Older link keeps the filter"
    rest = get(site, older[1].replace("&amp;", "&"))
    assert 'data-live=""' in rest  # an older page does not follow the journal
    more = runs_of(rest)
    assert len(more) == 12
    names = {re.search(r"bad-\d+", line)[0] for line in lines + more}  # type: ignore[index]
    assert len(names) == 60  # each failure once, none lost between the pages
    assert any("(dismissed)" in line for line in more)  # the oldest failure, taken off the page since
    # Every photo again: the link back, and the stream of every run.
    assert 'href="/activity"' in html
    assert 'data-live="/live/activity"' in get(site, "/activity")


def test_anything_before_today_shows_its_date(journal: tuple[Journal, Path, Clock], tmp_path: Path) -> None:
    j, path, clock = journal
    clock.now = NOON - 3 * 86400
    old = add(j, "old.jpg")
    j.claim_batch(1, "w")
    j.finish(old, "/out/old.jpg", faces=1)
    clock.now = time.time()
    add(j, "new.jpg")
    html = get(make_site(path, tmp_path), "/activity")
    assert f"Sun 3 May {time.strftime('%H:%M', time.localtime(NOON - 3 * 86400))}" in html
    today = re.search(r"<time>(\d\d:\d\d:\d\d)</time> <a[^>]*>new\.jpg", html)
    assert today, "today's runs keep the time alone"


def test_stamp_says_the_date_of_anything_before_today() -> None:
    from gpen_watch.dashboard.activity import stamp

    now = time.mktime((2026, 12, 3, 15, 0, 0, 0, 0, -1))
    at = lambda *day_hm: time.mktime((*day_hm[:3], day_hm[3], day_hm[4], 0, 0, 0, -1))  # noqa: E731
    assert stamp(at(2026, 12, 3, 14, 3), now) == "14:03:00"
    assert stamp(at(2026, 12, 2, 9, 5), now) == "yesterday 09:05"
    assert stamp(at(2026, 11, 24, 14, 3), now) == "Tue 24 Nov 14:03"
    assert stamp(at(2025, 12, 31, 23, 59), now) == "31 Dec 2025 23:59"


def test_a_bad_filter_or_page_key_is_a_sentence(journal: tuple[Journal, Path, Clock], tmp_path: Path) -> None:
    from aiohttp import web

    site = make_site(journal[1], tmp_path)
    for url in ("/activity?only=everything", "/activity?before=x", "/activity?only=failed&before=12"):
        with pytest.raises(web.HTTPBadRequest):
            get(site, url)


def fill(path: Path, runs: int, events_per_run: int = 7, fail_every: int = 50) -> None:
    """``runs`` finished runs with their events, written straight into the journal's tables (the
    journal's own writes would take minutes for this many)."""
    conn = sqlite3.connect(path)
    with conn:
        conn.executemany(
            "INSERT INTO jobs (id, source, inbox, rel, size, mtime, sha256, state, created, finished, faces, output)"
            " VALUES (?, ?, '/in', ?, 10, 1, ?, ?, ?, ?, 1, '/out/x.jpg')",
            [
                (
                    i,
                    f"/in/p{i}.jpg",
                    f"p{i}.jpg",
                    f"{i:064x}",
                    "failed" if i % fail_every == 0 else "done",
                    NOON + i,
                    NOON + i + 0.5,
                )
                for i in range(1, runs + 1)
            ],
        )
        conn.executemany(
            "INSERT INTO events (job_id, time, kind, detail) VALUES (?, ?, ?, '')",
            [(i, NOON + i + k / 10, f"step-{k}") for i in range(1, runs + 1) for k in range(events_per_run)],
        )
    conn.close()


def steps_of(site: Site, url: str) -> int:
    """SQLite's virtual-machine steps (in thousands) the page at ``url`` takes to read."""
    counted = [0]

    def tick() -> int:
        counted[0] += 1
        return 0

    conn = site.journal._conn
    conn.set_progress_handler(tick, 1000)
    try:
        get(site, url)
    finally:
        conn.set_progress_handler(None, 0)
    return counted[0]


@pytest.mark.parametrize("failures_only", [False, True])
def test_a_page_costs_the_same_with_100_or_20000_runs(tmp_path: Path, failures_only: bool) -> None:
    costs = []
    for runs in (100, 20_000):
        path = tmp_path / f"j{runs}.sqlite3"
        Journal.open(path).close()
        fill(path, runs, fail_every=2 if failures_only else 50)  # a full page of failures in both
        site = make_site(path, tmp_path)
        query = "?only=failed" if failures_only else ""
        first = get(site, "/activity" + query)
        assert len(runs_of(first)) == 48
        costs.append(steps_of(site, "/activity" + query))
        if runs == 20_000 and not failures_only:
            # A page deep in the history costs what the first does, and follows on from the one before.
            older = re.search(r'href="/activity\?before=(\d+)"', first)
            assert older
            assert int(older[1]) == 7 * (20_000 - 47)  # the last line's latest event
            deep = 7 * 10_000 + 1  # below run 10,000's last event: the page starts with it
            page = get(site, f"/activity?before={deep}")
            assert [re.search(r">(p\d+)\.jpg<", line)[1] for line in runs_of(page)][:2] == ["p10000", "p9999"]  # type: ignore[index]
            costs.append(steps_of(site, f"/activity?before={deep}"))
        site.journal.close()
    assert max(costs) <= 3 * min(costs) + 20, costs
