"""Jobs as bytes (what a remote worker runs): the same engine, the same output, bit for bit."""

from __future__ import annotations

import os
from pathlib import Path

import cv2
import numpy as np
import pytest
from conftest import TinyModels, tiny_restore_config
from test_restorer import KnownFaces

from gpen_watch.dispatch import payload
from gpen_watch.restore.api import FileJob, FileResult
from gpen_watch.restore.engines.restorer import Restorer


@pytest.fixture()
def photos(tmp_path: Path, astronaut_bgr: np.ndarray, grace_hopper_path: Path) -> list[Path]:
    inbox = tmp_path / "in"
    inbox.mkdir()
    a = inbox / "astronaut.png"
    cv2.imwrite(str(a), astronaut_bgr)
    g = inbox / "grace hopper.jpg"
    g.write_bytes(grace_hopper_path.read_bytes())
    return [a, g]


def test_a_photo_sent_as_bytes_comes_back_bit_identical_to_the_path_job(
    tiny_models: TinyModels, landmarks: dict, photos: list[Path], tmp_path: Path
) -> None:
    by_path, by_bytes = tmp_path / "by_path", tmp_path / "by_bytes"
    by_path.mkdir()
    by_bytes.mkdir()
    cfg = tiny_restore_config(tiny_models)
    path_jobs = [
        FileJob(p, by_path / f".{p.name}.tmp", "same", 90, views=by_path / f"{p.stem}.views") for p in photos
    ]
    byte_jobs = [
        FileJob(p, by_bytes / f".{p.name}.tmp", "same", 90, views=by_bytes / f"{p.stem}.views")
        for p in photos
    ]
    scratch = payload.Scratch(tmp_path / "scratch")
    with Restorer(cfg, threads=2, detector=KnownFaces(landmarks)) as r:
        local = {res.src: res for res in r.restore_files(path_jobs)}
        remote_jobs = [scratch.job(k, payload.pack(j)) for k, j in enumerate(byte_jobs)]
        sent = [scratch.result(res) for res in r.restore_files(remote_jobs)]
    back = {res.result.src.name: res for res in sent}
    assert set(back) == {"astronaut.png", "grace hopper.jpg"}
    for job in byte_jobs:
        res = payload.unpack(back[job.src.name], job)
        want = local[job.src]
        assert res.ok, res.error
        assert (res.src, res.dst) == (job.src, job.dst)
        assert res.faces == want.faces >= 1
        assert (res.format, res.width, res.height) == (want.format, want.width, want.height)
        assert res.notes == want.notes
        # Bit for bit: one restorer in one process, the same two faces in one batch both times.
        assert job.dst.read_bytes() == Path(str(want.dst)).read_bytes()
        # The views, written on the remote side and sent back, are the local worker's.
        assert job.views is not None
        local_views = by_path / f"{job.src.stem}.views"
        got = {
            p.relative_to(job.views).as_posix(): p.read_bytes() for p in job.views.rglob("*") if p.is_file()
        }
        assert {"before.jpg", "after.jpg", "thumb.jpg", "faces.json", "faces/0.after.jpg"} <= set(got)
        assert got == {
            p.relative_to(local_views).as_posix(): p.read_bytes()
            for p in local_views.rglob("*")
            if p.is_file()
        }
    assert list(scratch.root.iterdir()) == []  # every job's folder is gone once its result is read
    scratch.close()
    assert not scratch.root.exists()


def test_unpack_never_overwrites_and_reports_the_outbox_not_the_photo(tmp_path: Path) -> None:
    job = FileJob(tmp_path / "in" / "a.jpg", tmp_path / "out" / ".a.jpg.tmp")
    done = payload.PhotoResult(FileResult(Path("a.jpg"), True, faces=2, format="JPEG"), b"new bytes")
    missing = payload.unpack(done, job)  # the outbox folder is gone
    assert not missing.ok
    assert missing.error_kind == "outbox"
    assert missing.error is not None
    assert str(job.dst) in missing.error
    job.dst.parent.mkdir()
    job.dst.write_bytes(b"somebody else's")
    taken = payload.unpack(done, job)
    assert (taken.ok, taken.error_kind) == (False, "outbox")
    assert job.dst.read_bytes() == b"somebody else's"
    os.unlink(job.dst)
    placed = payload.unpack(done, job)
    assert (placed.ok, placed.faces, placed.dst) == (True, 2, job.dst)
    assert job.dst.read_bytes() == b"new bytes"


def test_views_from_the_network_stay_in_the_jobs_views_folder(tmp_path: Path) -> None:
    job = FileJob(tmp_path / "a.jpg", tmp_path / ".a.jpg.tmp", views=tmp_path / "views" / "3")
    assert payload.pack(_written(job)).views
    assert not payload.pack(FileJob(job.src, job.dst)).views
    ok = FileResult(Path("a.jpg"), True, faces=1, format="JPEG")
    evil = payload.PhotoResult(ok, b"out", {"after.jpg": b"a", "../../evil.jpg": b"x"})
    res = payload.unpack(evil, job)
    assert (res.ok, res.dst) == (True, job.dst)  # the photo is done; only its views are refused
    assert not (tmp_path / "evil.jpg").exists()
    assert not job.views.exists()
    fine = payload.PhotoResult(ok, b"out", {"after.jpg": b"a", "faces/0.before.jpg": b"b"})
    os.unlink(job.dst)
    payload.unpack(fine, job)
    assert (job.views / "faces" / "0.before.jpg").read_bytes() == b"b"


def _written(job: FileJob) -> FileJob:
    job.src.write_bytes(b"photo")
    return job


def test_a_failed_remote_result_keeps_its_reason_and_writes_nothing(tmp_path: Path) -> None:
    job = FileJob(tmp_path / "a.jpg", tmp_path / ".a.jpg.tmp")
    bad = FileResult(Path("a.jpg"), False, error="not an image", error_kind="unsupported")
    res = payload.unpack(payload.PhotoResult(bad), job)
    assert (res.ok, res.error, res.error_kind, res.src) == (False, "not an image", "unsupported", job.src)
    assert not job.dst.exists()


def test_an_original_that_cannot_be_read_is_named_in_the_failure(tmp_path: Path) -> None:
    job = FileJob(tmp_path / "gone.jpg", tmp_path / ".gone.jpg.tmp")
    with pytest.raises(OSError) as info:
        payload.pack(job)
    res = payload.unreadable(job, info.value)
    assert not res.ok
    assert res.error == f"{job.src}: cannot read the file (No such file or directory)"


def test_a_name_from_the_network_cannot_leave_the_scratch_folder(tmp_path: Path) -> None:
    scratch = payload.Scratch(tmp_path / "scratch")
    job = scratch.job(3, payload.PhotoJob("../../etc/evil.jpg", b"x"))
    assert job.src == tmp_path / "scratch" / "3" / "evil.jpg"
    assert not (tmp_path / "etc").exists()
    back = scratch.result(FileResult(job.src, False, error="not an image"))
    assert back.result.src == Path("../../etc/evil.jpg")  # reported under the name it came with
    assert back.data is None
    scratch.close()


def test_a_redo_sent_to_a_remote_worker_keeps_its_picked_faces(tmp_path: Path) -> None:
    label = "this redo's settings (faces 0, 2)"  # what its messages call its settings
    job = _written(
        FileJob(tmp_path / "a.jpg", tmp_path / ".a.jpg.tmp", face_ids=(0, 2), settings_label=label)
    )
    photo = payload.pack(job)
    assert photo.face_ids == (0, 2)
    remote = payload.Scratch(tmp_path / "scratch").job(7, photo)
    assert (remote.face_ids, remote.settings_label) == ((0, 2), label)
    assert (
        payload.Scratch(tmp_path / "scratch2").job(8, payload.pack(FileJob(job.src, job.dst))).face_ids
        is None
    )
