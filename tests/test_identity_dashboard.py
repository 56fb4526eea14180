"""Which faces need a look, on the dashboard of a real running service (the stand-in restorer
describes each face as its file name says: ``flagged``, ``personN``, ``sharp``): Results filtered
by "may not look like the same person" and ordered by the largest identity change, a person's
photos, the People page, each face's distance and badge on its photo's page, a face left as it was
because already sharp and the redo that restores it anyway, the Overview's count, the sentences
said where the check does not run, and the hostile requests the new parameters must refuse."""

from __future__ import annotations

import http.client
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from conftest import isolated_env
from dashboard_client import Dashboard, served_dashboard, wait_for
from service_harness import queue_empty, write_atomic

from gpen_watch.catalog.registry import identity_specs
from gpen_watch.config import Config, RestoreConfig
from gpen_watch.dashboard.access import COOKIE
from gpen_watch.dashboard.face_checks import identity_note
from gpen_watch.dashboard.people import why_not_described
from gpen_watch.journal.faces import FaceRow
from gpen_watch.journal.records import Job
from gpen_watch.journal.states import JobState

pytestmark = pytest.mark.timeout(180)

PHOTOS = [
    "bride_person1_a.jpg",
    "bride_person1_flagged_b.jpg",
    "bride_person1_c.jpg",
    "husband_person2_flagged.jpg",
    "husband_person2_b.jpg",
    "portrait_person3_sharp.jpg",
    "beach noface.jpg",
]
JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def dash(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    with served_dashboard(tmp_path_factory.mktemp("identity"), env={"FAKE_SLOW": "20"}) as d:
        d.control("pause")  # dropped together: one batch
        for name in PHOTOS:
            write_atomic(d.svc.inbox / name, b"\xff\xd8 " + name.encode())
        d.wait(lambda s: s["queue"]["queued"] == len(PHOTOS), 30, "the photos recorded")
        d.control("resume")
        d.wait(lambda s: s["queue"]["done"] >= len(PHOTOS))
        yield d


def results(d: Dashboard, query: str = "") -> dict[str, Any]:
    r = d.get("/api/results" + query)
    assert r.status == 200, r.text
    return dict(r.json())


def names(d: Dashboard, query: str) -> list[str]:
    return [p["name"] for p in results(d, query)["photos"]]


def runs(d: Dashboard) -> list[tuple[int, str, int | None]]:
    """(id, name, redo_of) of every run Results lists, for a failure's message."""
    return [(p["id"], p["name"], p.get("redo_of")) for p in results(d)["photos"]]


def ids_by_name(d: Dashboard) -> dict[str, int]:
    return {p["name"]: p["id"] for p in results(d)["photos"]}


def test_results_filters_the_faces_that_may_not_look_like_the_same_person(dash: Dashboard) -> None:
    assert sorted(names(dash, "?identity=flagged")) == [
        "bride_person1_flagged_b.jpg",
        "husband_person2_flagged.jpg",
    ]
    assert results(dash, "?identity=flagged")["total"] == 2
    assert names(dash, "?identity=flagged&q=husband") == ["husband_person2_flagged.jpg"]
    page = dash.get("/results?identity=flagged").text
    assert '<option value="flagged" selected>may not look like the same person</option>' in page
    assert "2 photos match" in page and "bride_person1_a.jpg" not in page
    assert page.count(">may not look like the same person</span>") == 2  # each tile's badge
    photo = results(dash, "?identity=flagged&q=husband")["photos"][0]
    assert (photo["flagged"], photo["identity"]) == (1, 0.5)


def test_results_orders_by_the_largest_identity_change_first(dash: Dashboard) -> None:
    order = names(dash, "?sort=identity")
    assert set(order[:2]) == {"bride_person1_flagged_b.jpg", "husband_person2_flagged.jpg"}  # 0.5
    assert set(order[2:5]) == {"bride_person1_a.jpg", "bride_person1_c.jpg", "husband_person2_b.jpg"}  # 0.05
    assert set(order[5:]) == {"portrait_person3_sharp.jpg", "beach noface.jpg"}  # nothing measured: last
    page = dash.get("/results?sort=identity").text
    assert '<option value="identity" selected>largest identity change first</option>' in page
    assert "change 0.50" in page
    # A photo's page steps through the same order.
    ids = [p["id"] for p in results(dash, "?sort=identity")["photos"]]
    second = dash.get(f"/photo/{ids[1]}?sort=identity").text
    assert f'href="/photo/{ids[0]}?sort=identity" data-key="k"' in second
    assert f'href="/photo/{ids[2]}?sort=identity" data-key="j"' in second


def test_the_people_page_has_a_tile_a_person_and_results_their_photos(dash: Dashboard) -> None:
    page = dash.get("/people")
    assert page.status == 200, page.text
    keys = re.findall(r'data-person="([0-9]+\.[0-9]+)"', page.text)
    assert len(keys) == 3  # the bride, the husband, the portrait's person (the beach has no face)
    assert "3 people in 6 faces of 6 photos" in page.text
    ids = ids_by_name(dash)
    by_size = [sorted(names(dash, "?" + urlencode({"person": k, "sort": "name"}))) for k in keys]
    assert by_size == [
        ["bride_person1_a.jpg", "bride_person1_c.jpg", "bride_person1_flagged_b.jpg"],
        ["husband_person2_b.jpg", "husband_person2_flagged.jpg"],
        ["portrait_person3_sharp.jpg"],
    ]
    assert page.text.count("1 of 3 faces may not look like the same person") == 1  # the bride's tile
    assert page.text.count("1 of 2 faces may not look like the same person") == 1  # the husband's
    # The person's filter narrows the others, and they it.
    assert names(dash, f"?person={keys[0]}&identity=flagged") == ["bride_person1_flagged_b.jpg"]
    shown = dash.get(f"/results?person={keys[0]}").text
    assert f'<input type="hidden" name="person" value="{keys[0]}">' in shown
    assert "Photos of this person (3)" in shown and "3 photos match" in shown
    # Any face of the person names them: the husband by his second photo's face.
    assert sorted(names(dash, f"?person={ids['husband_person2_b.jpg']}.0")) == [
        "husband_person2_b.jpg",
        "husband_person2_flagged.jpg",
    ]
    # A photo's page steps within the person's photos, and a bulk action by view takes theirs only.
    order = [p["id"] for p in results(dash, f"?person={keys[1]}&sort=name")["photos"]]
    assert "1 of 2 in this view" in dash.get(f"/photo/{order[0]}?person={keys[1]}&sort=name").text
    body = json.dumps({"action": "look", "view": f"?person={keys[1]}", "note": "the husband"}).encode()
    r = dash.post("/api/bulk", JSON, body)
    assert r.status == 200 and r.json()["done"] == 2, r.text
    assert sorted(names(dash, "?review=look")) == ["husband_person2_b.jpg", "husband_person2_flagged.jpg"]


def test_a_faces_distance_and_badge_on_its_photos_page(dash: Dashboard) -> None:
    ids = ids_by_name(dash)
    flagged = dash.get(f"/photo/{ids['bride_person1_flagged_b.jpg']}").text
    assert (
        '<span class="badge warn">may not look like the same person</span> identity distance 0.50' in flagged
    )
    assert f'href="/results?person={ids["bride_person1_flagged_b.jpg"]}.0">Photos of this person' in flagged
    calm = dash.get(f"/photo/{ids['bride_person1_a.jpg']}").text
    assert "identity distance 0.05" in calm and "may not look like the same person</span>" not in calm
    face = dash.get(f"/api/photo/{ids['bride_person1_flagged_b.jpg']}").json()["faces"][0]
    assert (face["distance"], face["flagged"], face["detail"]) == (0.5, True, 0.1)


def test_a_face_left_as_it_was_is_said_and_a_redo_restores_it_anyway(dash: Dashboard) -> None:
    run = ids_by_name(dash)["portrait_person3_sharp.jpg"]
    page = dash.get(f"/photo/{run}").text
    assert "<small>left as it was</small>" in page
    assert "left as it was: already sharp (detail 0.33, restore.sharp_above = 0.27)" in page
    form = re.search(
        r'<form method="post" action="/api/redo/(\d+)" class="force" data-redo>(.*?)</form>', page
    )
    assert form is not None and int(form[1]) == run
    assert 'name="face" value="0"' in form[2] and 'name="pick" value="1"' in form[2]
    assert "Restore it anyway" in form[2]
    # The form as a browser without the page's script sends it: the face picked by number.
    r = dash.post(
        f"/api/redo/{run}",
        {"Content-Type": "application/x-www-form-urlencoded", "Referer": f"{dash.url}photo/{run}"},
        b"face=0&pick=1",
    )
    assert r.status == 303, r.text
    wait_for(lambda: results(dash, "?q=portrait")["photos"][0]["redo_of"] == run, 30, "the redo")
    redo = results(dash, "?q=portrait")["photos"][0]
    history = dash.get(f"/photo/{redo['id']}").text
    assert "faces 0" in history  # the redo's settings: face 0 picked, restored whatever its detail


def test_the_overview_counts_the_flagged_faces(dash: Dashboard) -> None:
    assert dash.status()["flagged_today"] == 2
    page = dash.get("/").text
    assert re.search(
        r'href="/results\?identity=flagged&amp;sort=identity">2 faces may not look like the same person', page
    )


def test_where_the_check_does_not_run_the_pages_say_so(dash: Dashboard) -> None:
    # The stand-in service has no dlib files in its model folders: a view by the check says so.
    page = dash.get("/results?identity=flagged").text
    assert "The identity check does not run: dlib" in page and "models fetch dlib-face-recognition" in page
    assert "identity-off" not in dash.get("/results").text
    assert "The identity check does not run" in dash.get("/people").text


def test_hostile_values_are_left_out_and_said(dash: Dashboard) -> None:
    r = results(dash, "?person=../../etc/passwd&identity=%3Cscript%3E&sort=identity%27--")
    assert r["total"] == len(PHOTOS)
    assert sorted(r["ignored"]) == ["identity=<script>", "person=../../etc/passwd", "sort=identity'--"]
    page = dash.get("/results?identity=%3Cscript%3E").text
    assert "<script>" not in page and "identity=&lt;script&gt;" in page
    for bad in ("1.2.3", "1", "-1.0", "1.99999", "1e3.0", "0x1.0"):
        assert results(dash, "?" + urlencode({"person": bad}))["ignored"] == [f"person={bad}"]
    # A face that names nobody: no photo, and the sentence why.
    nobody = dash.get("/results?person=999999.0").text
    assert "There is no run 999999" in nobody and "No photo matches this view" in nobody
    beach = ids_by_name(dash)["beach noface.jpg"]
    r = results(dash, f"?person={beach}.0")
    assert r["total"] == 0 and not r["ignored"]
    assert "was not described by the identity check" in dash.get(f"/results?person={beach}.0").text
    # The People page takes a run id and a page number, nothing else.
    assert dash.get("/people?run=../etc").status == 400
    assert dash.get("/people?run=1;DROP%20TABLE%20jobs").status == 400
    assert dash.get("/people?page=-1").status == 400
    assert dash.get("/people?run=99999999").status == 404
    assert dash.get("/people?run=" + "9" * 40).status == 400
    assert dash.get("/people?before=%2e%2e").status == 400
    assert dash.get("/people?before=1").status == 404  # nothing before the first run
    assert dash.get("/people?page=999999").status == 200  # the last page
    assert dash.get("/people", signed_in=False).status in (303, 401, 403)
    # A bulk action over a view of nobody's photos touches none (never every photo).
    r = dash.post("/api/bulk", JSON, json.dumps({"action": "reject", "view": "?person=999999.0"}).encode())
    assert r.json().get("done", 0) == 0, r.text
    assert results(dash, "?review=rejected")["total"] == 0


def test_a_persons_live_view_takes_in_their_new_photo(dash: Dashboard) -> None:
    """After the others: it adds a photo. An open Results page of the bride's photos follows her
    batch: a photo of her restored while it is open comes into it, another person's does not."""
    key = f"{ids_by_name(dash)['bride_person1_a.jpg']}.0"
    conn = http.client.HTTPConnection("127.0.0.1", dash.port, timeout=20)
    try:
        conn.request(
            "GET",
            f"/live/results?person={key}",
            headers={"Host": dash.host, "Cookie": f"{COOKIE}={dash.session()}"},
        )
        r = conn.getresponse()
        assert r.status == 200
        first = read_event(r, time.monotonic() + 30)
        assert "bride_person1_c.jpg" in first and "bride_person1_d.jpg" not in first
        # Nothing else waiting or running (the redo before this test may still be, on a busy
        # machine), so her new photo starts a batch of its own, as the last test expects.
        dash.wait(queue_empty, 60, "the queue empty")
        write_atomic(dash.svc.inbox / "bride_person1_d.jpg", b"\xff\xd8 one more")
        deadline = time.monotonic() + 60
        while "bride_person1_d.jpg" not in (event := read_event(r, deadline)):
            pass  # each update of the page, until the new photo is in it
        assert "4 photos match" in event and "husband" not in event
    finally:
        conn.close()


def read_event(r: http.client.HTTPResponse, deadline: float) -> str:
    """The next event of a live page's stream (a keep-alive comment is skipped), before
    ``deadline`` (time.monotonic)."""
    lines: list[str] = []
    while True:
        assert time.monotonic() < deadline, "no such update of the live page came"
        line = r.readline().decode()
        if not line:
            raise AssertionError("the stream ended")
        if line == "\n" and lines:
            return "".join(lines)
        if not line.startswith(":") and line != "\n":
            lines.append(line)


@pytest.mark.slow
def test_the_overview_counts_the_batchs_flagged_faces_while_it_is_under_way(dash: Dashboard) -> None:
    """Last: it adds photos. A batch of two, one flagged and done, one slow (20 s) and still
    restoring. CI's slow stage runs it without the module's other tests, so it makes the batch
    before itself: one photo of the bride, dropped when nothing else waits or runs."""

    dash.wait(queue_empty, 60, "the queue empty")
    write_atomic(dash.svc.inbox / "bride_person1_e.jpg", b"\xff\xd8 the batch before")
    wait_for(lambda: "bride_person1_e.jpg" in names(dash, "?q=bride_person1_e"), 60, "her photo listed")
    dash.wait(queue_empty, 60, "her photo restored")
    dash.control("pause")
    write_atomic(dash.svc.inbox / "later_flagged.jpg", b"\xff\xd8 later")
    write_atomic(dash.svc.inbox / "later_slow.jpg", b"\xff\xd8 slow")
    dash.wait(lambda s: s["queue"]["queued"] == 2, 30, "the two recorded")
    dash.control("resume")
    wait_for(lambda: "Batch: 1 of 2" in dash.get("/").text, 30, "the batch half through")
    page = dash.get("/").text
    assert re.search(
        r'<p class="batch-flagged"><a href="/results\?identity=flagged&amp;sort=identity">1 face may not',
        page,
    )
    dash.wait(queue_empty, 60, "the slow one")

    # People shows the newest batch, these two (no person named in their names: one person), and
    # goes back to the one before. A batch whose photo just ended is shown as it was grouped last
    # while it is grouped again beside the page (a thread): wait for the new grouping.
    def people(query: str) -> tuple[str, list[str]]:
        page = dash.get("/people" + query).text
        return page, re.findall(r"\d+ (?:people|person) in [^<]*", page)

    wait_for(
        lambda: any("1 person in 2 faces of 2 photos" in line for line in people("")[1]),
        60,
        "the newest batch grouped with both photos",
    )
    newest = people("")[0]
    first = re.search(r'href="/people\?before=(\d+)">The batch before', newest)
    assert first is not None
    # The batch before: the bride's photo dropped alone above, and every photo since.
    query = f"?before={first[1]}"
    try:
        wait_for(
            lambda: any("2 people in 3 faces of 3 photos" in line for line in people(query)[1]),
            60,
            "the batch before grouped",
        )
    except AssertionError as e:
        raise AssertionError((str(e), people(query)[1], runs(dash))) from e
    assert 'href="/people">The newest batch' in people(query)[0]


# --- the sentences, without a service ---------------------------------------------------------------


def test_why_the_check_cannot_run(tmp_path: Path) -> None:
    with isolated_env(tmp_path / "home"):
        models = tmp_path / "models"
        models.mkdir()
        cfg = Config(restore=RestoreConfig(model_dir=models))
        missing = why_not_described(cfg)
        assert (
            "dlib_face_recognition_resnet_model_v1.dat and shape_predictor_5_face_landmarks.dat are"
            in missing
        )
        assert "models fetch dlib-face-recognition dlib-landmarks-5" in missing
        for spec in identity_specs():
            (models / spec.filename).write_bytes(b"stands in")
        assert why_not_described(cfg) == ""
        off = Config(restore=RestoreConfig(model_dir=models, identity_check=False))
        assert why_not_described(off).startswith("The identity check is off (restore.identity_check = false)")


def test_a_photos_page_says_why_its_faces_have_no_distance(tmp_path: Path) -> None:
    def job(faces: int, notes: list[str]) -> Job:
        p = tmp_path / "a.jpg"
        return Job(1, p, tmp_path, Path("a.jpg"), 1, 1.0, "x", JobState.DONE, 1, None, 1.0, 1.0, 2.0, p, faces,
                   {}, None, notes, None, None, None, None, None)  # fmt: skip

    with isolated_env(tmp_path / "home"):
        models = tmp_path / "models"
        models.mkdir()
        for spec in identity_specs():
            (models / spec.filename).write_bytes(b"stands in")
        cfg = Config(restore=RestoreConfig(model_dir=models))
        measured = [FaceRow(0, True, 0.1, 0.2)]
        unmeasured = [FaceRow(0, True, 0.1)]
        assert identity_note(job(1, []), measured, cfg) == ""
        assert identity_note(job(0, []), [], cfg) == ""  # nothing restored, nothing to check
        note = "the identity check did not run: dlib's X is in no model folder"
        assert (
            identity_note(job(1, [note]), unmeasured, cfg)
            == "The identity check did not run: dlib's X is in no model folder."
        )
        assert "restore.identity_check was off" in identity_note(job(1, []), unmeasured, cfg)
        assert "restored before gpen-watch checked faces" in identity_note(job(1, []), [], cfg)


def test_a_batch_is_grouped_again_beside_the_pages_when_a_photo_of_it_ends(tmp_path: Path) -> None:
    """The first grouping is made when asked; after a change (a photo of the batch ended) a page
    gets the one before at once while the new one is made on a thread; a mark changes nothing."""
    from dataclasses import dataclass

    import numpy as np

    from gpen_watch.dashboard.people import People
    from gpen_watch.journal.browse import JournalBrowser
    from gpen_watch.journal.journal import Journal
    from gpen_watch.journal.states import Mark

    def described(person: int) -> FaceRow:
        d = np.zeros(128, dtype="<f4")
        d[person] = 0.5**0.5
        return FaceRow(0, True, 0.2, 0.1, False, d.tobytes())

    @dataclass
    class Site:
        journal: JournalBrowser
        views_root: Path

        def settings_now(self) -> Config:
            return Config()

        def page(self, template: str, **context: Any) -> Any:
            raise AssertionError("no page here")

    inbox = tmp_path / "in"
    with Journal.open(tmp_path / "j.sqlite3") as j:
        jobs = [
            j.add(inbox / f"{n}.jpg", inbox, f"{n}.jpg", 1, 1.0, f"{n}".ljust(64, "0")).job for n in range(3)
        ]

        def finish(k: int, person: int) -> None:
            (job,) = j.claim_batch(1, "w").jobs
            assert job.id == jobs[k].id
            j.record_faces(job.id, [described(person)])
            j.finish(job.id, tmp_path / "out" / f"{k}.jpg", 1, {}, [])

        finish(0, 1)
        finish(1, 1)
        browser = JournalBrowser.open(tmp_path / "j.sqlite3")
        try:
            people = People(Site(browser, tmp_path / "views"))
            first = browser.batch_start()
            assert first == jobs[0].id
            before = people.grouping(first)
            assert [len(p.faces) for p in before.people] == [2]
            j.set_mark([jobs[0].id], Mark.ACCEPTED)
            assert people.grouping(first) is before  # nothing of the batch ended
            finish(2, 7)
            assert people.grouping(first) is before  # at once: the one before, while the new is made
            wait_for(lambda: len(people.grouping(first).people) == 2, 20, "the batch grouped again")
            after = people.grouping(first)
            assert sorted(len(p.faces) for p in after.people) == [1, 2]
            found = people.find((jobs[2].id, 0))
            assert not isinstance(found, str) and found[1].faces == ((jobs[2].id, 0),)
        finally:
            browser.close()
