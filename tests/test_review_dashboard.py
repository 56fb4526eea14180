"""Reviewing a batch on the dashboard of a real running service: Results' filters in the URL, a
photo's steps within its view, marks kept in the journal across a restart, bulk actions through
the service's control handler, downloads by run id, two runs side by side, and the hostile
requests each of those must refuse."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import isolated_env
from dashboard_client import Dashboard, served_dashboard, wait_for
from service_harness import write_atomic

pytestmark = pytest.mark.timeout(180)

PHOTOS = {
    "wedding_001.jpg": b"\xff\xd8 wedding one",
    "wedding_002.jpg": b"\xff\xd8 wedding two",
    "wedding_003.jpg": b"\xff\xd8 wedding three",
    "beach noface.jpg": b"\xff\xd8 no face here",
    "portrait.jpg": b"\xff\xd8 a portrait",
    "broken bad.jpg": b"not an image",
}
JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def dash(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    with served_dashboard(tmp_path_factory.mktemp("review")) as d:
        for name, data in PHOTOS.items():
            write_atomic(d.svc.inbox / name, data)
        d.wait(lambda s: s["queue"]["done"] >= 5 and s["queue"]["failed"] + s["queue"]["unsupported"] >= 1)
        yield d


def results(d: Dashboard, query: str = "") -> dict[str, Any]:
    r = d.get("/api/results" + query)
    assert r.status == 200, r.text
    return dict(r.json())


def ids_by_name(d: Dashboard) -> dict[str, int]:
    return {p["name"]: p["id"] for p in results(d)["photos"]}


def test_the_search_box_and_filters_narrow_results(dash: Dashboard) -> None:
    assert {p["name"] for p in results(dash, "?q=WEDDING")["photos"]} == {
        "wedding_001.jpg",
        "wedding_002.jpg",
        "wedding_003.jpg",
    }
    assert [p["name"] for p in results(dash, "?state=noface")["photos"]] == ["beach noface.jpg"]
    assert [p["name"] for p in results(dash, "?state=failed")["photos"]] == ["broken bad.jpg"]
    assert results(dash, "?q=wedding&sort=name")["total"] == 3
    page = dash.get("/results?q=wedding&sort=name").text
    assert 'type="search" name="q" value="wedding"' in page
    assert "3 photos match" in page
    assert "portrait.jpg" not in page
    # Each tile links to the photo's page within this view.
    for i in ids_by_name(dash).values():
        if f'href="/photo/{i}?' in page:
            assert f'href="/photo/{i}?q=wedding&amp;sort=name"' in page


def test_a_value_the_dashboard_never_writes_is_left_out_and_said(dash: Dashboard) -> None:
    r = results(dash, "?state=%3Cscript%3E&inbox=../../etc&faces_min=-1")
    assert r["total"] == len(PHOTOS)
    assert sorted(r["ignored"]) == ["faces_min=-1", "inbox=../../etc", "state=<script>"]
    page = dash.get("/results?state=%3Cscript%3E")
    assert page.status == 200 and "<script>" not in page.text and "state=&lt;script&gt;" in page.text


def test_numbered_pages_both_ways(dash: Dashboard) -> None:
    first = results(dash, "?sort=name&limit=2")
    assert first["pages"] == 3 and first["page"] == 1
    seen = [p["name"] for n in (1, 2, 3) for p in results(dash, f"?sort=name&limit=2&page={n}")["photos"]]
    assert seen == sorted(PHOTOS, key=str.lower)


def test_a_photos_page_steps_within_its_view(dash: Dashboard) -> None:
    order = [p["id"] for p in results(dash, "?q=wedding&sort=name")["photos"]]
    middle = dash.get(f"/photo/{order[1]}?q=wedding&sort=name").text
    assert f'href="/photo/{order[0]}?q=wedding&amp;sort=name" data-key="k"' in middle
    assert f'href="/photo/{order[2]}?q=wedding&amp;sort=name" data-key="j"' in middle
    assert "2 of 3 in this view" in middle
    assert f'rel="prefetch" href="/photo/{order[2]}/after.jpg"' in middle
    last = dash.get(f"/photo/{order[2]}?q=wedding&sort=name").text
    assert 'data-key="j"' not in last  # the last of the view has no next


def test_marks_persist_in_the_journal_across_a_restart(dash: Dashboard) -> None:
    ids = ids_by_name(dash)
    r = dash.post(
        f"/api/mark/{ids['portrait.jpg']}", JSON, json.dumps({"mark": "look", "note": "left eye"}).encode()
    )
    assert r.status == 200 and r.json()["marked"] == 1, r.text
    r = dash.post(f"/api/mark/{ids['broken bad.jpg']}", JSON, b'{"mark": "accepted"}')
    assert r.status == 409 and "only a restored photo" in r.json()["error"]
    with isolated_env(dash.home):
        dash.svc.stop(timeout=20)
    dash.restart()
    dash.cookie = ""
    look = results(dash, "?review=look")["photos"]
    assert [(p["name"], p["mark_note"]) for p in look] == [("portrait.jpg", "left eye")]
    assert "needs another look: left eye" in dash.get(f"/photo/{ids['portrait.jpg']}").text


def test_seen_pages_leave_the_unreviewed(dash: Dashboard) -> None:
    before = {p["id"] for p in results(dash, "?review=unreviewed")["photos"]}
    seen = ids_by_name(dash)["wedding_003.jpg"]
    assert seen in before
    assert dash.post(f"/api/mark/{seen}", JSON, b'{"mark": "reviewed"}').status == 200
    assert seen not in {p["id"] for p in results(dash, "?review=unreviewed")["photos"]}


def test_bulk_accept_by_view_and_bulk_redo_by_ids(dash: Dashboard) -> None:
    r = dash.post("/api/bulk", JSON, json.dumps({"action": "accept", "view": "?q=wedding"}).encode())
    assert r.status == 200 and r.json()["done"] == 3, r.text
    assert {p["name"] for p in results(dash, "?review=accepted")["photos"]} == {
        "wedding_001.jpg",
        "wedding_002.jpg",
        "wedding_003.jpg",
    }
    ids = ids_by_name(dash)
    picked = [ids["wedding_001.jpg"], ids["wedding_002.jpg"], ids["broken bad.jpg"]]
    body = {"action": "redo", "ids": picked, "settings": {"restore.strength": 0.5}}
    r = dash.post("/api/bulk", JSON, json.dumps(body).encode())
    reply = r.json()
    assert r.status == 200 and reply["queued"] == 2, r.text  # the failure has nothing to redo
    first, last = reply["first"], reply["last"]

    def ended() -> bool:
        p = dash.get(f"/api/progress?first={first}&last={last}").json()
        return bool(p["ended"] == p["total"] == 2)

    wait_for(ended, 30, "the bulk redo")
    shown = results(dash, "?q=wedding_00")["photos"]
    assert {p["id"] for p in shown} >= {first, last}  # each photo once, as its redo
    assert len(shown) == 3
    assert {p["redo_of"] for p in shown if p["id"] in (first, last)} == {
        ids["wedding_001.jpg"],
        ids["wedding_002.jpg"],
    }


def test_bulk_refuses_what_the_page_never_sends(dash: Dashboard) -> None:
    assert dash.post("/api/bulk", JSON, b'{"action": "rm -rf", "ids": [1]}').status == 400
    assert dash.post("/api/bulk", JSON, b'{"action": "accept", "ids": ["1; DROP"]}').status == 400
    assert dash.post("/api/bulk", {"Content-Type": "text/plain"}, b'{"action": "accept"}').status == 415
    huge = json.dumps({"action": "accept", "ids": list(range(20_000))}).encode()
    assert dash.post("/api/bulk", JSON, huge).status in (400, 413)
    # Without the page's Origin (a form on another site posting here) it never reaches the service.
    r = dash.raw(
        "POST", "/api/bulk", {"Origin": "http://evil.example", **JSON}, b'{"action": "accept", "ids": [1]}'
    )
    assert r.status == 403


def test_downloads_by_run_id(dash: Dashboard) -> None:
    ids = ids_by_name(dash)
    r = dash.get(f"/photo/{ids['portrait.jpg']}/download/result")
    assert (
        r.status == 200 and r.body == PHOTOS["portrait.jpg"]
    )  # the stand-in's result is the original's bytes
    assert (
        "attachment" in r.headers["Content-Disposition"]
        and "portrait.jpg" in r.headers["Content-Disposition"]
    )
    r = dash.get(f"/photo/{ids['portrait.jpg']}/download/original")
    assert r.status == 200 and r.body == PHOTOS["portrait.jpg"]
    assert dash.get(f"/photo/{ids['broken bad.jpg']}/download/original").body == PHOTOS["broken bad.jpg"]
    assert dash.get(f"/photo/{ids['broken bad.jpg']}/download/result").status == 404
    assert dash.get("/photo/99999999/download/original").status == 404
    assert dash.get(f"/photo/{ids['portrait.jpg']}/download/..%2f..%2fetc%2fpasswd").status == 404


def test_an_older_run_offers_no_result_and_compares_with_the_newer(dash: Dashboard) -> None:
    runs = list(results(dash, "?q=wedding_001")["photos"])
    newest = runs[0]
    first = newest["redo_of"]
    if first is None:
        pytest.skip("runs after test_bulk_accept_by_view_and_bulk_redo_by_ids")
    assert dash.get(f"/photo/{first}/download/result").status == 404  # replaced in place by the redo
    page = dash.get(f"/photo/{newest['id']}").text
    assert f'href="/photo/{newest["id"]}/compare/{first}"' in page
    compare = dash.get(f"/photo/{newest['id']}/compare/{first}")
    assert compare.status == 200
    assert re.search(rf'src="/photo/{first}/after.jpg"', compare.text)
    other = ids_by_name(dash)["portrait.jpg"]
    assert dash.get(f"/photo/{newest['id']}/compare/{other}").status == 404  # not a run of this photo


def test_dismiss_all_on_failed_as_a_plain_form(dash: Dashboard) -> None:
    page = dash.get("/failed").text
    assert "Dismiss all" in page and "Set aside as" in page  # this one was set aside in failed/
    r = dash.post(
        "/api/bulk",
        {"Content-Type": "application/x-www-form-urlencoded", "Referer": f"http://{dash.host}/failed"},
        b"action=dismiss&view=%3Fstate%3Dfailed",
    )
    assert r.status == 303 and r.headers["Location"] == "/failed"
    assert results(dash, "?state=failed")["total"] == 0
    assert "Nothing was set aside." in dash.get("/failed").text
