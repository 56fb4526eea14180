"""What the Overview and `gpen-watch status` say is true: the rate falls to 0 when nothing is being
restored and the time left comes from the rate shown, "done" counts photos with the redos apart
(today, this run, each inbox), a batch is the photos added since the queue was last empty, the
headline says when the workers wait for model files, a problem is said once, and "last errors"
lists only the failures still to see to, each once."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import pytest
from test_dashboard_activity import Clock, add, get, make_site

from gpen_watch.journal import Journal
from gpen_watch.journal.states import Hidden

MISSING = "model files missing: GPEN-BFR-512.pth (GPEN-BFR-512, 284.1 MB) from https://example.invalid/GPEN-BFR-512.pth [download failed: Name or service not known]; detection_Resnet50_Final.pth (RetinaFace-R50, 109.5 MB) from https://example.invalid/detection_Resnet50_Final.pth [download failed: Name or service not known]. GPEN-BFR-512.pth and detection_Resnet50_Final.pth: looked for in /models; run `gpen-watch models fetch GPEN-BFR-512 RetinaFace-R50`"


class Ticks:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_throughput_is_the_rate_now_and_falls_to_zero_when_nothing_is_being_restored() -> None:
    from gpen_watch.service.throughput import ThroughputMeter

    clock = Ticks()
    tp = ThroughputMeter(clock=clock)
    tp.busy(True)
    for _ in range(10):  # a photo every 6 s
        clock.now += 6
        tp.record(1)
    now = tp.summary()
    assert now.images_per_min == 10.0
    assert now.images_per_s == round(10 / 60, 4)  # the same figure: a time left from either agrees
    tp.busy(False)  # the queue ran dry
    assert tp.summary().images_per_min == 0.0
    clock.now += 3600
    tp.busy(True)  # a new photo an hour later: nothing of this stretch has ended yet
    assert tp.summary().images_per_min == 0.0
    clock.now += 30
    tp.record(0, redo=True)
    clock.now += 30
    tp.record_failure()  # a failure took its turn too
    assert tp.summary().images_per_min == 2.0  # 2 in 60 s of work, not the last hour's average
    clock.now += 600
    assert tp.summary().images_per_min == 0.0  # busy, but nothing ended in the last 5 minutes
    s = tp.summary()
    assert (s.images, s.redos, s.failed, s.faces) == (10, 1, 1, 10)


def status(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"version": "1", "pid": 1, "uptime_s": 5, "queue": {}, "throughput": {}}
    return {**base, **fields}


def live(html: str) -> str:
    return html.split('id="live"', 1)[1]


def said(html: str) -> str:
    """The page's words as a person reads them: no tags, no fallback text of a progress bar."""
    return re.sub(r"<[^>]+>", "", re.sub(r"<progress[^>]*>.*?</progress>", "", html, flags=re.S))


def test_the_headline_waits_for_model_files_and_says_each_missing_one_once(tmp_path: Path) -> None:
    Journal.open(tmp_path / "j.sqlite3").close()
    files = [
        {"role": "generator", "name": "GPEN-BFR-512", "file": "GPEN-BFR-512.pth", "state": "missing",
         "reason": "Name or service not known", "url": "https://example.invalid/GPEN-BFR-512.pth", "size_bytes": 284085738},
        {"role": "detector", "name": "RetinaFace-R50", "file": "detection_Resnet50_Final.pth", "state": "missing",
         "reason": "Name or service not known", "url": "https://example.invalid/d.pth", "size_bytes": 109497761},
    ]  # fmt: skip
    models = {"state": "waiting", "files": files, "folders": ["/models"]}
    s = status(
        problem=MISSING,
        problems=[{"about": "models", "text": MISSING}],
        queue={"queued": 3},
        models=models,
        workers=[{"name": "cpu#0", "device": "cpu", "state": "waiting for model files"}],
        nodes=[{"name": "studio", "local": True, "workers": 1}],
    )
    page = live(get(make_site(tmp_path / "j.sqlite3", tmp_path, s), "/"))
    headline = re.search(r"<h1>\s*(.*?)\s*<small>", page, re.S)
    assert headline and headline[1] == "Waiting for model files", page[:600]
    # The worker too says what it waits for (it said "stopped").
    worker = re.search(r'<li class="worker state-waiting-for-model-files">(.*?)</li>', page, re.S)
    assert worker and " · waiting for model files · " in " ".join(worker[1].split()), page
    for name in ("GPEN-BFR-512.pth", "detection_Resnet50_Final.pth"):
        assert said(page).count(name) == 1, (name, page)
    assert "gpen-watch models fetch GPEN-BFR-512 RetinaFace-R50" in page
    assert "Time left: not known: waiting for model files" in page

    # While a download runs, it is said once too (the notice and the progress bar were two).
    pct = {"name": "GPEN-BFR-512", "file": "GPEN-BFR-512.pth", "done": 10, "total": 100, "percent": 45}
    note = "downloading GPEN-BFR-512: 45 % (127.8 of 284.1 MB)"
    s.update(problem=None, problems=[], notice=note, notices=[{"about": "models", "text": note}])
    s["models"] = {**models, "download": pct}
    page = live(get(make_site(tmp_path / "j.sqlite3", tmp_path, s), "/"))
    assert said(page).count("45 %") == 1, page


def test_a_worker_that_cannot_load_the_files_is_said_once(tmp_path: Path) -> None:
    Journal.open(tmp_path / "j.sqlite3").close()
    loader = "GPEN-BFR-512: weights not found in /nowhere; run `gpen-watch models fetch`"
    gate = "a worker could not load the model files; it tries again as soon as a model file changes"
    s = status(
        problem=f"cpu#0: {loader}; {gate}",
        problems=[{"about": "workers", "text": f"cpu#0: {loader}"}, {"about": "models", "text": gate}],
        models={"state": "workers_failed", "files": [{"file": "GPEN-BFR-512.pth", "state": "present"}]},
        workers=[{"name": "cpu#0", "device": "cpu", "state": "error", "error": loader}],
        nodes=[{"name": "here", "local": True, "workers": 1}],
    )
    page = live(get(make_site(tmp_path / "j.sqlite3", tmp_path, s), "/"))
    assert said(page).count("weights not found") == 1, page
    assert said(page).count("could not load the model files") == 1, page


@pytest.mark.parametrize(
    ("throughput", "queue", "said"),
    [
        # A rate of 0 shown beside an old busy average: no time left is made up.
        (
            {"images_per_min": 0, "images_per_s": 0.5},
            {"queued": 10},
            "Time left: not known: nothing is being restored",
        ),
        (
            {"images_per_min": 6, "images_per_s": 0.1},
            {"queued": 10, "running": 2, "in_flight": 2},
            "Time left: 2 min",
        ),
        ({"images_per_min": 6, "images_per_s": 0.1}, {}, "Time left: nothing waiting"),
    ],
)
def test_the_time_left_comes_from_the_rate_shown(
    tmp_path: Path, throughput: dict[str, float], queue: dict[str, int], said: str
) -> None:
    Journal.open(tmp_path / "j.sqlite3").close()
    page = live(
        get(make_site(tmp_path / "j.sqlite3", tmp_path, status(throughput=throughput, queue=queue)), "/")
    )
    assert said in page, page


def test_done_today_counts_photos_and_the_redos_apart_in_each_inbox(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    with Journal.open(path) as j:
        ids = [add(j, f"{i}.jpg", inbox="/in") for i in range(3)]
        j.claim_batch(3, "w")
        j.finish(ids[0], "/out/0.jpg", faces=2)
        j.finish(ids[1], "/out/1.jpg", faces=0)
        j.fail(ids[2], "truncated JPEG")
        redo = j.add_redo(j.require(ids[0]), "/arch/0.jpg", {"restore.strength": 0.5})
        j.claim_batch(1, "w")
        j.finish(redo.id, "/out/0.jpg", faces=2)
        assert j.today() == (1, 1, 2)  # the redo is no photo more
        assert j.redos_today() == 1
        assert j.redos_done() == 1
    s = status(done_today=2, restored_today=1, no_face_today=1, redos_today=1, inboxes=["/in"])
    page = live(get(make_site(path, tmp_path, s), "/"))
    assert "2 done today (+1 redo)" in page
    row = re.search(r'<td class="path">/in</td>(.*?)</tr>', page, re.S)
    assert row, page
    assert re.findall(r'data-label="Done today">(\d+)<', row[1]) == ["2"]


def test_a_batch_is_what_was_added_since_the_queue_was_last_empty(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "j.sqlite3"
    with Journal.open(path, clock=clock) as j:
        earlier = [add(j, f"earlier-{i}.jpg") for i in range(3)]
        j.claim_batch(3, "w")
        for job_id in earlier:
            j.finish(job_id, f"/out/{job_id}.jpg", faces=1)
        clock.now += 3600  # the queue was empty for an hour
        first = add(j, "batch-0.jpg")
        j.claim_batch(1, "w")
        rest = [add(j, f"batch-{i}.jpg") for i in range(1, 5)]
        j.finish(first, "/out/b0.jpg", faces=1)  # ended while the others waited: same batch
        j.claim_batch(1, "w")
        j.fail(rest[0], "truncated JPEG")
        batch = make_site(path, tmp_path).journal.current_batch()
        assert batch is not None
        assert (batch.first_id, batch.total, batch.ended, batch.done, batch.failed) == (first, 5, 2, 1, 1)
        s = status(queue={"queued": 3}, throughput={"images_per_min": 3})
        page = live(get(make_site(path, tmp_path, s), "/"))
        assert "Batch: 2 of 5" in page
        assert '<progress max="5" value="2"' in page
        assert "; time left 1 min" in page
        for job_id in rest[1:]:
            j.claim_batch(1, "w")
            j.finish(job_id, f"/out/{job_id}.jpg", faces=0)
        assert make_site(path, tmp_path).journal.current_batch() is None  # through: no batch now


def test_last_errors_are_the_failures_still_to_see_to_each_once(tmp_path: Path) -> None:
    clock = Clock()
    with Journal.open(tmp_path / "j.sqlite3", clock=clock) as j:

        def drop(name: str, content: str | None = None) -> int:
            digest = hashlib.sha256((content or name).encode()).hexdigest()
            job_id = j.add(f"/in/{name}", "/in", name, 10, clock.now, digest).job.id
            j.claim_batch(5, "w")
            return job_id

        fixed = drop("fixed.jpg")
        j.fail(fixed, "a part is missing")
        j.hide(fixed, Hidden.RETRIED, "sent back")  # retried...
        again = drop("fixed.jpg", "fixed.jpg v2")
        j.finish(again, "/out/fixed.jpg", faces=1)  # ...and restored
        dropped_again = drop("dropped.jpg")
        j.fail(dropped_again, "a part is missing")
        j.finish(drop("dropped.jpg", "dropped v2"), "/out/dropped.jpg", faces=1)  # dropped again, restored
        twice = drop("twice.jpg")
        j.fail(twice, "truncated JPEG")
        twice_again = drop("twice.jpg", "twice v2")
        j.fail(twice_again, "truncated JPEG")  # the same file failed twice: listed once
        dismissed = drop("dismissed.jpg")
        j.fail(dismissed, "truncated JPEG")
        j.hide(dismissed, Hidden.DISMISSED, "taken off the Failed page")
        copied = drop("copy-a.jpg", "same bytes")
        j.fail(copied, "a part is missing")
        j.finish(drop("copy-b.jpg", "same bytes"), "/out/copy-b.jpg", faces=1)  # its content restored since
        broken = drop("broken.jpg")
        j.fail(broken, "not an image")
        assert [job.id for job in j.open_failures(5)] == [broken, twice_again]
        assert [job.id for job in j.open_failures(1)] == [broken]


def test_status_prints_the_same_done_numbers_as_the_overview(tmp_path: Path) -> None:
    from gpen_watch.cli.control import format_status
    from gpen_watch.service.status import Status

    Journal.open(tmp_path / "j.sqlite3").close()
    s = status(
        done_today=12, restored_today=9, no_face_today=3, redos_today=3, faces_today=20,
        throughput={"images": 40, "redos": 2, "faces": 50, "failed": 1},
    )  # fmt: skip
    text = format_status(Status.from_json(s))
    page = live(get(make_site(tmp_path / "j.sqlite3", tmp_path, s), "/"))
    assert "done today: 12 photos (+3 redos)" in text
    assert "12 done today (+3 redos)" in page and "12 <small>photos (+3 redos)" in page
    assert "this run: 40 done (+2 redos)" in text
    assert "40 <small>photos done (+2 redos)" in page


def test_the_batch_walk_back_joins_photos_whose_time_in_the_queue_overlapped(tmp_path: Path) -> None:
    clock = Clock()
    with Journal.open(tmp_path / "j.sqlite3", clock=clock) as j:
        a = add(j, "a.jpg")  # a long one: its stretch began the batch
        j.claim_batch(1, "w")
        clock.now += 10
        b = add(j, "b.jpg")
        j.claim_batch(1, "w")
        j.finish(b, "/out/b.jpg", faces=1)
        clock.now += 10
        c = add(j, "c.jpg")  # arrives while a still runs
        j.finish(a, "/out/a.jpg", faces=1)
        browser = make_site(tmp_path / "j.sqlite3", tmp_path).journal
        batch = browser.current_batch()
        assert batch is not None and (batch.first_id, batch.total, batch.waiting) == (a, 3, 1)
        assert browser.current_batch() == batch  # asked again: the same, from what it walked before
        # The queue empties and fills again between two looks: that is a new batch.
        j.claim_batch(1, "w")
        j.finish(c, "/out/c.jpg", faces=1)
        clock.now += 100
        d = add(j, "d.jpg")
        batch = browser.current_batch()
        assert batch is not None and (batch.first_id, batch.total) == (d, 1)


def test_this_run_names_the_start_the_service_recorded_whatever_its_uptime_reads(tmp_path: Path) -> None:
    # Worked out as the clock minus the uptime, the start moved by a second between two readings
    # taken a moment apart, and the live page changed with nothing new to show.
    from gpen_watch.dashboard.render import when

    Journal.open(tmp_path / "j.sqlite3").close()
    started = 1_700_000_000.25
    pages = [
        live(get(make_site(tmp_path / "j.sqlite3", tmp_path, status(uptime_s=up, started_at=started)), "/"))
        for up in (5.0, 5.6, 86_400.9)
    ]
    assert f"Since the service started, {when(started)};" in said(pages[0]), pages[0]
    assert pages[1] == pages[0] and pages[2] == pages[0]
    # A status from a service that recorded no start says so without a made-up time.
    page = live(get(make_site(tmp_path / "j.sqlite3", tmp_path, status()), "/"))
    assert 'Since the service started; "done" as for today.' in said(page), page
