"""A redo of a photo that has copies (the same bytes dropped again into other folders, each a photo
of its own in Results) through a real running service: the photo and its copies are restored once,
and each copy is given that one result under its own name, as a copy is at its first drop. Killed at
each step of giving a copy its result, the service finishes at its restart, nothing written twice,
nothing lost.

The stand-in restorer (``review_restorer``) writes the photo with its colours turned, larger by a
redo's restore.upscale: a redone result is told from the old one by its size."""

from __future__ import annotations

import io
import json
import os
import signal
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from dashboard_client import Dashboard, served_dashboard, wait_for
from PIL import Image
from redo_copy_kill_hook import STEPS
from service_harness import ServiceProcess, queue_empty, write_atomic
from test_outbox import Env, _copy_claim

from gpen_watch.journal.browse import JournalBrowser
from gpen_watch.journal.journal import Job, Journal
from gpen_watch.journal.states import JobState, Original
from gpen_watch.outbox import commit, duplicates
from gpen_watch.outbox.redo import original_of
from gpen_watch.restore.api import FileResult

pytestmark = pytest.mark.timeout(300)

JSON = {"Content-Type": "application/json"}
RESTORER = "review_restorer:ReviewRestorer"
# The photo and its copies: its first drop, and the same bytes in two other folders.
NAMES = ("{k} wedding.jpg", "album/{k} wedding.jpg", "2026/party/{k} wedding copy.jpg")


def jpeg(k: int) -> bytes:
    im = Image.new("RGB", (320, 240), (40 + 7 * k, 90, 160))
    out = io.BytesIO()
    im.save(out, "JPEG", quality=95)
    return out.getvalue()


def journal_path(d: Dashboard) -> Path:
    return d.home / "state" / "gpen-watch" / "journal.sqlite3"


def read_runs(d: Dashboard, ids: list[int]) -> list[Job]:
    browser = JournalBrowser.open(journal_path(d))
    try:
        return [browser.require(i) for i in ids]
    finally:
        browser.close()


def restores(d: Dashboard, ids: list[int]) -> list[str]:
    """The claims of the runs ``ids`` that handed a photo to a worker (not those given a copy)."""
    browser = JournalBrowser.open(journal_path(d))
    try:
        return [
            f"run {i}: {e.detail}"
            for i in ids
            for e in browser.history(i)
            if e.kind == "claimed" and (e.detail or "").startswith("attempt")
        ]
    finally:
        browser.close()


def drop_group(d: Dashboard, k: int) -> list[dict]:
    """Drop photo ``k`` and its two copies; their Results entries, the photo first."""
    data = jpeg(k)

    def listed() -> list[dict]:
        photos = d.get(f"/api/results?limit=50&q={k}%20wedding").json()["photos"]
        return sorted(photos, key=lambda p: p["id"])

    write_atomic(d.svc.inbox / NAMES[0].format(k=k), data)
    wait_for(lambda: [p["state"] for p in listed()] == ["done"], 30, "the photo restored")
    for name in NAMES[1:]:
        write_atomic(d.svc.inbox / name.format(k=k), data)
    wait_for(lambda: len(listed()) == 3 and d.status()["queue"]["running"] == 0, 30, "the copies listed")
    group = listed()
    assert [p["state"] for p in group] == ["done", "duplicate", "duplicate"], group
    return group


def redo(d: Dashboard, run: int, settings: dict) -> dict:
    r = d.post(f"/api/redo/{run}", JSON, json.dumps({"settings": settings}).encode())
    assert r.status == 200, r.text
    reply: dict = r.json()
    return reply


def outputs(d: Dashboard, k: int, name: str = "wedding") -> dict[str, bytes]:
    """Every file in the outbox of photo ``k``, by its path there."""
    return {
        str(p.relative_to(d.svc.outbox)): p.read_bytes()
        for p in sorted(d.svc.outbox.rglob(f"*{k} {name}*"))
        if p.is_file() and "originals" not in p.parts
    }


def one_result_each(d: Dashboard, k: int, lead: Job, copies: list[Job]) -> list[str]:
    """What is wrong with group ``k`` after its redo (an empty list: nothing)."""
    wrong = []
    files = outputs(d, k)
    want = sorted(n.format(k=k) for n in NAMES)
    if sorted(files) != want:
        wrong.append(f"the outbox holds {sorted(files)}, not {want}")
    if lead.output is None or lead.state != JobState.DONE:
        return [*wrong, f"the photo's redo is {lead.state} with {lead.output}"]
    new = lead.output.read_bytes()
    if Image.open(io.BytesIO(new)).size != (640, 480):
        wrong.append("the photo's result is not the redone one (upscale 2)")
    for c in copies:
        if c.state != JobState.DONE or c.output is None or c.duplicate_of != lead.id:
            wrong.append(f"{c.rel}: run {c.id} is {c.state}, {c.output}, a copy of {c.duplicate_of}")
        elif c.output.read_bytes() != new:
            wrong.append(f"{c.rel}: its result is not the photo's redone result")
        elif not any(f"a copy of its result, run {lead.id}" in n for n in c.notes):
            wrong.append(f"{c.rel}: its notes do not say whose result it has: {c.notes}")
    temps = [p.name for p in d.svc.outbox.rglob("*gpen-tmp*")]
    if temps:
        wrong.append(f"temp files left: {temps}")
    listed = d.get(f"/api/results?limit=50&q={k}%20wedding").json()["photos"]
    if sorted(p["id"] for p in listed) != sorted([lead.id, *(c.id for c in copies)]):
        wrong.append(f"Results lists {[(p['id'], p['name']) for p in listed]}")
    return wrong


@pytest.fixture(scope="module")
def dash(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    with served_dashboard(tmp_path_factory.mktemp("redo-copies"), restorer=RESTORER) as d:
        yield d


def test_a_redo_of_a_photo_with_copies_restores_it_once(dash: Dashboard) -> None:
    group = drop_group(dash, 1)
    before = dash.status()["throughput"]["redos"]
    reply = redo(dash, group[0]["id"], {"restore.upscale": 2})
    assert len(reply["copies"]) == 2, reply
    dash.wait(queue_empty, 30, "the redos")
    ids = [reply["id"], *reply["copies"]]
    lead, *copies = read_runs(dash, ids)
    assert one_result_each(dash, 1, lead, copies) == []
    # One restore: the photo's redo went to a worker, its copies' took its result.
    assert restores(dash, ids) == [f"run {lead.id}: attempt 1 on pool"]
    assert dash.status()["throughput"]["redos"] == before + 1
    assert all(c.node is None for c in copies) and lead.node is not None
    # Each copy is still a photo of its own, saying what it is a copy of, as its redo.
    page = dash.get("/results?q=album%2F1%20wedding").text
    assert "a copy of 1 wedding.jpg" in page


def test_a_redo_asked_of_a_copy_restores_the_group_once_too(dash: Dashboard) -> None:
    group = drop_group(dash, 2)
    reply = redo(dash, group[2]["id"], {"restore.upscale": 2})  # from the second copy's page
    dash.wait(queue_empty, 30, "the redos")
    ids = [reply["id"], *reply["copies"]]
    lead, *copies = read_runs(dash, ids)
    assert lead.redo_of == group[2]["id"] and len(copies) == 2
    assert one_result_each(dash, 2, lead, copies) == []
    assert restores(dash, ids) == [f"run {lead.id}: attempt 1 on pool"]


def test_a_bulk_redo_restores_each_group_once(dash: Dashboard) -> None:
    groups = [drop_group(dash, 3), drop_group(dash, 4)]
    # Group 3 ticked as its photo and a copy, group 4 as one copy: each is redone whole, once.
    ticked = [groups[0][0]["id"], groups[0][1]["id"], groups[1][2]["id"]]
    body = {"action": "redo", "ids": ticked, "settings": {"restore.upscale": 2}}
    r = dash.post("/api/bulk", JSON, json.dumps(body).encode())
    assert r.status == 200 and r.json()["queued"] == 6, r.text
    first, last = r.json()["first"], r.json()["last"]
    dash.wait(queue_empty, 30, "the redos")
    runs = read_runs(dash, list(range(first, last + 1)))
    for k, group in zip((3, 4), groups, strict=True):
        mine = [j for j in runs if j.redo_of in {p["id"] for p in group}]
        lead = next(j for j in mine if j.duplicate_of is None)
        copies = [j for j in mine if j is not lead]
        assert one_result_each(dash, k, lead, copies) == []
        assert restores(dash, [j.id for j in mine]) == [f"run {lead.id}: attempt 1 on pool"]


# --- killed part way --------------------------------------------------------------------------------


class KillHookService(ServiceProcess):
    """`gpen-watch run` with ``redo_copy_kill_hook`` installed."""

    def command(self) -> list[str]:
        run = super().command()[3:]  # after `python -m gpen_watch`
        return [sys.executable, "-c", "import redo_copy_kill_hook; redo_copy_kill_hook.serve()", *run]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_redo_of_copies_killed_at_each_step_finishes_once_at_restart(tmp_path: Path) -> None:
    at, log = tmp_path / "kill-at", tmp_path / "kills.log"
    env = {"GW_REDO_KILL_AT": str(at), "GW_REDO_KILL_LOG": str(log)}
    problems: list[str] = []
    (tmp_path / "svc").mkdir()
    with served_dashboard(tmp_path / "svc", restorer=RESTORER, env=env, service=KillHookService) as d:
        for k, step in enumerate(STEPS, start=10):
            group = drop_group(d, k)
            at.write_text(step)
            reply = redo(d, group[0]["id"], {"restore.upscale": 2})
            assert d.svc.proc is not None
            assert d.svc.proc.wait(60) == -signal.SIGKILL, f"not killed at {step}"
            assert log.read_text().splitlines()[-1] == f"killed {step}"
            d.restart()
            d.wait(queue_empty, 30, "the redos")
            ids = [reply["id"], *reply["copies"]]
            lead, *copies = read_runs(d, ids)
            problems += [f"{step}: {p}" for p in one_result_each(d, k, lead, copies)]
            # The photo was restored once before the kill; no copy was restored after it.
            claims = restores(d, ids)
            if claims != [f"run {lead.id}: attempt 1 on pool"]:
                problems.append(f"{step}: restored {claims}")
            assert not os.path.exists(at) or at.read_text() == ""
    assert not problems, "\n".join(problems)


# --- the journal's side: which redo waits, which takes a result, which is restored ----------------


def _photo_and_copy(tmp_path: Path) -> tuple[Journal, Job, Job]:
    """A photo restored, and the same bytes dropped into another folder and given a copy."""
    journal = Journal.open(tmp_path / "journal.sqlite3")
    inbox = tmp_path / "inbox"
    ran = []
    for rel in ("a.jpg", "album/a.jpg"):
        job = journal.add(inbox / rel, inbox, rel, 10, 1.0, "ab" * 32).job
        claim = journal.claim_batch(1, "w")
        assert [j.id for j in claim.jobs] + [t.job.id for t in claim.copies] == [job.id]
        journal.finish(job.id, tmp_path / "outbox" / rel, 1)
        ran.append(journal.require(job.id))
    assert [j.state for j in ran] == [JobState.DONE, JobState.DUPLICATE]
    return journal, ran[0], ran[1]


def test_a_copys_redo_waits_for_its_photos_and_takes_its_result(tmp_path: Path) -> None:
    journal, photo, copy = _photo_and_copy(tmp_path)
    lead, other = journal.add_redos([(photo, photo.source), (copy, copy.source)], {"restore.strength": 0.5})
    assert (lead.duplicate_of, other.duplicate_of) == (None, lead.id)
    claim = journal.claim_batch(4, "w")
    assert [j.id for j in claim.jobs] == [lead.id] and claim.copies == [] and claim.held == 1
    assert journal.claim_batch(4, "w").held == 1  # still waiting while the photo's redo runs
    journal.finish(lead.id, photo.output or Path(), 1)
    claim = journal.claim_batch(4, "w")
    assert claim.jobs == [] and [(t.job.id, t.first.id) for t in claim.copies] == [(other.id, lead.id)]
    journal.finish(other.id, copy.output or Path(), 1)
    assert journal.require(other.id).state == JobState.DONE  # a redo, done as redos are
    journal.close()


def test_a_copys_redo_is_restored_itself_when_its_photos_failed(tmp_path: Path) -> None:
    journal, photo, copy = _photo_and_copy(tmp_path)
    lead, other = journal.add_redos([(photo, photo.source), (copy, copy.source)], {"restore.strength": 0.5})
    assert [j.id for j in journal.claim_batch(4, "w").jobs] == [lead.id]
    journal.fail(lead.id, "its original is no longer there")
    claim = journal.claim_batch(4, "w")
    assert [j.id for j in claim.jobs] == [other.id] and claim.copies == []
    assert journal.require(other.id).duplicate_of is None
    journal.close()


def test_redos_of_other_settings_are_never_a_copy_of_each_other(tmp_path: Path) -> None:
    journal, photo, copy = _photo_and_copy(tmp_path)
    first = journal.add_redo(photo, photo.source, {"restore.strength": 0.5})
    second = journal.add_redo(copy, copy.source, {"restore.strength": 0.9})
    assert second.duplicate_of is None  # asked apart: restored apart
    assert [j.id for j in journal.claim_batch(4, "w").jobs] == [first.id]
    journal.finish(first.id, photo.output or Path(), 1)
    assert [j.id for j in journal.claim_batch(4, "w").jobs] == [second.id]
    journal.close()


# --- the same photo dropped again under its own name ----------------------------------------------


def test_a_photo_or_a_copy_dropped_again_under_its_name_gets_no_second_file(dash: Dashboard) -> None:
    group = drop_group(dash, 5)
    reply = redo(dash, group[0]["id"], {"restore.upscale": 2})
    dash.wait(queue_empty, 30, "the redos")
    before = outputs(dash, 5)
    ended = dash.status()["queue"]["duplicate"]
    # The photo (redone since: its first result's file is gone) and a copy, each under its name.
    write_atomic(dash.svc.inbox / NAMES[0].format(k=5), jpeg(5))
    write_atomic(dash.svc.inbox / NAMES[1].format(k=5), jpeg(5))
    dash.wait(lambda s: s["queue"]["duplicate"] == ended + 2 and queue_empty(s), 30, "both drops seen")
    assert outputs(dash, 5) == before  # no "5 wedding (1).jpg", nothing replaced
    listed = dash.get("/api/results?limit=50&q=5%20wedding").json()["photos"]
    assert sorted(p["id"] for p in listed) == sorted([reply["id"], *reply["copies"]])


def test_a_photo_sent_again_under_its_name_shows_in_its_batch(dash: Dashboard) -> None:
    def send(batch: str) -> int:
        q = f"name=6%20sent.jpg&batch={batch}"
        r = dash.post(f"/api/v1/photos?{q}", {"X-GPEN-Watch": "1"}, jpeg(6))
        assert r.status == 201, r.text
        photo_id: int = r.json()["id"]
        wait_for(lambda: dash.get(f"/api/v1/photos/{photo_id}").json()["final"], 30, "the photo")
        return photo_id

    first = send("upload-20261206-140000-aaaa")
    again = send("upload-20261206-150000-bbbb")
    assert dash.get(f"/api/v1/photos/{again}").json()["state"] == "duplicate"
    assert sorted(outputs(dash, 6, "sent")) == ["6 sent.jpg"]
    # Its batch's view shows the photo it is (one tile, the photo's), and its zip holds its result.
    for batch in ("upload-20261206-140000-aaaa", "upload-20261206-150000-bbbb"):
        listed = dash.get(f"/api/results?batch={batch}").json()["photos"]
        assert [p["id"] for p in listed] == [first], batch
    r = dash.get("/results.zip?batch=upload-20261206-150000-bbbb")
    assert r.status == 200, r.text
    with zipfile.ZipFile(io.BytesIO(r.body)) as z:
        assert [n.rsplit("/", 1)[-1] for n in z.namelist()] == ["6 sent.jpg"]


def test_a_copys_redo_in_another_format_takes_its_extension_and_leaves_one_file(tmp_path: Path) -> None:
    env = Env(tmp_path)
    first = env.drop("a.jpg")
    commit.commit(env.journal, first, env.run_worker(first), env.cfg)
    duplicates.copy_result(env.journal, _copy_claim(env, "sub/copy.jpg"), env.cfg)
    photo, copy = (env.journal.require(i) for i in (first, first + 1))
    runs = [(photo, original_of(photo)), (copy, original_of(copy))]
    lead, other = env.journal.add_redos(runs, {"output.format": "png"})
    res = env.run_worker(lead.id, b"redone photo")
    commit.commit(env.journal, lead.id, FileResult(**{**res.__dict__, "format": "PNG"}), env.cfg)
    assert env.files(env.outbox) == ["a.png", "sub/copy.jpg"]
    (twin,) = env.journal.claim_batch(4, "pool").copies
    assert (twin.job.id, twin.first.id) == (other.id, lead.id)
    assert duplicates.copy_result(env.journal, twin, env.cfg).output == env.outbox / "sub" / "copy.png"
    assert env.files(env.outbox) == ["a.png", "sub/copy.png"]  # the copy's old result gone with it
    assert (env.outbox / "sub" / "copy.png").read_bytes() == b"redone photo"
    done = env.journal.require(other.id)
    assert (done.state, done.original) == (JobState.DONE, Original.KEPT)  # its original stays put
    assert env.files(env.archive) == ["a.jpg", "sub/copy.jpg"]
    env.journal.close()
