"""What each worker is doing, per photo: the engine's stages, the heartbeat that carries them, the
pool's status rows and the lines `gpen-watch status` prints."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
from conftest import TinyModels, tiny_restore_config
from test_dispatch import make_pool, make_tasks, run_until
from test_restorer import ThreeFaces
from test_upscale import TINY, _save

from gpen_watch.cli import control as control_cli
from gpen_watch.dispatch import pool
from gpen_watch.restore.api import FileJob, PhotoProgress, Stage
from gpen_watch.restore.engines.restorer import Restorer
from gpen_watch.service.status import PhotoStatus, Status, WorkerStatus


class _Recorded(dict):  # type: ignore[type-arg]
    """The restorer's table of photos, keeping every change made to it (from any thread)."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.seen: list[PhotoProgress] = []

    def __setitem__(self, key: object, value: PhotoProgress) -> None:
        with self.lock:
            self.seen.append(value)
        super().__setitem__(key, value)


def test_the_restorer_reports_each_stage_of_a_photo_with_faces_in_order(
    tiny_models: TinyModels, landmarks: dict, astronaut_bgr: np.ndarray, tmp_path: Path
) -> None:
    src = tmp_path / "astronaut.png"
    cv2.imwrite(str(src), astronaut_bgr)
    x2 = tmp_path / "tiny-rrdb-x2.pth"
    _save(TINY[2], x2)
    cfg = tiny_restore_config(tiny_models, face_batch=1, upscale=2, upscale_model=str(x2))
    detector = ThreeFaces(landmarks)
    seen_live: list[tuple[PhotoProgress, ...]] = []
    with Restorer(cfg, threads=2, detector=detector) as r:
        r.upscaler.tile = 256  # four tile batches on the 512 px photo
        real = r.enhancer.enhance

        def spy(crops: np.ndarray, *rest: object):  # type: ignore[no-untyped-def]
            seen_live.append(r.progress)  # what a heartbeat would read now, from another thread
            return real(crops, *rest)  # type: ignore[arg-type]

        r.enhancer.enhance = spy  # type: ignore[method-assign]
        recorded = _Recorded()
        r._photos = recorded
        (res,) = list(r.restore_files([FileJob(src, tmp_path / "out.png")]))
        assert r.progress == ()  # handed back: no longer held
    assert res.ok, res.error
    assert res.faces == 3
    stages = [(p.stage, p.done, p.total) for p in recorded.seen]
    assert all(p.src == str(src) for p in recorded.seen)
    upscaling = [s for s in stages if s[0] == Stage.UPSCALING]
    tiles = upscaling[0][2]
    assert tiles > 1
    assert upscaling == [(Stage.UPSCALING, i, tiles) for i in range(tiles)]
    assert stages == [
        (Stage.WAITING, 0, 0),
        (Stage.DECODING, 0, 0),
        (Stage.WAITING, 0, 0),
        (Stage.DETECTING, 0, 0),
        *upscaling,
        (Stage.RESTORING, 0, 3),
        (Stage.RESTORING, 1, 3),
        (Stage.RESTORING, 2, 3),
        (Stage.WRITING, 0, 0),
    ]
    # One face per pass: before each, the photo is seen restoring with the faces done so far.
    assert seen_live == [(PhotoProgress(str(src), Stage.RESTORING, k, 3),) for k in range(3)]


def test_a_heartbeat_names_the_photo_a_real_worker_is_on(tmp_path: Path) -> None:
    started = tmp_path / "started"
    started.mkdir()
    p = make_pool(tmp_path, env={"FAKE_SLOW": "30", "FAKE_SLOW_STARTED": str(started)})
    try:
        (task,) = make_tasks(tmp_path, ["IMG_0001 slow.jpg"], start=7)
        p.submit([task])
        run_until(p, lambda ev: (started / "IMG_0001 slow.jpg").exists())
        deadline = time.monotonic() + 10
        while not p.snapshot()[0]["photos"]:
            assert time.monotonic() < deadline, p.snapshot()
            p.poll(0.2)
        (row,) = p.snapshot()[0]["photos"]
        assert row == {"job_id": 7, "name": "IMG_0001 slow.jpg", "stage": "restoring", "done": 0, "total": 1}
        status = Status.from_json({"workers": p.snapshot()})
        assert status.workers[0].photos == (PhotoStatus(7, "IMG_0001 slow.jpg", "restoring", 0, 1),)
    finally:
        p.begin_stop()
        p.kill_all()


def test_a_photo_no_longer_held_is_not_shown(tmp_path: Path) -> None:
    p = make_pool(tmp_path)
    try:
        tasks = make_tasks(tmp_path, ["a.jpg"])
        p.submit(tasks)
        run_until(p, lambda ev: any(e.kind == pool.DONE for e in ev))
        assert p.snapshot()[0]["photos"] == []
    finally:
        p.begin_stop()
        p.kill_all()


@pytest.mark.parametrize(
    ("photo", "line"),
    [
        (PhotoStatus(1, "IMG_0001.jpg", "restoring", 3, 12), "IMG_0001.jpg: restoring faces 3 of 12"),
        (PhotoStatus(2, "IMG_0002.jpg", "upscaling", 1, 6), "IMG_0002.jpg: upscaling, tile 2 of 6"),
        (PhotoStatus(3, "IMG_0003.jpg", "detecting"), "IMG_0003.jpg: detecting faces"),
        (PhotoStatus(4, "IMG_0004.jpg", "waiting"), "IMG_0004.jpg: waiting its turn"),
        (PhotoStatus(5, "IMG_0005.jpg", "decoding"), "IMG_0005.jpg: reading the file"),
        (PhotoStatus(6, "IMG_0006.jpg", "writing"), "IMG_0006.jpg: writing the result"),
    ],
)
def test_status_prints_one_line_per_photo_under_its_worker(photo: PhotoStatus, line: str) -> None:
    busy = WorkerStatus(name="cpu#0", device="cpu", state="busy", in_flight=1, photos=(photo,))
    idle = WorkerStatus(name="cpu#1", device="cpu", state="idle")
    lines = control_cli.format_status(Status(workers=(busy, idle))).splitlines()
    at = next(i for i, text in enumerate(lines) if text.lstrip().startswith("cpu#0"))
    where = lines[at].index("cpu", lines[at].index("cpu#0") + len("cpu#0"))  # where it runs
    assert lines[at + 1] == " " * where + line  # under where its worker runs
    assert lines[at + 2].lstrip().startswith("cpu#1")


def test_photos_waiting_their_turn_share_one_line() -> None:
    photos = (
        PhotoStatus(1, "a.jpg", "restoring", 1, 2),
        PhotoStatus(2, "b.jpg", "waiting"),
        PhotoStatus(3, "c.jpg", "waiting"),
        PhotoStatus(4, "d.jpg", "decoding"),
    )
    worker = WorkerStatus(name="cuda:0", device="GPU", state="busy", in_flight=4, photos=photos)
    assert control_cli.photo_lines(worker) == [
        "a.jpg: restoring faces 1 of 2",
        "d.jpg: reading the file",
        "2 more photos waiting their turn",
    ]
