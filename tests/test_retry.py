"""Retry and Dismiss of files set aside in failed/, through a real running service: the CLI
(`gpen-watch retry`), the dashboard's Failed page, and what becomes of the files and error files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dashboard_client import Dashboard, served_dashboard
from service_harness import write_atomic

from gpen_watch.journal.browse import JournalBrowser
from gpen_watch.journal.states import JobState

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def dash(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    root = tmp_path_factory.mktemp("retry")
    broken = root / "broken-while-this-exists"
    with served_dashboard(root, env={"FAKE_BROKEN_WHILE": str(broken)}) as d:
        yield d


def broken_marker(d: Dashboard) -> Path:
    return Path(d.svc.env["FAKE_BROKEN_WHILE"])


def failed_files(d: Dashboard) -> list[str]:
    return sorted(str(p.relative_to(d.svc.failed)) for p in d.svc.failed.rglob("*") if p.is_file())


def job_named(d: Dashboard, name: str, state: str) -> dict[str, Any]:
    journal = JournalBrowser.open(d.home / "state" / "gpen-watch" / "journal.sqlite3")
    try:
        job = journal.named(name, (JobState(state),))[0]
        return {"id": job.id, "hidden": job.hidden, "original_path": job.original_path}
    finally:
        journal.close()


def fail_one(d: Dashboard, rel: str) -> None:
    before = d.status()["queue"]
    write_atomic(d.svc.inbox / rel, b"\xff\xd8 unique content: " + rel.encode())
    d.wait(
        lambda s: s["queue"]["failed"] + s["queue"]["unsupported"] > before["failed"] + before["unsupported"],
        30,
        f"{rel} to fail",
    )


def test_retry_of_a_fixed_failure_restores_it_and_its_error_file_goes(dash: Dashboard) -> None:
    broken_marker(dash).touch()
    fail_one(dash, "fixable one.jpg")
    assert "fixable one.jpg" in failed_files(dash) and "fixable one.jpg.error.txt" in failed_files(dash)
    broken_marker(dash).unlink()  # the fix: a model copied in, a program installed
    done = dash.status()["queue"]["done"]
    out = dash.cli("retry", "fixable one.jpg")
    assert out.returncode == 0, out.stderr
    assert f"sent back to {dash.svc.inbox / 'fixable one.jpg'}" in out.stdout
    dash.wait(lambda s: s["queue"]["done"] > done, 30, "the retried photo restored")
    assert (dash.svc.outbox / "fixable one.jpg").exists()
    dash.wait(lambda s: "fixable one.jpg.error.txt" not in failed_files(dash), 10, "the old error file gone")
    assert "fixable one.jpg" not in failed_files(dash)
    assert "fixable one.jpg" not in dash.get("/failed").text


def test_retry_of_a_file_that_fails_again_says_so_with_the_new_reason(dash: Dashboard) -> None:
    fail_one(dash, "sub/again bad.jpg")
    old = (dash.svc.failed / "sub" / "again bad.jpg.error.txt").read_text()
    r = dash.post(f"/api/retry/{job_named(dash, 'again bad.jpg', 'unsupported')['id']}")
    assert r.status == 200, r.text
    dash.wait(
        lambda s: (
            (dash.svc.failed / "sub" / "again bad.jpg.error.txt").exists()
            and (dash.svc.failed / "sub" / "again bad.jpg.error.txt").read_text() != old
        ),
        30,
        "the new error file",
    )
    # One file, one error file, under the same names: no "(2)" copies beside them.
    assert [f for f in failed_files(dash) if "again bad" in f] == [
        "sub/again bad.jpg",
        "sub/again bad.jpg.error.txt",
    ]
    new = (dash.svc.failed / "sub" / "again bad.jpg.error.txt").read_text()
    assert "not an image" in new and new.split("Run:")[1] != old.split("Run:")[1]
    assert "again bad.jpg" in dash.get("/failed").text  # the new failure is listed, once
    assert dash.get("/failed").text.count("again bad.jpg</a>") == 1


def test_retry_of_a_name_several_failures_have_lists_their_ids(dash: Dashboard) -> None:
    fail_one(dash, "a/twin bad.jpg")
    fail_one(dash, "b/twin bad.jpg")
    out = dash.cli("retry", "twin bad.jpg")
    assert out.returncode == 1
    assert "2 failed photos are called 'twin bad.jpg'; give the run id" in out.stderr
    ids = [line.split()[0] for line in out.stderr.splitlines()[1:]]
    assert len(ids) == 2 and all(i.isdigit() for i in ids)
    assert dash.cli("retry", ids[0]).returncode == 0


def test_retry_of_an_unknown_name_says_so(dash: Dashboard) -> None:
    out = dash.cli("retry", "never-dropped.jpg")
    assert out.returncode == 1
    assert "no failed photo is called 'never-dropped.jpg'" in out.stderr


def test_retry_refuses_when_the_inbox_holds_a_new_file_of_that_name(dash: Dashboard) -> None:
    fail_one(dash, "taken bad.jpg")
    assert dash.control("pause")["ok"]  # the new drop stays in the inbox meanwhile
    try:
        write_atomic(dash.svc.inbox / "taken bad.jpg", b"a new file, dropped since")
        out = dash.cli("retry", "taken bad.jpg")
        assert out.returncode == 1
        assert "its inbox already holds a file at" in out.stderr and "move that one away first" in out.stderr
        assert (dash.svc.inbox / "taken bad.jpg").read_bytes() == b"a new file, dropped since"
        assert "taken bad.jpg" in failed_files(dash)
    finally:
        dash.control("resume")


def test_dismiss_takes_a_failure_off_the_page_and_leaves_its_files(dash: Dashboard) -> None:
    fail_one(dash, "dismissed bad.jpg")
    job = job_named(dash, "dismissed bad.jpg", "unsupported")
    assert "dismissed bad.jpg" in dash.get("/failed").text
    r = dash.post(f"/api/dismiss/{job['id']}")
    assert r.status == 200, r.text
    assert "dismissed bad.jpg" not in dash.get("/failed").text
    assert {"dismissed bad.jpg", "dismissed bad.jpg.error.txt"} <= set(failed_files(dash))
    assert dash.post("/api/dismiss/999999").status == 409


def test_retry_from_the_page_needs_the_pages_own_origin(dash: Dashboard) -> None:
    fail_one(dash, "csrf bad.jpg")
    job = job_named(dash, "csrf bad.jpg", "unsupported")
    r = dash.raw("POST", f"/api/retry/{job['id']}", {"Origin": "http://evil.example"})
    assert r.status == 403
    assert "csrf bad.jpg" in failed_files(dash)


@pytest.mark.slow
def test_retry_a_failed_file_from_the_failed_page_in_chromium(dash: Dashboard) -> None:
    from browser import chromium, wait_until
    from selenium.webdriver.common.by import By

    broken_marker(dash).touch()
    fail_one(dash, "browser fixable.jpg")
    broken_marker(dash).unlink()
    done = dash.status()["queue"]["done"]
    with chromium() as page:
        page.get(f"{dash.url}failed?token={dash.token}")
        wait_until(page, lambda d: d.find_element(By.ID, "conn").text == "live", timeout=30)
        item = next(
            li
            for li in page.find_elements(By.CSS_SELECTOR, ".failures li")
            if "browser fixable.jpg" in li.text
        )
        item.find_element(By.XPATH, ".//button[text()='Retry']").click()
        # The failure leaves the page by itself once it is sent back.
        wait_until(
            page, lambda d: "browser fixable.jpg" not in d.find_element(By.ID, "live").text, timeout=30
        )
    dash.wait(lambda s: s["queue"]["done"] > done, 30, "restored on its retry")
    assert (dash.svc.outbox / "browser fixable.jpg").exists()


@pytest.mark.slow
def test_retry_killed_before_its_file_moved_puts_the_failure_back_on_the_page(dash: Dashboard) -> None:
    from gpen_watch.journal import Journal
    from gpen_watch.journal.states import Hidden

    fail_one(dash, "interrupted bad.jpg")
    job = job_named(dash, "interrupted bad.jpg", "unsupported")
    # What a kill between the journal's record of the retry and the file's move leaves.
    with Journal.open(dash.home / "state" / "gpen-watch" / "journal.sqlite3") as journal:
        assert journal.hide(job["id"], Hidden.RETRIED, "sent back (then the service was killed)")
    assert "interrupted bad.jpg" not in dash.get("/failed").text
    dash.svc.kill()
    dash.restart()
    assert "interrupted bad.jpg" in dash.get("/failed").text
    assert "interrupted bad.jpg" in failed_files(dash) and "interrupted bad.jpg.error.txt" in failed_files(
        dash
    )
    assert dash.cli("retry", "interrupted bad.jpg").returncode == 0
