"""Culling on the dashboard of a real running service, without a browser: flags and stars through
its API, a copy dropped into another folder listed and redone with its photo, a retry that turns out
to be a copy, 1:1 crops of real pixels by run id, and the hostile requests each must refuse.

The stand-in restorer (``review_restorer``) writes a result that is the photo with its colours
turned, and views as a worker writes them."""

from __future__ import annotations

import html
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from dashboard_client import Dashboard, served_dashboard, wait_for
from PIL import Image
from service_harness import queue_empty, write_atomic

pytestmark = pytest.mark.timeout(180)

JSON = {"Content-Type": "application/json"}


def jpeg(w: int, h: int, colour: tuple[int, int, int], spot: tuple[int, int] | None = None) -> bytes:
    im = Image.new("RGB", (w, h), colour)
    if spot is not None:  # one red pixel block, to find in a crop
        im.paste((255, 0, 0), (spot[0], spot[1], spot[0] + 8, spot[1] + 8))
    out = io.BytesIO()
    im.save(out, "JPEG", quality=95)
    return out.getvalue()


WEDDING = jpeg(640, 480, (40, 90, 160))
PHOTOS = {
    "wedding.jpg": WEDDING,
    "portrait.jpg": jpeg(300, 400, (200, 150, 120)),
    "spot x2.jpg": jpeg(400, 300, (20, 120, 60), spot=(100, 60)),
}


@pytest.fixture(scope="module")
def dash(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    root = tmp_path_factory.mktemp("culling-api")
    broken = root / "broken-while-this-exists"
    broken.touch()
    with served_dashboard(
        root, restorer="review_restorer:ReviewRestorer", env={"FAKE_BROKEN_WHILE": str(broken)}
    ) as d:
        for name, data in PHOTOS.items():
            write_atomic(d.svc.inbox / name, data)
        d.wait(lambda s: s["queue"]["done"] >= len(PHOTOS), 60, "the photos restored")
        yield d


def results(d: Dashboard, query: str = "") -> list[dict[str, Any]]:
    r = d.get("/api/results?limit=200" + ("&" + query if query else ""))
    assert r.status == 200, r.text
    photos: list[dict[str, Any]] = r.json()["photos"]
    return photos


def run_of(d: Dashboard, name: str, query: str = "") -> dict[str, Any]:
    return next(p for p in results(d, query) if p["name"] == name)


def mark(d: Dashboard, run: int, body: dict[str, Any]) -> Any:
    return d.post(f"/api/mark/{run}", JSON, json.dumps(body).encode())


# --- flags and stars ------------------------------------------------------------------------------


def test_flags_and_stars_through_the_api_and_their_filters(dash: Dashboard) -> None:
    run = run_of(dash, "portrait.jpg")["id"]
    assert mark(dash, run, {"mark": "rejected"}).status == 200
    assert mark(dash, run, {"stars": 4}).status == 200
    assert [p["name"] for p in results(dash, "review=rejected")] == ["portrait.jpg"]
    assert [p["name"] for p in results(dash, "stars=4")] == ["portrait.jpg"]
    assert results(dash, "stars=5") == []
    page = dash.get(f"/photo/{run}").text
    assert "rejected" in page and page.count('class="star on"') == 4
    # An undo sends back what it had: no flag, no stars, and it is not reviewed any more.
    assert mark(dash, run, {"mark": "none", "note": None, "stars": 0}).status == 200
    again = run_of(dash, "portrait.jpg")
    assert (again["mark"], again["stars"], again["reviewed"]) == (None, None, None)
    assert "portrait.jpg" in [p["name"] for p in results(dash, "review=unreviewed")]
    r = dash.post("/api/bulk", JSON, json.dumps({"action": "reject", "ids": [run]}).encode())
    assert r.status == 200 and r.json()["done"] == 1, r.text
    assert run_of(dash, "portrait.jpg")["mark"] == "rejected"
    assert dash.post("/api/bulk", JSON, json.dumps({"action": "unmark", "ids": [run]}).encode()).status == 200


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"mark": "maybe"},
        {"stars": 6},
        {"stars": -1},
        {"stars": "3"},
        {"stars": True},
        {"stars": 2.5},
        {"mark": "look", "note": "x" * 201},
    ],
)
def test_a_mark_the_page_never_sends_is_refused(dash: Dashboard, body: dict[str, Any]) -> None:
    run = run_of(dash, "portrait.jpg")["id"]
    r = mark(dash, run, body)
    assert r.status == 400, (body, r.text)
    assert run_of(dash, "portrait.jpg")["stars"] is None


def test_a_mark_from_another_site_or_without_a_login_is_refused(dash: Dashboard) -> None:
    run = run_of(dash, "portrait.jpg")["id"]
    body = b'{"stars": 5}'
    r = dash.raw("POST", f"/api/mark/{run}", {"Origin": "http://evil.example", **JSON}, body)
    assert r.status == 403
    r = dash.raw("POST", f"/api/mark/{run}", {"Origin": f"http://{dash.host}", **JSON}, body, signed_in=False)
    assert r.status == 401
    assert run_of(dash, "portrait.jpg")["stars"] is None


FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def mark_form_action(d: Dashboard, run: int, query: str) -> str:
    """The photo page's mark form's address, as the page in that view writes it."""
    found = re.search(
        r'<form class="marks" method="post" action="([^"]+)"', d.get(f"/photo/{run}{query}").text
    )
    assert found, "the photo page has no mark form"
    return html.unescape(found.group(1))


def test_the_mark_form_works_without_the_pages_script(dash: Dashboard) -> None:
    """What a browser without the page's script sends: the form, by the button pressed, answered
    with the photo's page in its view."""
    run = run_of(dash, "wedding.jpg")["id"]
    action = mark_form_action(dash, run, "?review=unreviewed&sort=name")
    assert action == f"/api/mark/{run}?review=unreviewed&sort=name"
    sent = [
        (b"note=&mark=accepted", ("accepted", None, None)),
        # The note goes with "needs another look" only, as the script sends it.
        (b"note=eyes+look+glassy%2C+check&mark=look", ("look", "eyes look glassy, check", None)),
        (b"note=ignored&mark=rejected", ("rejected", None, None)),
        (b"note=&stars=3", ("rejected", None, 3)),
        (b"note=&stars=0", ("rejected", None, None)),  # the page's lit star again: none
        (b"note=&mark=none", (None, None, None)),
    ]
    for body, (flag, note, stars) in sent:
        r = dash.post(action, FORM, body)
        assert r.status == 303, (body, r.status, r.text)
        assert r.headers["Location"] == f"/photo/{run}?review=unreviewed&sort=name", body
        now = run_of(dash, "wedding.jpg")
        assert (now["mark"], now["mark_note"], now["stars"]) == (flag, note, stars), body
    dash.post(action, FORM, b"note=&mark=accepted")
    page = dash.get(f"/photo/{run}?review=unreviewed&sort=name")
    assert page.status == 200 and '<span class="badge ok">picked</span>' in page.text
    # A page with a lit star sends 0 from that star: a second press takes it back.
    dash.post(action, FORM, b"note=&stars=2")
    assert 'name="stars" value="0" class="star on"' in dash.get(f"/photo/{run}").text
    dash.post(action, FORM, b"note=&mark=none&stars=0")


def test_the_view_a_mark_form_goes_back_to_is_written_anew(dash: Dashboard) -> None:
    run = run_of(dash, "wedding.jpg")["id"]
    for query, back in [
        ("?review=look&evil=https://evil.example&sort=name", "?review=look&sort=name"),
        ("?q=%2F%2Fevil.example", "?q=//evil.example"),  # a search's text, on this photo's page
        ("?review=nonsense", ""),
        ("?page=3", ""),
    ]:
        r = dash.post(f"/api/mark/{run}{query}", FORM, b"mark=none")
        assert r.status == 303 and r.headers["Location"] == f"/photo/{run}{back}", (query, r.headers)
        where = urlsplit(r.headers["Location"])
        assert (where.scheme, where.netloc, where.path) == ("", "", f"/photo/{run}")


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"note=",
        b"mark=maybe",
        b"stars=6",
        b"stars=-1",
        b"stars=2.5",
        b"stars=99999999999999999999",
        b"mark=look&note=" + b"x" * 201,
        b"mark=none&stars=" + b"9" * 5000,
    ],
)
def test_a_mark_form_the_page_never_sends_is_refused(dash: Dashboard, body: bytes) -> None:
    run = run_of(dash, "portrait.jpg")["id"]
    r = dash.post(f"/api/mark/{run}", FORM, body)
    assert r.status in (400, 413), (body[:40], r.status, r.text)
    assert run_of(dash, "portrait.jpg")["stars"] is None


def test_a_mark_form_from_another_site_is_refused(dash: Dashboard) -> None:
    """A hostile page's form aimed at the dashboard: its Origin, no Origin at all from another
    site, "null" (a sandboxed page), or no session cookie: refused, and nothing marked."""
    run = run_of(dash, "portrait.jpg")["id"]
    body = b"note=&mark=rejected"
    own = {"Origin": f"http://{dash.host}", **FORM}
    for headers, signed_in, status in [
        ({**own, "Origin": "http://evil.example"}, True, 403),
        ({**own, "Origin": "null"}, True, 403),
        ({**own, "Origin": f"http://localhost.evil.example:{dash.port}"}, True, 403),
        ({**FORM, "Sec-Fetch-Site": "cross-site"}, True, 403),
        (FORM, True, 403),  # neither an Origin nor the script's header
        (own, False, 401),
        ({**own, "Host": "evil.example"}, True, 421),
    ]:
        r = dash.raw("POST", f"/api/mark/{run}", headers, body, signed_in=signed_in)
        assert r.status == status, (headers, signed_in, r.status, r.text)
        assert "Location" not in r.headers
    assert run_of(dash, "portrait.jpg")["mark"] is None


# --- copies ---------------------------------------------------------------------------------------


def test_a_copy_in_another_folder_is_listed_and_redone_with_its_photo(dash: Dashboard) -> None:
    write_atomic(dash.svc.inbox / "album" / "wedding.jpg", WEDDING)
    wait_for(lambda: bool(results(dash, "state=copy")), 30, "the copy listed")
    copy = results(dash, "state=copy")[0]
    first = run_of(dash, "wedding.jpg", "q=wedding&sort=oldest")
    assert copy["id"] != first["id"] and copy["state"] == "duplicate"
    assert copy["output"] == str(dash.svc.outbox / "album" / "wedding.jpg")
    assert [p["id"] for p in results(dash, "q=album")] == [copy["id"]]  # the folder finds it
    assert "a copy of wedding.jpg" in dash.get("/results?q=album").text
    page = dash.get(f"/photo/{copy['id']}").text
    assert f'a copy of <a href="/photo/{first["id"]}">wedding.jpg</a>' in page
    assert "album/wedding.jpg" in dash.get(f"/photo/{first['id']}").text  # its copies, named
    # A redo of the photo redoes its copy with the same settings.
    r = dash.post(
        f"/api/redo/{first['id']}", JSON, json.dumps({"settings": {"restore.strength": 0.5}}).encode()
    )
    assert r.status == 200, r.text
    reply = r.json()
    assert len(reply["copies"]) == 1 and "album/wedding.jpg" in reply["note"]
    dash.wait(queue_empty, 30, "the redos")
    newer = dash.get(f"/api/photo/{reply['copies'][0]}").json()["photo"]
    assert newer["state"] == "done" and newer["redo_of"] == copy["id"]
    assert "strength=0.5" in newer["notes"]
    assert [p["id"] for p in results(dash, "q=album")] == [newer["id"]]  # the copy, as its redo
    assert "a copy of wedding.jpg" in dash.get("/results?q=album").text


def test_a_retry_that_turns_out_to_be_a_copy_is_listed_and_its_error_file_goes(dash: Dashboard) -> None:
    write_atomic(dash.svc.inbox / "fixable scan.jpg", jpeg(200, 200, (1, 2, 3)))
    dash.wait(lambda s: s["queue"]["failed"] >= 1, 30, "the scan to fail")
    kept = dash.svc.failed / "fixable scan.jpg"
    assert kept.exists() and (dash.svc.failed / "fixable scan.jpg.error.txt").exists()
    failure = run_of(dash, "fixable scan.jpg", "state=failed")
    # Its file replaced, in failed/, by a photo already restored; then Retry.
    kept.write_bytes(PHOTOS["portrait.jpg"])
    assert dash.post(f"/api/retry/{failure['id']}").status == 200
    wait_for(
        lambda: any(p["name"] == "fixable scan.jpg" for p in results(dash, "state=copy")), 30, "the copy"
    )
    assert results(dash, "state=failed&q=fixable") == []
    wait_for(lambda: not (dash.svc.failed / "fixable scan.jpg.error.txt").exists(), 10, "the error file gone")
    assert (dash.svc.outbox / "fixable scan.jpg").exists()


# --- real pixels ----------------------------------------------------------------------------------


def test_the_real_sizes_and_a_crop_of_both_halves_at_one_region(dash: Dashboard) -> None:
    run = run_of(dash, "spot x2.jpg")["id"]  # 400 x 300, its result upscaled to 800 x 600
    r = dash.get(f"/photo/{run}/real.json")
    assert r.status == 200, r.text
    assert r.json() == {"after": [800, 600], "before": [400, 300]}
    crops = {}
    for side in ("after", "before"):
        r = dash.get(f"/photo/{run}/crop/{side}.jpg?x=160&y=80&w=120&h=100")
        assert r.status == 200 and r.headers["Content-Type"] == "image/jpeg", r.text
        crops[side] = Image.open(io.BytesIO(r.body)).convert("RGB")
    assert crops["after"].size == crops["before"].size == (120, 100)
    # The spot (8 px at 100,60 in the original; 16 px at 200,120 in the result) at one place in both.
    red = crops["before"].getpixel((200 - 160 + 8, 120 - 80 + 8))
    cyan = crops["after"].getpixel((200 - 160 + 8, 120 - 80 + 8))
    assert red[0] > 200 and red[1] < 60 and cyan[0] < 60 and cyan[1] > 200, (red, cyan)


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ("", 400),
        ("x=0&y=0&w=10", 400),
        ("x=-1&y=0&w=10&h=10", 400),
        ("x=0&y=0&w=0&h=10", 400),
        ("x=0&y=0&w=4097&h=1", 400),
        ("x=0&y=0&w=4096&h=4096", 400),  # more than a screen's worth in all
        ("x=1e3&y=0&w=10&h=10", 400),
        ("x=0&y=0&w=10&h=10&x=5", 200),  # the first of each: what the page sends
        ("x=790&y=0&w=20&h=10", 400),  # past the result's right edge
        ("x=9999999&y=0&w=10&h=10", 400),
        ("x=0&y=0&w=800&h=600", 200),
    ],
)
def test_a_crop_region_the_page_never_asks_for_is_refused(dash: Dashboard, query: str, status: int) -> None:
    run = run_of(dash, "spot x2.jpg")["id"]
    r = dash.get(f"/photo/{run}/crop/after.jpg?{query}")
    assert r.status == status, (query, r.text)
    if status == 400:
        assert b"pixels" in r.body or b"region" in r.body.lower()


def test_crops_are_by_run_id_never_by_path(dash: Dashboard) -> None:
    run = run_of(dash, "spot x2.jpg")["id"]
    region = "?x=0&y=0&w=10&h=10"
    for path in (
        f"/photo/{run}/crop/../../etc/passwd",
        f"/photo/{run}/crop/..%2f..%2fetc%2fpasswd.jpg",
        f"/photo/{run}/crop/original.jpg{region}",
        f"/photo/{run}/crop/%2Fetc%2Fpasswd{region}",
        f"/photo/{run}%2F..%2F1/crop/after.jpg{region}",
        f"/photo/99999999/crop/after.jpg{region}",
        "/photo/99999999/real.json",
        f"/photo/{run}/real.json/../../../../etc/passwd",
    ):
        r = dash.get(path)
        assert r.status == 404, (path, r.status)
        assert b"root:" not in r.body
    failed = results(dash, "state=failed")
    if failed:  # a failure has no result to cut from
        assert dash.get(f"/photo/{failed[0]['id']}/crop/after.jpg{region}").status == 404
    assert dash.raw(
        "POST", f"/photo/{run}/crop/after.jpg{region}", {"Origin": f"http://{dash.host}"}
    ).status in (
        403,
        405,
    )


def test_crops_keep_the_dashboards_host_and_login_rules(dash: Dashboard) -> None:
    run = run_of(dash, "spot x2.jpg")["id"]
    for path in (f"/photo/{run}/crop/after.jpg?x=0&y=0&w=10&h=10", f"/photo/{run}/real.json"):
        assert dash.get(path, headers={"Host": "evil.example"}).status == 421
        assert dash.get(path, headers={"Host": f"localhost.evil.example:{dash.port}"}).status == 421
        assert dash.get(path, signed_in=False).status == 401
        assert dash.get(path, signed_in=False, headers={"Authorization": "Bearer nope"}).status == 403
        assert (
            dash.get(path, signed_in=False, headers={"Authorization": f"Bearer {dash.token}"}).status == 200
        )
        r = dash.get(path)
        assert r.headers["Content-Security-Policy"].startswith("default-src 'none'")
        assert r.headers["X-Content-Type-Options"] == "nosniff"


def test_a_crop_of_an_older_run_replaced_by_a_redo_is_not_served(dash: Dashboard, tmp_path: Path) -> None:
    first = run_of(dash, "portrait.jpg")
    r = dash.post(f"/api/redo/{first['id']}", JSON, json.dumps({"settings": {}}).encode())
    assert r.status == 200, r.text
    dash.wait(queue_empty, 30, "the redo")
    region = "?x=0&y=0&w=10&h=10"
    assert dash.get(f"/photo/{first['id']}/crop/after.jpg{region}").status == 404  # its result was replaced
    assert dash.get(f"/photo/{r.json()['id']}/crop/after.jpg{region}").status == 200
    # Compare runs says what each run was made with.
    compare = dash.get(f"/photo/{r.json()['id']}/compare/{first['id']}").text
    assert "first run, the inbox&#39;s settings" in compare and "Left: run" in compare


# --- real pixels of two runs (Compare runs) -------------------------------------------------------


def redo_beside(d: Dashboard, run: int, settings: dict[str, Any]) -> int:
    r = d.post(f"/api/redo/{run}", JSON, json.dumps({"settings": settings, "beside": True}).encode())
    assert r.status == 200, r.text
    d.wait(queue_empty, 30, "the redo beside")
    return int(r.json()["id"])


def test_compare_runs_cuts_the_same_spot_of_both_results_at_real_pixels(dash: Dashboard) -> None:
    write_atomic(dash.svc.inbox / "two runs.jpg", jpeg(400, 300, (20, 120, 70), spot=(100, 60)))
    wait_for(lambda: any(p["name"] == "two runs.jpg" for p in results(dash)), 30, "the photo restored")
    first = run_of(dash, "two runs.jpg")["id"]  # its result 400 x 300
    second = redo_beside(dash, first, {"restore.model": "GFPGAN-v1.4", "restore.upscale": 2})  # 800 x 600
    pair = f"/photo/{first}/compare/{second}"
    page = dash.get(pair).text
    assert f'data-real="{pair}/real.json"' in page and f'data-crop="{pair}/crop/"' in page
    assert 'data-zoom="real" title="real pixels (Z)">1:1</button>' in page
    r = dash.get(pair + "/real.json")
    assert r.status == 200 and r.json() == {"after": [800, 600], "before": [400, 300]}, r.text
    crops = {}
    for side in ("after", "before"):
        r = dash.get(f"{pair}/crop/{side}.jpg?x=160&y=80&w=120&h=100")
        assert r.status == 200 and r.headers["Content-Type"] == "image/jpeg", r.text
        crops[side] = Image.open(io.BytesIO(r.body)).convert("RGB")
    assert crops["after"].size == crops["before"].size == (120, 100)
    # The spot (8 px at 100,60 in the first result; 16 px at 200,120 in the second, upscaled) at
    # one place in both crops, each cut from its own run's result (colours turned: cyan).
    for side, im in crops.items():
        spot, ground = im.getpixel((48, 48)), im.getpixel((5, 5))
        assert spot[0] < 60 and spot[1] > 200 and spot[2] > 200, (side, spot)
        assert abs(ground[0] - 235) < 30 and abs(ground[1] - 135) < 30, (side, ground)
    for path in (pair + "/real.json", f"{pair}/crop/before.jpg?x=0&y=0&w=10&h=10"):
        assert dash.get(path, headers={"Host": "evil.example"}).status == 421
        assert dash.get(path, signed_in=False).status == 401
        assert dash.get(path, signed_in=False, headers={"Authorization": "Bearer nope"}).status == 403
        assert dash.get(path).headers["Content-Security-Policy"].startswith("default-src 'none'")
    # The other way round: the first run's result is the right half now.
    back = dash.get(f"/photo/{second}/compare/{first}/real.json").json()
    assert back == {"after": [400, 300], "before": [800, 600]}
    assert dash.get(f"/photo/{second}/compare/{first}/crop/after.jpg?x=390&y=0&w=20&h=10").status == 400
    # Kept one: the other's result leaves the outbox, and with it the 1:1 of the pair.
    r = dash.post(f"/api/keep/{second}", JSON, json.dumps({"other": first}).encode())
    assert r.status == 200, r.text
    assert dash.get(f"{pair}/crop/after.jpg?x=0&y=0&w=10&h=10").status == 200  # the kept one
    assert dash.get(f"{pair}/crop/before.jpg?x=0&y=0&w=10&h=10").status == 404
    page = dash.get(pair).text
    assert "data-real=" not in page and 'data-zoom="real" title="real pixels (Z)" hidden' in page
    assert f"run {first}'s is no longer in the outbox" in page


def test_compare_crops_are_by_two_runs_of_one_photo_only(dash: Dashboard) -> None:
    one, other = run_of(dash, "spot x2.jpg")["id"], run_of(dash, "wedding.jpg", "sort=oldest")["id"]
    region = "?x=0&y=0&w=10&h=10"
    for path in (
        f"/photo/{one}/compare/{other}/crop/after.jpg{region}",  # runs of two photos
        f"/photo/{one}/compare/{other}/real.json",
        f"/photo/{one}/compare/{one}/crop/after.jpg{region}",  # a run with itself
        f"/photo/{one}/compare/99999999/real.json",
        f"/photo/{one}/compare/{other}/crop/original.jpg{region}",
        f"/photo/{one}/compare/{other}/crop/..%2f..%2fetc%2fpasswd.jpg{region}",
        f"/photo/{one}/compare/{other}/real.json/../../../../etc/passwd",
    ):
        r = dash.get(path)
        assert r.status == 404, (path, r.status)
        assert b"root:" not in r.body
    assert dash.raw(
        "POST", f"/photo/{one}/compare/{other}/real.json", {"Origin": f"http://{dash.host}"}
    ).status in (
        403,
        404,
        405,
    )
