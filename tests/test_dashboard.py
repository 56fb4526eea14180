"""The dashboard of a real running service: its pages and API answer from the journal and the
status, its live stream sends the page's changing part, and the CLI finds it."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from dashboard_client import Dashboard, served_dashboard, wait_for
from service_harness import write_atomic

from gpen_watch.dashboard import access

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def dash(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    root = tmp_path_factory.mktemp("dashboard")
    with served_dashboard(root) as d:
        write_atomic(d.svc.inbox / "family.jpg", b"\xff\xd8 the stand-in restores any bytes")
        write_atomic(d.svc.inbox / "landscape noface.jpg", b"\xff\xd8 no face here")
        write_atomic(d.svc.inbox / "broken bad.jpg", b"not an image")
        d.wait(lambda s: s["queue"]["done"] >= 2 and s["queue"]["failed"] + s["queue"]["unsupported"] >= 1)
        yield d


def test_dashboard_url_prints_the_login_url_and_nothing_else(dash: Dashboard) -> None:
    out = dash.cli("dashboard", "--url")
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"{dash.url}?token={dash.token}\n"
    assert out.stderr == ""


def test_status_says_where_the_dashboard_is(dash: Dashboard) -> None:
    out = dash.cli("status")
    assert f"dashboard: {dash.url}" in out.stdout


def test_dashboard_url_with_no_service_says_so_and_exits_3(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "gpen_watch", "dashboard", "--url"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 3  # cli.exitcodes.NOT_RUNNING, as for every command that needs the service
    assert out.stdout == ""
    assert "gpen-watch is not running" in out.stderr


def test_the_parent_stays_light_with_its_dashboard(dash: Dashboard) -> None:
    s = dash.status()
    assert s["torch_loaded"] is False and s["ray_loaded"] is False


def test_overview_shows_inbox_counts_and_the_worker(dash: Dashboard) -> None:
    html = dash.get("/").text
    assert str(dash.svc.inbox) in html
    assert "cpu#0" in html
    assert "Pause" in html


def test_results_newest_first_with_thumbnail_links(dash: Dashboard) -> None:
    photos = dash.get("/api/results").json()["photos"]
    names = [p["name"] for p in photos]
    assert set(names) == {"family.jpg", "landscape noface.jpg", "broken bad.jpg"}  # failures too
    html = dash.get("/results").text
    for p in photos:
        if p["state"] != "done":
            continue
        assert f'href="/photo/{p["id"]}"' in html
        assert f'src="/photo/{p["id"]}/thumb.jpg"' in html


def test_a_photos_page_and_api_give_its_notes_and_history(dash: Dashboard) -> None:
    photo = next(p for p in dash.get("/api/results").json()["photos"] if p["name"] == "family.jpg")
    api = dash.get(f"/api/photo/{photo['id']}").json()
    kinds = [e["kind"] for e in api["history"]]
    assert kinds[0] == "added" and "finished" in kinds
    page = dash.get(f"/photo/{photo['id']}").text
    assert "family.jpg" in page and str(dash.svc.inbox) in page
    assert dash.get("/photo/999999").status == 404


def test_failed_lists_the_reason_sentence(dash: Dashboard) -> None:
    html = dash.get("/failed").text
    assert "broken bad.jpg" in html
    assert "not an image" in html


def test_activity_links_each_event_to_its_photo(dash: Dashboard) -> None:
    html = dash.get("/activity").text
    assert "family.jpg" in html and "broken bad.jpg" in html
    assert 'href="/photo/' in html


def test_the_live_stream_sends_the_pages_changing_part(dash: Dashboard) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", dash.port, timeout=20)
    try:
        conn.request(
            "GET",
            "/live/overview",
            headers={"Host": dash.host, "Cookie": f"{access.COOKIE}={dash.session()}"},
        )
        r = conn.getresponse()
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/event-stream")
        event = _read_event(r)
        assert event.startswith("event: page\n")
        assert "Inboxes" in event and "<html" not in event  # the fragment, not the whole page
    finally:
        conn.close()


def _read_event(r: http.client.HTTPResponse) -> str:
    lines = []
    while True:
        line = r.readline().decode()
        if line == "\n" and lines:
            return "".join(lines)
        lines.append(line)


@pytest.mark.slow
def test_a_port_in_use_leaves_the_service_running_and_says_why(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        from service_harness import ServiceProcess

        # The test's own user folders (conftest's autouse fixture), as for every service test.
        svc = ServiceProcess(
            tmp_path, "--set", f"dashboard.port={port}", restorer="fake_restorer:FakeRestorer"
        )
        try:
            svc.start()
            s = svc.wait(lambda s: bool(s.get("dashboard_problem")), 30, "the dashboard's problem")
            assert s["dashboard"] == ""
            assert (
                f"127.0.0.1:{port}" in s["dashboard_problem"] and "dashboard.port" in s["dashboard_problem"]
            )
            write_atomic(svc.inbox / "a.jpg", b"x")
            svc.wait(lambda s: s["queue"]["done"] == 1, 30, "the photo, restored anyway")
        finally:
            svc.close()


@pytest.mark.slow
def test_a_service_with_the_dashboard_off_serves_none(tmp_path: Path) -> None:
    from service_harness import ServiceProcess

    svc = ServiceProcess(tmp_path, "--set", "dashboard.enabled=false", restorer="fake_restorer:FakeRestorer")
    try:
        svc.start()
        assert svc.status()["dashboard"] == ""
        out = subprocess.run(
            [sys.executable, "-m", "gpen_watch", "dashboard", "--url"],
            capture_output=True,
            text=True,
            timeout=60,
            env=svc.env,
        )
        assert out.returncode == 1
        assert "dashboard.enabled = false" in out.stderr
        assert not access.token_path().exists()
    finally:
        svc.close()


def test_dashboard_opens_the_default_browser_signed_in(dash: Dashboard, tmp_path: Path) -> None:
    opened = tmp_path / "opened.txt"
    # Python's webbrowser runs $BROWSER with the URL: a stand-in browser that writes it down.
    browser = f"{sys.executable} -c \"import sys; open({str(opened)!r}, 'w').write(sys.argv[1])\" %s"
    out = dash.cli("dashboard", env={"BROWSER": browser})
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"opened the dashboard ({dash.url}) in your browser\n"  # no token on screen
    wait_for(opened.exists, 20, "the stand-in browser")
    assert opened.read_text() == f"{dash.url}?token={dash.token}"


@pytest.mark.parametrize("status", [0, 4])
def test_dashboard_says_whether_the_browser_opened_by_the_openers_exit_status(
    dash: Dashboard, tmp_path: Path, status: int
) -> None:
    """xdg-open exits 4 when the browser refuses to start: no "opened" then, but why and the link."""
    folder = tmp_path / "bin"
    folder.mkdir()
    opener = folder / "xdg-open"
    opener.write_text(f"#!/bin/sh\necho 'no browser here' >&2\nexit {status}\n", encoding="utf-8")
    opener.chmod(0o755)
    env = {k: v for k, v in dash.svc.env.items() if k != "BROWSER"}
    out = subprocess.run(
        [sys.executable, "-m", "gpen_watch", "dashboard"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "PATH": f"{folder}{os.pathsep}{env['PATH']}"},
    )
    assert out.returncode == 0, out.stderr
    if status == 0:
        assert out.stdout == f"opened the dashboard ({dash.url}) in your browser\n"
    else:
        assert out.stdout == (
            "no browser opened (xdg-open exited with status 4: the browser or application did not start "
            f"(no browser here)); open this link (it signs you in): {dash.url}?token={dash.token}\n"
        )
