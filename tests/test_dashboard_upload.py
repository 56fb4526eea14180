"""The dashboard's uploads and downloads against a real running service: the page sends a photo with
its session cookie into a batch, which Results filters by; Results' zips hold exactly the results
asked for, streamed with the page's security headers; and each rule tried with hostile requests (a
foreign Origin, no cookie, a wrong Host, names that lead out of the inbox, an upload cut off half
way, hostile zip queries), none of which leaves a file behind. One service serves the module."""

from __future__ import annotations

import io
import json
import socket
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from api_harness import error_of, files, jobs, uploads_left
from dashboard_client import Dashboard, Reply, served_dashboard

from gpen_watch.dashboard import access
from gpen_watch.dashboard.review_query import parse
from gpen_watch.journal.browse import JournalBrowser
from gpen_watch.journal.journal import Journal
from gpen_watch.journal.review import ReviewFilter
from gpen_watch.journal.submissions import Submission

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def dash(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    with served_dashboard(tmp_path_factory.mktemp("upload"), "--set", "api.upload_idle_s=2") as d:
        yield d


def page_send(d: Dashboard, name: str, data: bytes, batch: str, **extra: str) -> Reply:
    """A photo as the dashboard's page sends it: its cookie, its Origin and its header."""
    q = urlencode({"name": name, "batch": batch, **extra})
    return d.post(f"/api/v1/photos?{q}", {"X-GPEN-Watch": "1"}, data)


def wait_done(d: Dashboard, photo_id: int, timeout: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        photo = d.get(f"/api/v1/photos/{photo_id}").json()
        if photo["final"]:
            return dict(photo)
        time.sleep(0.1)
    raise AssertionError(f"photo {photo_id} was not restored")


def zip_names(r: Reply) -> dict[str, bytes]:
    assert r.status == 200, r.text
    with zipfile.ZipFile(io.BytesIO(r.body)) as z:
        return {n: z.read(n) for n in z.namelist()}


def nothing_kept(d: Dashboard, before: list[str]) -> None:
    """No temp file, no photo: the inbox's tree (and what is beside it) as it was."""
    deadline = time.monotonic() + 10
    while uploads_left(d) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert uploads_left(d) == []
    assert files(d.svc.inbox.parent) == before


@pytest.fixture(scope="module")
def sent(dash: Dashboard) -> dict[str, int]:
    """Three photos sent by the page in one batch (one in a subfolder), restored."""
    ids = {}
    for name in ("first.jpg", "second.jpg", "trip/day 1/third.jpg"):
        r = page_send(dash, name, b"\xff\xd8 " + name.encode(), "upload-20261206-120000-abcd")
        assert r.status == 201, r.text
        ids[name] = r.json()["id"]
    for photo_id in ids.values():
        assert wait_done(dash, photo_id)["state"] == "done"
    return ids


# --- sending with the page's sign-in --------------------------------------------------------------


def test_the_page_sends_into_a_batch_that_results_shows_alone(dash: Dashboard, sent: dict[str, int]) -> None:
    r = page_send(dash, "elsewhere.jpg", b"\xff\xd8 another batch", "upload-other")
    assert r.status == 201, r.text
    wait_done(dash, r.json()["id"])
    listed = dash.get("/api/results?batch=upload-20261206-120000-abcd").json()["photos"]
    assert sorted(p["id"] for p in listed) == sorted(sent.values())
    page = dash.get("/results?batch=upload-20261206-120000-abcd").text
    assert "Sent together" in page and 'name="batch" value="upload-20261206-120000-abcd"' in page
    assert "3 photos match" in page
    assert "/results.zip?batch=upload-20261206-120000-abcd" in page  # this view's zip


def test_a_redo_of_a_sent_photo_stays_in_its_batch(dash: Dashboard, sent: dict[str, int]) -> None:
    r = dash.post(
        f"/api/redo/{sent['second.jpg']}",
        {"Content-Type": "application/json"},
        json.dumps({"settings": {"restore.strength": 0.4}}).encode(),
    )
    assert r.status == 200, r.text
    redo = r.json()["id"]
    deadline = time.monotonic() + 30
    while dash.get(f"/api/photo/{redo}").json()["photo"]["state"] != "done":
        assert time.monotonic() < deadline, "the redo did not end"
        time.sleep(0.1)
    listed = dash.get("/api/results?batch=upload-20261206-120000-abcd").json()["photos"]
    assert sorted(p["id"] for p in listed) == sorted([sent["first.jpg"], redo, sent["trip/day 1/third.jpg"]])


def test_a_batch_name_the_api_would_not_take_is_left_out_of_the_view(dash: Dashboard) -> None:
    page = dash.get("/results?batch=" + quote("../x y")).text
    assert "Left out of this view" in page and "batch=../x y" in page


@pytest.mark.parametrize(
    ("headers", "signed_in", "status", "words"),
    [
        ({"Origin": "http://evil.example"}, True, 403, "other web pages"),
        ({"Origin": "null"}, True, 403, "other web pages"),
        ({"Origin": "http://127.0.0.1:1"}, True, 403, "other web pages"),  # another port: another site
        ({}, True, 403, "dashboard's own page"),  # the cookie, but neither an Origin nor the header
        ({"X-GPEN-Watch": "1"}, False, 401, "Authorization"),  # the header, but no cookie
        ({"X-GPEN-Watch": "1", "Cookie": f"{access.COOKIE}=1.{'0' * 64}"}, False, 401, "Authorization"),
    ],
)
def test_an_upload_not_from_the_signed_in_page_is_refused_and_keeps_nothing(
    dash: Dashboard, headers: dict[str, str], signed_in: bool, status: int, words: str
) -> None:
    before = files(dash.svc.inbox.parent)
    r = dash.raw("POST", "/api/v1/photos?name=hostile.jpg", headers, b"\xff\xd8 hostile", signed_in=signed_in)
    assert r.status == status, r.text
    assert words in error_of(r)
    nothing_kept(dash, before)


@pytest.mark.parametrize("host", ["evil.example:{port}", "127.0.0.1", "localhost.evil.example:{port}"])
def test_an_upload_for_a_foreign_host_is_refused(dash: Dashboard, host: str) -> None:
    before = files(dash.svc.inbox.parent)
    h = host.format(port=dash.port)
    r = dash.raw(
        "POST", "/api/v1/photos?name=rebound.jpg", {"Host": h, "Origin": f"http://{h}"}, b"\xff\xd8 rebound"
    )
    assert r.status == 421 and "own address" in error_of(r)
    nothing_kept(dash, before)


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("../escape.jpg", "leads out of the inbox"),
        ("trip/../../escape.jpg", "leads out of the inbox"),
        ("/etc/escape.jpg", "leads out of the inbox"),
        ("C:\\Users\\escape.jpg", "leads out of the inbox"),
        ("\\\\server\\share\\escape.jpg", "leads out of the inbox"),
        ("a\x00b.jpg", "control character (NUL)"),
        (".hidden/a.jpg", "hidden or temporary name"),
        ("trip/.DS_Store", "hidden or temporary name"),
        ("trip/._IMG_1.jpg", "hidden or temporary name"),
        ("Thumbs.db", "system file"),
        ("notes.txt", "not a photo"),
    ],
)
def test_a_dropped_name_that_leads_out_or_is_never_a_photo_is_refused(
    dash: Dashboard, name: str, words: str
) -> None:
    before = files(dash.svc.inbox.parent)
    r = page_send(dash, name, b"\xff\xd8 named", "upload-hostile")
    assert r.status in (400, 415), r.text
    assert words in error_of(r)
    nothing_kept(dash, before)


def test_an_upload_cut_off_half_way_keeps_nothing_and_goes_again(dash: Dashboard) -> None:
    body = b"\xff\xd8" + b"h" * 300_000
    before, jobs_before = files(dash.svc.inbox.parent), len(jobs(dash))
    q = urlencode({"name": "halfway.jpg", "batch": "upload-cut"})
    s = socket.create_connection(("127.0.0.1", dash.port), timeout=30)
    s.sendall(
        (
            f"POST /api/v1/photos?{q} HTTP/1.1\r\nHost: {dash.host}\r\nOrigin: http://{dash.host}\r\n"
            f"Cookie: {access.COOKIE}={dash.session()}\r\nX-GPEN-Watch: 1\r\n"
            f"Content-Type: application/octet-stream\r\nContent-Length: {len(body)}\r\n"
            "Idempotency-Key: upload-cut-0\r\n\r\n"
        ).encode()
        + body[:120_000]
    )
    deadline = time.monotonic() + 10
    while not uploads_left(dash):  # the temp file is there while it comes...
        assert time.monotonic() < deadline, "the upload never began"
        time.sleep(0.02)
    s.close()  # ...and the browser's tab closed half-way
    nothing_kept(dash, before)
    assert len(jobs(dash)) == jobs_before
    # Sent again, under the same key, it is taken once and restored.
    r = dash.post(f"/api/v1/photos?{q}", {"X-GPEN-Watch": "1", "Idempotency-Key": "upload-cut-0"}, body)
    assert r.status == 201, r.text
    assert wait_done(dash, r.json()["id"])["state"] == "done"
    assert (dash.svc.outbox / "halfway.jpg").read_bytes() == body


# --- downloads ------------------------------------------------------------------------------------


def test_a_zip_of_ticked_photos_holds_exactly_their_results(dash: Dashboard, sent: dict[str, int]) -> None:
    ids = [sent["first.jpg"], sent["trip/day 1/third.jpg"]]
    r = dash.get("/results.zip?ids=" + ",".join(map(str, ids)))
    assert r.headers["Content-Type"] == "application/zip"
    assert 'filename="results.zip"' in r.headers["Content-Disposition"]
    assert zip_names(r) == {
        "first.jpg": b"\xff\xd8 first.jpg",
        "trip/day 1/third.jpg": b"\xff\xd8 trip/day 1/third.jpg",
    }
    # Streamed, and still under the page's rules: never framed, sniffed or read by another site.
    assert "Content-Length" not in r.headers
    assert r.headers["Cross-Origin-Resource-Policy"] == "same-origin"
    assert r.headers["X-Frame-Options"] == "DENY" and r.headers["X-Content-Type-Options"] == "nosniff"


def test_a_zip_of_a_view_holds_its_results_under_its_batch_name(
    dash: Dashboard, sent: dict[str, int]
) -> None:
    r = dash.get("/results.zip?batch=upload-20261206-120000-abcd")
    assert 'filename="upload-20261206-120000-abcd.zip"' in r.headers["Content-Disposition"]
    assert set(zip_names(r)) == {"first.jpg", "second.jpg", "trip/day 1/third.jpg"}
    r = dash.get("/results.zip?q=third")
    assert set(zip_names(r)) == {"trip/day 1/third.jpg"}


def test_one_result_downloads_from_its_photo(dash: Dashboard, sent: dict[str, int]) -> None:
    r = dash.get(f"/photo/{sent['first.jpg']}/download/result")
    assert r.status == 200 and r.body == b"\xff\xd8 first.jpg"
    assert r.headers["Cross-Origin-Resource-Policy"] == "same-origin"


@pytest.mark.parametrize(
    ("query", "status", "words"),
    [
        ("ids=../../etc/passwd", 400, "photo ids separated by commas"),
        ("ids=1;2", 400, "photo ids separated by commas"),
        ("ids=" + ",".join(str(i) for i in range(1, 1100)), 400, "at most 1000"),
        ("ids=999999", 404, "nothing to zip"),
        ("batch=../x", 400, "Not a view this dashboard writes"),
        ("state=sideways", 400, "Not a view this dashboard writes"),
        ("q=no-such-photo-anywhere", 404, "nothing to zip"),
    ],
)
def test_a_zip_query_not_of_ours_is_refused_with_a_sentence(
    dash: Dashboard, sent: dict[str, int], query: str, status: int, words: str
) -> None:
    r = dash.get("/results.zip?" + query)
    assert r.status == status, r.text
    assert words in r.text and r.headers["Content-Type"].startswith("text/plain")


def test_a_zip_needs_the_sign_in_and_this_host(dash: Dashboard, sent: dict[str, int]) -> None:
    path = f"/results.zip?ids={sent['first.jpg']}"
    assert dash.get(path, signed_in=False).status == 401
    assert dash.get(path, headers={"Host": f"evil.example:{dash.port}"}).status == 421


# --- the view and the journal ---------------------------------------------------------------------


def test_the_batch_filter_in_the_journal(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    with Journal.open(tmp_path / "j.sqlite3") as j:

        def add(name: str, batch: str | None) -> int:
            sub = Submission("dashboard", batch, None, name, inbox / f".{name}.part") if batch else None
            job = j.add(inbox / name, inbox, name, 3, 1.0, name.ljust(64, "0")[:64], submission=sub).job
            j.claim_batch(1, "w")
            j.finish(job.id, tmp_path / "out" / name, 1, {}, [])
            return job.id

        a, b = add("a.jpg", "upload-1"), add("b.jpg", "upload-2")
        dropped = add("c.jpg", None)
        browser = JournalBrowser.open(tmp_path / "j.sqlite3")
        try:
            assert browser.review_ids(ReviewFilter(batch="upload-1")) == [a]
            assert browser.review_ids(ReviewFilter(batch="upload-3")) == []
            assert set(browser.review_ids(ReviewFilter())) == {a, b, dropped}
        finally:
            browser.close()


def test_the_batch_is_part_of_a_views_url() -> None:
    view = parse({"batch": "upload-20261206-120000-abcd", "q": "x"}, [])
    assert view.filter.batch == "upload-20261206-120000-abcd"
    assert view.query() == "?q=x&batch=upload-20261206-120000-abcd"
    assert view.query(batch=None) == "?q=x"
    assert parse({"batch": "a/b"}, []).ignored == ["batch=a/b"]
