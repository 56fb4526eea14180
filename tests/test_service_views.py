"""The service's side of the photos' views: it names each job's folder (beside the journal), keeps
the newest within dashboard.views_mb, writes none when the dashboard is off; and its status names
the photo each worker is on. A real `gpen-watch run` with the stand-in engine, which writes views
through the engine's own helper (tests/fake_restorer.py)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from test_daemon import Service, drop, services

from gpen_watch.cli import control as control_cli
from gpen_watch.journal import Journal
from gpen_watch.journal.connection import default_path
from gpen_watch.service.status import Status
from gpen_watch.service.views import ViewsKeeper, ended_well_in, views_dir, views_root

__all__ = ["services"]


def _kept(root: Path) -> dict[int, bytes]:
    """Job id -> the after.jpg of each job's views under ``root``."""
    if not root.exists():
        return {}
    return {int(d.name): (d / "after.jpg").read_bytes() for d in root.iterdir() if d.name.isdigit()}


@pytest.mark.slow
def test_views_of_the_newest_photos_are_kept_within_the_limit(
    services: Callable[..., Service], tmp_path: Path
) -> None:
    started = tmp_path / "started"
    started.mkdir()
    svc = services("--set", "dashboard.views_mb=1", env={"FAKE_SLOW": "2", "FAKE_SLOW_STARTED": str(started)})
    svc.inbox.mkdir(parents=True)
    svc.start()
    root = views_root(default_path())
    photos = [bytes([i]) * 400_000 for i in range(4)]
    for i, data in enumerate(photos):
        drop(svc.inbox, f"p{i}.jpg", data)
        svc.wait_done(i + 1)
    kept = _kept(root)
    # 400 kB each: the two newest fit in 1 MB, the older two were dropped.
    assert sorted(kept.values()) == sorted(photos[2:])
    job = max(kept)
    meta = json.loads((views_dir(root, job) / "faces.json").read_text())
    assert [f["restored"] for f in meta["faces"]] == [True]
    # The same photo dropped again gets a copy of the result, and of its views.
    drop(svc.inbox, "p3-again.jpg", photos[3])
    svc.wait_done(5)
    again = _kept(root)
    assert sorted(again.values()) == sorted([photos[3], photos[3]])  # p2's dropped for room
    # The status names the photo a worker is on, and how far it is, as `gpen-watch status` prints it.
    drop(svc.inbox, "IMG_0001 slow.jpg", b"slow photo")
    s = svc.wait(lambda s: any(w["photos"] for w in s["workers"]), what="a photo in the status")
    assert "IMG_0001 slow.jpg: restoring faces 0 of 1" in control_cli.format_status(Status.from_json(s))
    assert s["torch_loaded"] is False
    svc.wait_done(6)
    kept = _kept(root)
    # A restart keeps the views of the jobs the journal has as done.
    assert svc.stop() == 0
    svc.start()
    assert _kept(root) == kept


@pytest.mark.slow
def test_no_views_with_the_dashboard_off(services: Callable[..., Service]) -> None:
    svc = services("--set", "dashboard.enabled=false")
    svc.inbox.mkdir(parents=True)
    svc.start()
    drop(svc.inbox, "a.jpg", b"photo a")
    svc.wait_done(1)
    assert (svc.outbox / "a.jpg").exists()
    assert _kept(views_root(default_path())) == {}


def test_views_dir_takes_job_ids_only(tmp_path: Path) -> None:
    assert views_dir(tmp_path, 12) == tmp_path / "12"
    for bad in ("12", "../12", 1.5, True, None):
        with pytest.raises(ValueError):
            views_dir(tmp_path, bad)  # type: ignore[arg-type]


def test_the_keeper_counts_what_earlier_runs_left_and_drops_the_oldest(tmp_path: Path) -> None:
    root = tmp_path / "views"
    for age, job in enumerate((3, 1, 2)):  # written in this order
        (root / str(job)).mkdir(parents=True)
        (root / str(job) / "after.jpg").write_bytes(b"x" * 400)
        os.utime(root / str(job), (1_000_000 + age, 1_000_000 + age))
    (root / ".4.tmp-0123abcd").mkdir()  # a worker killed while writing
    keeper = ViewsKeeper(root, limit_bytes=1000)
    assert not (root / ".4.tmp-0123abcd").exists()
    assert keeper.total == 800  # the oldest written was dropped at once
    assert sorted(p.name for p in root.iterdir()) == ["1", "2"]
    (root / "5").mkdir()
    (root / "5" / "after.jpg").write_bytes(b"y" * 300)
    keeper.kept(5)
    assert keeper.total == 700
    assert sorted(p.name for p in root.iterdir()) == ["2", "5"]
    keeper.kept(6)  # a job whose worker wrote no views
    assert keeper.total == 700


def test_views_of_jobs_the_journal_has_not_as_done_go_at_start(tmp_path: Path) -> None:
    """A journal started afresh numbers its jobs from 1 again: views an earlier journal's jobs
    left must not be shown as the new jobs'."""
    root = tmp_path / "views"
    for job in (1, 2):
        (root / str(job)).mkdir(parents=True)
        (root / str(job) / "after.jpg").write_bytes(b"old")
    with Journal.open(tmp_path / "journal.sqlite3") as journal:
        photo = tmp_path / "a.jpg"
        photo.write_bytes(b"a")
        added = journal.add(photo, tmp_path, "a.jpg", 1, photo.stat().st_mtime, "0" * 64)
        keeper = ViewsKeeper(root, 1 << 20, ended_well_in(journal))
        assert added.job is not None and added.job.state == "queued"
    assert list(root.iterdir()) == []
    assert keeper.total == 0


class Queue:
    """What the keeper asks of the journal, answered by the test: is a photo waiting, is a job a redo."""

    def __init__(self) -> None:
        self.waiting = False
        self.redos: set[int] = set()

    def busy(self) -> bool:
        return self.waiting

    def is_redo(self, job_id: int) -> bool:
        return job_id in self.redos


def commit_views(keeper: ViewsKeeper, queue: Queue, job: int, *, waiting: bool, redo: bool = False) -> None:
    (keeper.root / str(job)).mkdir(parents=True)
    (keeper.root / str(job) / "after.jpg").write_bytes(b"v" * 400)
    queue.waiting = waiting
    if redo:
        queue.redos.add(job)
    keeper.kept(job)


def test_the_batch_under_way_and_the_one_before_are_kept_past_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "views"
    queue = Queue()
    keeper = ViewsKeeper(root, limit_bytes=1000, batches=queue)

    def kept() -> list[int]:
        return sorted(int(p.name) for p in root.iterdir() if p.name.isdigit())

    for job in range(1, 6):  # a batch of five, 2,000 bytes of views against a limit of 1,000
        commit_views(keeper, queue, job, waiting=job < 5)
    assert kept() == [1, 2, 3, 4, 5] and keeper.total == 2000
    commit_views(keeper, queue, 6, waiting=False)  # the next batch: one photo dropped later
    commit_views(keeper, queue, 7, waiting=False, redo=True)  # a redo asked while reviewing
    assert kept() == [1, 2, 3, 4, 5, 6, 7]  # the batch under review keeps all of its views
    assert keeper.batches == (6, 1)
    again = ViewsKeeper(root, limit_bytes=1000, batches=queue)  # a restart keeps them too
    assert again.batches == (6, 1) and kept() == [1, 2, 3, 4, 5, 6, 7]
    commit_views(again, queue, 8, waiting=False)  # a third batch: the first is an old one now
    assert kept() == [6, 7, 8]  # past the limit still, but all of the last two batches
    commit_views(again, queue, 9, waiting=True)  # a fourth batch, of three
    commit_views(again, queue, 10, waiting=True)
    assert kept() == [8, 9, 10]
    # A disk running out of room: the newest batches' views give way too, the oldest first.
    monkeypatch.setattr("gpen_watch.service.views.FREE_FLOOR", 1 << 62)
    commit_views(again, queue, 11, waiting=False)
    assert kept() == [10, 11] and again.total <= 1000
