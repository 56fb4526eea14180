"""`gpen-watch status` and the dashboard's Overview of a real running service (the stand-in
restorer): a failure that was put right leaves "last errors", one that failed again is listed
once, and a redo is counted beside the photos done, with the same numbers on both."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from dashboard_client import Dashboard, served_dashboard
from service_harness import queue_empty, write_atomic

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


@pytest.fixture
def dash(tmp_path: Path) -> Iterator[Dashboard]:
    broken = tmp_path / "broken-while-this-exists"
    with served_dashboard(tmp_path, env={"FAKE_BROKEN_WHILE": str(broken)}) as d:
        yield d


def last_errors(text: str) -> list[str]:
    lines = text.split("last errors:\n", 1)[1].splitlines() if "last errors:" in text else []
    return [line for line in lines if line.startswith("  ")]


def test_status_lists_only_the_failures_still_to_see_to_and_counts_redos_apart(dash: Dashboard) -> None:
    broken = Path(dash.svc.env["FAKE_BROKEN_WHILE"])
    broken.touch()
    write_atomic(dash.svc.inbox / "fixable wedding.jpg", b"\xff\xd8 fixable")
    dash.wait(lambda s: s["queue"]["failed"] == 1, 30, "the photo to fail")
    # Retried before the fix: it fails again, and is one failure still, not two.
    assert dash.cli("retry", "fixable wedding.jpg").returncode == 0
    dash.wait(lambda s: s["queue"]["failed"] == 2, 30, "the retry to fail again")
    errors = last_errors(dash.cli("status").stdout)
    assert len(errors) == 1 and "fixable wedding.jpg: a part is missing" in errors[0], errors

    broken.unlink()  # the fix
    assert dash.cli("retry", "fixable wedding.jpg").returncode == 0
    dash.wait(lambda s: s["queue"]["done"] == 1, 30, "the fixed photo restored")
    write_atomic(dash.svc.inbox / "family.jpg", b"\xff\xd8 family")
    dash.wait(lambda s: s["queue"]["done"] == 2, 30, "the second photo")
    assert dash.cli("redo", "family.jpg", "--strength", "0.5").returncode == 0
    s = dash.wait(lambda s: s["queue"]["done"] == 3 and queue_empty(s), 30, "the redo")

    out = dash.cli("status").stdout
    assert last_errors(out) == [], out  # put right: nothing left to see to
    assert "done today: 2 photos (+1 redo): 2 restored (2 faces), 0 without a face" in out, out
    assert "all time: 2 done (+1 redo), 2 failed" in out, out
    assert re.search(r"this run: 2 done \(\+1 redo\), 3 faces restored, 2 failed", out), out
    assert (s["done_today"], s["redos_today"]) == (2, 1)

    page = dash.get("/").text
    assert "2 done today (+1 redo)" in page
    assert "2 <small>photos (+1 redo)" in page
    row = re.search(r'<td class="path">[^<]*inbox</td>(.*?)</tr>', page, re.S)
    assert row and re.findall(r'data-label="Done today">(\d+)<', row[1]) == ["2"], page
