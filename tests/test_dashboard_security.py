"""The dashboard's rules, each tried with hostile requests against a real running service:
Host (DNS rebinding), login token and session cookie, same-origin changes, ids never paths, and
bodies it will not take. One service serves the whole module (about 3 s to start)."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest
from conftest import module_command
from dashboard_client import Dashboard, served_dashboard
from service_harness import write_atomic

from gpen_watch.dashboard import access

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def dash(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    root = tmp_path_factory.mktemp("dashboard")
    with served_dashboard(root) as d:
        write_atomic(d.svc.inbox / "portrait.jpg", b"\xff\xd8 not really a jpeg, the stand-in takes it")
        d.wait(lambda s: s["queue"]["done"] >= 1, 30, "one photo done")
        yield d


# --- Host -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host",
    ["evil.example", "evil.example:{port}", "127.0.0.1", "127.0.0.1:1", "localhost.evil.example:{port}", ""],
)
def test_a_foreign_host_is_refused_even_with_a_valid_session(dash: Dashboard, host: str) -> None:
    r = dash.get("/api/status", headers={"Host": host.format(port=dash.port)})
    assert r.status == 421, r.text
    assert b"queue" not in r.body


def test_the_loopback_names_are_accepted(dash: Dashboard) -> None:
    for host in (f"127.0.0.1:{dash.port}", f"localhost:{dash.port}", f"LOCALHOST:{dash.port}"):
        assert dash.get("/api/status", headers={"Host": host}).status == 200, host


def test_a_request_without_a_host_header_is_refused(dash: Dashboard) -> None:
    r = dash.raw("GET", "/api/status", headers={"Host": ""})
    assert r.status in (400, 421)


# --- login ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/activity",
        "/results",
        "/failed",
        "/photo/1",
        "/api/status",
        "/live/overview",
        "/photo/1/thumb.jpg",
        "/static/app.js",
    ],
)
def test_every_url_needs_a_login(dash: Dashboard, path: str) -> None:
    r = dash.get(path, signed_in=False)
    assert r.status == 401
    assert module_command("dashboard").encode() in r.body  # says how to sign in


def test_the_token_in_the_url_becomes_a_strict_httponly_cookie_and_leaves_the_url(dash: Dashboard) -> None:
    r = dash.get(f"/results?token={dash.token}&before=1.5:3", signed_in=False)
    assert r.status == 303
    target = urlsplit(r.headers["Location"])
    assert (target.path, parse_qs(target.query)) == ("/results", {"before": ["1.5:3"]})
    cookie = r.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert dash.token not in cookie  # the cookie is a signed session, not the token itself
    assert r.headers["Referrer-Policy"] == "same-origin"  # never to another site


@pytest.mark.parametrize("token", ["0" * 64, "nope", "", "%00", "a" * 5000])
def test_a_wrong_token_is_refused(dash: Dashboard, token: str) -> None:
    r = dash.get(f"/?token={token}", signed_in=False)
    assert r.status in (403, 400)
    assert "Set-Cookie" not in r.headers


def test_a_token_in_a_post_url_does_not_sign_in(dash: Dashboard) -> None:
    r = dash.raw(
        "POST", f"/api/pause?token={dash.token}", signed_in=False, headers={"Origin": f"http://{dash.host}"}
    )
    assert r.status == 403
    assert dash.status()["paused"] is False


def test_forged_and_expired_sessions_are_refused(dash: Dashboard) -> None:
    now = time.time()
    forged = [
        "garbage",
        f"{int(now)}.{'0' * 64}",  # the right shape, a wrong signature
        access.make_session("f" * 64, now),  # signed with another token
        access.make_session(dash.token, now - access.SESSION_S - 10),  # expired
        access.make_session(dash.token, now + 3600),  # from the future
    ]
    for cookie in forged:
        r = dash.get("/api/status", signed_in=False, headers={"Cookie": f"{access.COOKIE}={cookie}"})
        assert r.status == 401, cookie
    fresh = access.make_session(dash.token, now - 60)
    assert (
        dash.get("/api/status", signed_in=False, headers={"Cookie": f"{access.COOKIE}={fresh}"}).status == 200
    )


def test_scripts_may_send_the_token_as_a_bearer(dash: Dashboard) -> None:
    ok = dash.get("/api/status", signed_in=False, headers={"Authorization": f"Bearer {dash.token}"})
    assert ok.status == 200 and ok.json()["ok"] is True
    bad = dash.get("/api/status", signed_in=False, headers={"Authorization": "Bearer " + "0" * 64})
    assert bad.status == 403


def test_the_token_file_is_private_to_the_user(dash: Dashboard) -> None:
    path = dash.home / "state" / "gpen-watch" / access.TOKEN_NAME
    assert path.read_text().strip() == dash.token
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert (
            stat.S_IMODE(path.parent.stat().st_mode) & 0o077 == 0 or path.parent.stat().st_uid == os.getuid()
        )


# --- changes only from the page itself ------------------------------------------------------------


def test_a_cross_site_post_is_refused(dash: Dashboard) -> None:
    for headers in (
        {"Origin": "http://evil.example"},
        {"Origin": "null"},
        {"Origin": f"http://localhost:{dash.port + 1}"},
        {"Origin": f"https://{dash.host}"},
        {},  # no Origin and no CSRF header: a form from somewhere else, or an old browser
        {"Sec-Fetch-Site": "cross-site", access.CSRF_HEADER: "1"},
    ):
        r = dash.raw("POST", "/api/pause", headers)
        assert r.status == 403, headers
    assert dash.status()["paused"] is False


def test_pause_and_resume_from_the_page_are_the_services_own_commands(dash: Dashboard) -> None:
    try:
        r = dash.post("/api/pause")
        assert r.status == 200 and r.json()["ok"] is True
        assert dash.status()["paused"] is True
        assert "Resume" in dash.get("/").text
    finally:
        r = dash.raw("POST", "/api/resume", {access.CSRF_HEADER: "1"})  # a script without Origin
    assert r.status == 200
    assert dash.status()["paused"] is False


@pytest.mark.parametrize(
    ("referer", "back"),
    [
        ("{url}photo/1?q=beta&sort=name", "/photo/1?q=beta&sort=name"),  # the page, in its view
        ("http://evil.example/failed", "/failed"),  # the path only: never another site
        ("http://{host}//evil.example/x", "/"),
        ("http://{host}/\\evil.example/x", "/"),  # "/\\" is "//" to a browser
        ("javascript:alert(1)", "/"),
        ("", "/"),
    ],
)
def test_a_plain_form_goes_back_only_to_a_page_of_ours(dash: Dashboard, referer: str, back: str) -> None:
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    try:
        r = dash.post("/api/pause", {**headers, "Referer": referer.format(url=dash.url, host=dash.host)}, b"")
        assert r.status == 303 and r.headers["Location"] == back
    finally:
        dash.post("/api/resume")


def test_oversized_and_garbage_bodies_are_refused(dash: Dashboard) -> None:
    big = dash.post("/api/pause", {"Content-Type": "application/json"}, b"[" * (2 << 20))
    assert big.status == 413
    garbage = dash.post("/api/pause", {"Content-Type": "application/json"}, b"\x00\xff{not json")
    assert garbage.status == 400
    assert dash.status()["paused"] is False
    assert dash.raw("PUT", "/api/pause", {"Origin": f"http://{dash.host}"}).status == 405


# --- ids, never paths -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/photo/../../../../etc/passwd",
        "/photo/%2e%2e/%2e%2e/etc/passwd",
        "/photo/1/..%2f..%2f..%2fetc%2fpasswd",
        "/photo/1/%2e%2e%2fthumb.jpg",
        "/photo/1/faces/..%2F..%2Fjournal.sqlite3/before.jpg",
        "/photo/1/faces/0/..%2f..%2f..%2fdashboard.token",
        "/photo/1/faces/-1/before.jpg",
        "/photo//etc/passwd",
        "/photo/%2fetc%2fpasswd",
        "/photo/1/thumb.jpg/../../../dashboard.token",
        "/photo/99999999999999999999999/thumb.jpg",
        "/photo/1%00/thumb.jpg",
        "/static/../access.py",
        "/static/..%2f..%2fdashboard%2faccess.py",
        "/static/%2e%2e%2f%2e%2e%2fpyproject.toml",
        "/static//etc/passwd",
        "/static/",
        "/static",
        "//etc/passwd",
        "/etc/passwd",
        "/api/photo/1/../../../etc/passwd",
        "/activity?before=/etc/passwd",
        "/failed?before=1e999:1",
        "/live/photo/..%2f1",
        "/C:%5cWindows%5cwin.ini",
    ],
)
def test_no_parameter_reaches_a_file_by_path(dash: Dashboard, path: str) -> None:
    r = dash.get(path)
    assert r.status in (400, 404, 405), (path, r.status, r.text[:200])
    assert not any(m in r.body for m in (b"root:", b"[project]", dash.token.encode(), b"SQLite format"))


def test_a_folder_is_never_listed(dash: Dashboard) -> None:
    for path in ("/static/", "/photo/", "/photo/1/", "/photo/1/faces/", "/api/"):
        assert dash.get(path).status == 404, path


def test_pages_forbid_framing_sniffing_and_inline_scripts(dash: Dashboard) -> None:
    r = dash.get("/")
    assert r.status == 200
    csp = r.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp
    assert r.headers["X-Frame-Options"] == "DENY"
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert "<script>" not in r.text and " on" + "click=" not in r.text


def test_a_file_name_is_shown_as_text_never_as_markup(dash: Dashboard) -> None:
    # "bad" makes the stand-in restorer fail it: the name shows on Activity and Failed.
    name = "<img src=x onerror=alert(1)> bad.jpg"
    write_atomic(dash.svc.inbox / name, b"not an image")
    dash.wait(lambda s: s["queue"]["failed"] + s["queue"]["unsupported"] >= 1, 30, "the failure")
    for path in ("/activity", "/failed"):
        html = dash.get(path).text
        assert "<img src=x" not in html, path
        assert "&lt;img src=x onerror=alert(1)&gt; bad.jpg" in html, path
