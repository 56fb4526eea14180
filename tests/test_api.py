"""The HTTP API against a real running service (the stand-in restorer): a photo sent goes through
the journal like a dropped one and comes back; the same Idempotency-Key gives the same photo;
tokens, scopes, limits, names, cut-off and slow uploads, CORS and the Host rule each get a clear
status and sentence, and none loses, doubles or overwrites a file. One service serves the module."""

from __future__ import annotations

import io
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from api_harness import (
    call,
    error_of,
    files,
    jobs,
    raw_socket,
    read_reply,
    revoke,
    send,
    token,
    upload_head,
    uploads_left,
    wait_final,
)
from dashboard_client import Dashboard, served_dashboard
from service_harness import queue_empty, write_atomic

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def dash(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    root = tmp_path_factory.mktemp("api")
    with served_dashboard(
        root, "--set", "api.upload_idle_s=2", "--set", 'api.cors_origins=["https://photos.example"]'
    ) as d:
        yield d


@pytest.fixture(scope="module")
def full(dash: Dashboard) -> str:
    return token(dash, "full")


@pytest.fixture
def paused(dash: Dashboard) -> Iterator[None]:
    """Photos wait in the inbox while the test runs."""
    assert dash.control("pause")["ok"]
    try:
        yield
    finally:
        dash.control("resume")


# --- a photo's way --------------------------------------------------------------------------------


def test_a_photo_sent_is_restored_and_its_result_and_report_come_back(dash: Dashboard, full: str) -> None:
    r = send(dash, full, "portrait.jpg", b"\xff\xd8 portrait bytes", **{"restore.strength": "0.4"})
    assert r.status == 201, r.text
    photo = r.json()
    assert r.headers["Location"] == f"/api/v1/photos/{photo['id']}"
    assert (photo["name"], photo["inbox"], photo["settings"]) == (
        "portrait.jpg",
        0,
        {"restore.strength": "0.4"},
    )
    done = wait_final(dash, full, photo["id"])
    assert done["state"] == "done" and done["result"]["name"] == "portrait.jpg"
    assert "strength=0.4" in done["notes"]  # the stand-in says the strength its worker was given
    result = call(dash, "GET", done["result"]["url"], full)
    assert result.status == 200 and result.body == b"\xff\xd8 portrait bytes"
    assert result.headers["Content-Type"] == "image/jpeg"
    report = call(dash, "GET", done["report"], full).json()
    assert report["faces"] == [
        {"index": 0, "box": [0, 0, 1, 1], "score": 0.9, "restored": True, "reason": None}
    ]
    assert report["used"]["restore.strength"] == 0.4
    events = call(dash, "GET", done["events"], full)
    assert events.status == 200 and events.text.startswith("event: photo\ndata: {")  # ends: it has ended
    assert uploads_left(dash) == []


def test_a_result_is_refused_with_its_reason_while_the_photo_waits(
    dash: Dashboard, full: str, paused: None
) -> None:
    photo = send(dash, full, "waiting.jpg", b"\xff\xd8 waits").json()
    r = call(dash, "GET", f"/api/v1/photos/{photo['id']}/result", full)
    assert r.status == 409 and "no result yet: it is queued" in error_of(r)


def test_the_same_idempotency_key_gives_the_same_photo(dash: Dashboard, full: str) -> None:
    before = len(jobs(dash))
    first = send(dash, full, "again.jpg", b"\xff\xd8 again", key="key-again")
    second = send(dash, full, "again.jpg", b"\xff\xd8 again", key="key-again")
    assert (first.status, second.status) == (201, 200)
    assert first.json()["id"] == second.json()["id"]
    assert len(jobs(dash)) == before + 1
    other = send(dash, full, "again.jpg", b"\xff\xd8 other bytes", key="key-again")
    assert other.status == 422 and "was used for another request" in error_of(other)
    assert len(jobs(dash)) == before + 1 and uploads_left(dash) == []


def test_the_same_key_from_two_clients_at_once_gives_one_photo(dash: Dashboard, full: str) -> None:
    before = len(jobs(dash))
    replies = []

    def one() -> None:
        replies.append(send(dash, full, "twice.jpg", b"\xff\xd8 " + b"t" * 300_000, key="key-twice"))

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.status for r in replies) == [200, 201]
    assert len({r.json()["id"] for r in replies}) == 1
    wait_final(dash, full, replies[0].json()["id"])
    assert len(jobs(dash)) == before + 1
    assert files(dash.svc.outbox).count("twice.jpg") == 1 and "twice (1).jpg" not in files(dash.svc.outbox)
    assert uploads_left(dash) == []


# --- tokens and scopes ----------------------------------------------------------------------------


def test_a_token_without_the_scope_is_refused_with_the_scope_named(dash: Dashboard, full: str) -> None:
    reader = token(dash, "reader", ("read",))
    r = send(dash, reader, "x.jpg", b"\xff\xd8 x")
    assert r.status == 403 and "lacks the 'submit' scope" in error_of(r)
    sender = token(dash, "sender", ("submit",))
    photo = send(dash, sender, "by-sender.jpg", b"\xff\xd8 s").json()
    r = call(dash, "GET", f"/api/v1/photos/{photo['id']}", sender)
    assert r.status == 403 and "lacks the 'read' scope" in error_of(r)


def test_a_token_sees_only_its_own_photos(dash: Dashboard, full: str) -> None:
    mine = send(dash, full, "mine.jpg", b"\xff\xd8 mine").json()
    other = token(dash, "other")
    r = call(dash, "GET", f"/api/v1/photos/{mine['id']}", other)
    assert r.status == 404 and "was sent with this token" in error_of(r)
    assert call(dash, "GET", f"/api/v1/photos/{mine['id']}", dash.token).status == 200  # the owner's


@pytest.mark.parametrize("bearer", ["nonsense", "gwt_00000000_" + "A" * 43, ""])
def test_an_unknown_token_is_refused(dash: Dashboard, bearer: str) -> None:
    r = call(dash, "GET", "/api/v1/", bearer or None)
    assert r.status == 401 and "token" in error_of(r).lower()


def test_a_revoked_token_is_refused_at_once(dash: Dashboard) -> None:
    t = token(dash, "soon-gone")
    assert call(dash, "GET", "/api/v1/", t).status == 200
    revoke(dash, "soon-gone")
    r = call(dash, "GET", "/api/v1/", t)
    assert r.status == 401 and "unknown or revoked" in error_of(r)


def test_a_token_revoked_mid_upload_keeps_nothing(dash: Dashboard) -> None:
    t = token(dash, "mid-upload")
    before = len(jobs(dash))
    s = raw_socket(dash, upload_head(dash, t, "half.jpg", 200_000))
    try:
        s.sendall(b"\xff\xd8" + b"h" * 99_998)
        deadline = time.monotonic() + 10
        while not uploads_left(dash) and time.monotonic() < deadline:
            time.sleep(0.02)
        revoke(dash, "mid-upload")
        s.sendall(b"h" * 100_000)
        status, body = read_reply(s)
    finally:
        s.close()
    assert status == 403 and "was revoked while the photo was sent; nothing was kept" in body
    assert len(jobs(dash)) == before and uploads_left(dash) == []
    assert not (dash.svc.inbox / "half.jpg").exists()


def test_the_requests_a_minute_of_a_token_are_answered_429_with_when_to_try(dash: Dashboard) -> None:
    t = token(dash, "chatty", requests_per_minute=3)
    assert [call(dash, "GET", "/api/v1/", t).status for _ in range(3)] == [200, 200, 200]
    r = call(dash, "GET", "/api/v1/", t)
    assert r.status == 429 and "api.requests_per_minute" in error_of(r)
    assert 1 <= int(r.headers["Retry-After"]) <= 60


def test_the_bytes_a_day_of_a_token_are_answered_429(dash: Dashboard) -> None:
    t = token(dash, "daily", mb_per_day=1)
    assert send(dash, t, "day1.jpg", b"\xff\xd8" + b"d" * 600_000).status == 201
    r = send(dash, t, "day2.jpg", b"\xff\xd8" + b"e" * 600_000)
    assert r.status == 429 and "a day" in error_of(r)
    assert not (dash.svc.inbox / "day2.jpg").exists() and uploads_left(dash) == []


# --- bodies ---------------------------------------------------------------------------------------


def test_an_empty_photo_is_refused(dash: Dashboard, full: str) -> None:
    r = send(dash, full, "empty.jpg", b"")
    assert r.status == 400 and "empty (0 bytes)" in error_of(r)
    r = call(dash, "POST", "/api/v1/photos?name=none.jpg", full)  # no body at all
    assert r.status == 400
    assert uploads_left(dash) == []


def test_a_photo_over_the_tokens_largest_is_413_said_before_or_while_it_comes(dash: Dashboard) -> None:
    t = token(dash, "small", max_file_mb=1)
    r = send(dash, t, "big.jpg", b"\xff\xd8" + b"b" * 1_200_000)
    assert r.status == 413 and "largest taken is 1 MB" in error_of(r)
    # Without a length (chunked), it is counted as it arrives and cut off there.
    s = raw_socket(
        dash,
        f"POST /api/v1/photos?name=chunked.jpg HTTP/1.1\r\nHost: {dash.host}\r\nAuthorization: Bearer {t}\r\n"
        "Transfer-Encoding: chunked\r\n\r\n",
    )
    try:
        piece = b"c" * 65536
        for _ in range(20):
            try:
                s.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            except (BrokenPipeError, ConnectionResetError):
                break
        status, body = read_reply(s)
    finally:
        s.close()
    assert status == 413 and "larger than 1 MB" in body
    assert uploads_left(dash) == [] and not (dash.svc.inbox / "chunked.jpg").exists()


def test_an_upload_cut_off_half_way_leaves_nothing(dash: Dashboard, full: str) -> None:
    before = len(jobs(dash))
    s = raw_socket(dash, upload_head(dash, full, "cut.jpg", 500_000))
    s.sendall(b"\xff\xd8" + b"c" * 200_000)
    time.sleep(0.2)
    s.close()
    deadline = time.monotonic() + 10
    while uploads_left(dash) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert uploads_left(dash) == [] and len(jobs(dash)) == before
    assert not (dash.svc.inbox / "cut.jpg").exists()
    # Sent again whole, it is taken.
    assert send(dash, full, "cut.jpg", b"\xff\xd8" + b"c" * 200_000).status == 201


def test_an_upload_that_stops_is_cut_off_after_the_idle_time(dash: Dashboard, full: str) -> None:
    s = raw_socket(dash, upload_head(dash, full, "stalls.jpg", 1000))
    try:
        s.sendall(b"\xff\xd8 first bytes")
        started = time.monotonic()
        status, body = read_reply(s)
        took = time.monotonic() - started
    finally:
        s.close()
    assert status == 408 and "nothing arrived for 2 s (api.upload_idle_s)" in body
    assert took < 15
    assert uploads_left(dash) == []


# --- names ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("../escape.jpg", "leads out of the inbox"),
        ("sub/../../escape.jpg", "leads out of the inbox"),
        ("/etc/escape.jpg", "leads out of the inbox"),
        ("..\\escape.jpg", "leads out of the inbox"),
        ("nul\x00.jpg", "control character (NUL)"),
        ("line\nbreak.jpg", "control character"),
        ("photo.jpg.part", "partial or temporary file"),
        ("~lock.jpg", "hidden or temporary name"),
        ("report.pdf", "not a photo"),
        ("", "empty"),
        ("x" * 5000 + ".jpg", "at most 4096"),
    ],
)
def test_a_name_that_cannot_be_a_photo_in_the_inbox_is_refused_with_why(
    dash: Dashboard, full: str, name: str, words: str
) -> None:
    before = files(dash.svc.inbox.parent)
    r = send(dash, full, name, b"\xff\xd8 named")
    assert r.status in (400, 415), r.text
    assert words in error_of(r)
    assert files(dash.svc.inbox.parent) == before


def test_a_4000_character_name_is_shortened_and_said(dash: Dashboard, full: str) -> None:
    r = send(dash, full, "long" * 1000 + ".jpg", b"\xff\xd8 long")
    assert r.status == 201, r.text
    photo = r.json()
    assert photo["name"].endswith(".jpg") and len(photo["name"].encode()) <= 200
    assert "saved as" in photo["note"]


def test_a_reserved_windows_name_is_kept_where_this_system_allows_it(dash: Dashboard, full: str) -> None:
    r = send(dash, full, "CON.jpg", b"\xff\xd8 con")
    assert r.status == 201, r.text
    assert r.json()["name"] == "CON.jpg"  # Linux stores it as given; Windows would get "_CON.jpg"


def test_the_name_of_a_file_already_waiting_gets_a_name_of_its_own(
    dash: Dashboard, full: str, paused: None
) -> None:
    write_atomic(dash.svc.inbox / "waiting-here.jpg", b"\xff\xd8 dropped first")
    dash.wait(lambda s: s["queue"]["queued"] >= 1, 20, "the drop recorded")
    r = send(dash, full, "waiting-here.jpg", b"\xff\xd8 sent second")
    assert r.status == 201, r.text
    assert r.json()["name"] == "waiting-here (1).jpg"
    assert "was taken in the inbox" in r.json()["note"]
    assert (dash.svc.inbox / "waiting-here.jpg").read_bytes() == b"\xff\xd8 dropped first"
    assert (dash.svc.inbox / "waiting-here (1).jpg").read_bytes() == b"\xff\xd8 sent second"


def test_subfolders_are_made_inside_the_inbox(dash: Dashboard, full: str) -> None:
    r = send(dash, full, "trip/day 1/IMG_1.jpg", b"\xff\xd8 trip")
    assert r.status == 201, r.text
    done = wait_final(dash, full, r.json()["id"])
    assert done["name"] == "trip/day 1/IMG_1.jpg" and done["state"] == "done"
    assert "trip/day 1/IMG_1.jpg" in files(dash.svc.outbox)


def test_settings_are_checked_as_set_checks_them(dash: Dashboard, full: str) -> None:
    r = send(dash, full, "s.jpg", b"\xff\xd8 s", **{"restore.strength": "7"})
    assert r.status == 400 and "restore.strength: must be between 0" in error_of(r)
    r = send(dash, full, "s.jpg", b"\xff\xd8 s", **{"restore.model": "/etc/passwd.pth"})
    assert r.status == 400 and "not a model gpen-watch knows" in error_of(r)
    r = send(dash, full, "s.jpg", b"\xff\xd8 s", **{"restore.detector": "x"})
    assert r.status == 400 and "not taken" in error_of(r)
    assert not (dash.svc.inbox / "s.jpg").exists()


# --- cancel, batches ------------------------------------------------------------------------------


def test_a_queued_photo_is_cancelled_and_leaves_the_inbox(dash: Dashboard, full: str, paused: None) -> None:
    photo = send(dash, full, "cancel-me.jpg", b"\xff\xd8 cancel").json()
    assert (dash.svc.inbox / "cancel-me.jpg").exists()
    r = call(dash, "POST", f"/api/v1/photos/{photo['id']}/cancel", full)
    assert r.status == 200 and r.json()["state"] == "gone" and r.json()["final"]
    assert not (dash.svc.inbox / "cancel-me.jpg").exists()
    again = call(dash, "POST", f"/api/v1/photos/{photo['id']}/cancel", full)
    assert again.status == 409 and "cannot be cancelled: it has ended (gone)" in error_of(again)


def test_a_batch_is_listed_followed_and_zipped(dash: Dashboard, full: str) -> None:
    ids = [
        send(dash, full, f"b{i}.jpg", b"\xff\xd8 batch %d" % i, batch="holiday").json()["id"]
        for i in range(3)
    ]
    events = call(dash, "GET", "/api/v1/batches/holiday/events", full)  # ends once none waits
    assert events.status == 200 and '"final": true' in events.text
    batch = call(dash, "GET", "/api/v1/batches/holiday", full).json()
    assert [p["id"] for p in batch["photos"]] == ids and batch["final"] and batch["counts"] == {"done": 3}
    z = call(dash, "GET", "/api/v1/batches/holiday/results.zip", full)
    assert z.status == 200 and z.headers["Content-Type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(z.body)) as zf:
        assert sorted(zf.namelist()) == ["b0.jpg", "b1.jpg", "b2.jpg"]
        assert zf.read("b1.jpg") == b"\xff\xd8 batch 1"
    picked = call(
        dash,
        "POST",
        "/api/v1/results.zip",
        full,
        b'{"ids": [%d, %d]}' % (ids[0], ids[2]),
        {"Content-Type": "application/json"},
    )
    with zipfile.ZipFile(io.BytesIO(picked.body)) as zf:
        assert sorted(zf.namelist()) == ["b0.jpg", "b2.jpg"]
    assert call(dash, "GET", "/api/v1/batches/holiday", token(dash, "stranger")).status == 404


# --- web pages, hosts ------------------------------------------------------------------------------


def test_another_web_page_is_refused_unless_its_origin_is_configured(dash: Dashboard, full: str) -> None:
    r = call(dash, "GET", "/api/v1/", full, headers={"Origin": "https://evil.example"})
    assert r.status == 403 and "other web pages" in error_of(r)
    assert "Access-Control-Allow-Origin" not in r.headers
    pre = call(
        dash,
        "OPTIONS",
        "/api/v1/photos",
        None,
        headers={"Origin": "https://photos.example", "Access-Control-Request-Method": "POST"},
    )
    assert pre.status == 204 and pre.headers["Access-Control-Allow-Origin"] == "https://photos.example"
    ok = call(dash, "GET", "/api/v1/", full, headers={"Origin": "https://photos.example"})
    assert ok.status == 200 and ok.headers["Access-Control-Allow-Origin"] == "https://photos.example"


def test_the_host_rule_holds_for_the_api(dash: Dashboard, full: str) -> None:
    r = call(dash, "GET", "/api/v1/", full, headers={"Host": f"evil.example:{dash.port}"})
    assert r.status == 421 and "own address" in error_of(r)


def test_the_dashboards_page_may_send_with_its_cookie_but_only_from_itself(dash: Dashboard) -> None:
    r = dash.raw("POST", "/api/v1/photos?name=page.jpg", {}, b"\xff\xd8 page")
    assert r.status == 403 and "dashboard's own page" in error_of(r)
    r = dash.post("/api/v1/photos?name=page.jpg", body=b"\xff\xd8 page")
    assert r.status == 201, r.text


def test_the_openapi_document_describes_every_address(dash: Dashboard) -> None:
    doc = call(dash, "GET", "/api/v1/openapi.json", None).json()
    assert doc["openapi"] == "3.1.0"
    assert {
        "/api/v1/",
        "/api/v1/photos",
        "/api/v1/photos/{id}",
        "/api/v1/photos/{id}/events",
        "/api/v1/photos/{id}/result",
        "/api/v1/photos/{id}/report",
        "/api/v1/photos/{id}/cancel",
        "/api/v1/batches/{batch}",
        "/api/v1/batches/{batch}/events",
        "/api/v1/batches/{batch}/results.zip",
        "/api/v1/results.zip",
    } <= set(doc["paths"])


def test_nothing_was_lost_doubled_or_left_half_written(dash: Dashboard, full: str) -> None:
    dash.wait(queue_empty, 30, "the queue empty")
    assert uploads_left(dash) == []
    assert not [p for p in Path(dash.svc.outbox).rglob(".*") if p.is_file()]
