"""Each photo's views (what the dashboard shows of it): written by the engine while it holds the
pixels, replaced whole, none for a failed photo; and every way a detected face is left out has a
reason of its own."""

from __future__ import annotations

import io
import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from conftest import TinyModels, tiny_restore_config
from PIL import Image
from test_restorer import ThreeFaces
from test_skip_faces import HW, _face

from gpen_watch.base.fsutil import replace_folder
from gpen_watch.config import RestoreConfig
from gpen_watch.restore.api import FileJob
from gpen_watch.restore.engines.restorer import Restorer
from gpen_watch.restore.stages.faces import LeftOut, plausible, select
from gpen_watch.restore.stages.views import PREVIEW_SIDE, THUMB_SIDE


def _size(data: bytes) -> tuple[int, int]:
    with Image.open(io.BytesIO(data)) as im:
        return im.size


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture()
def wide_photo(tmp_path: Path, astronaut_bgr: np.ndarray) -> tuple[Path, np.ndarray]:
    """The astronaut (512 x 512) beside a grey band: 2000 x 512, so the previews are shrunk."""
    wide = np.full((512, 2000, 3), 128, np.uint8)
    wide[:, :512] = astronaut_bgr
    src = tmp_path / "in" / "wide.png"
    src.parent.mkdir()
    cv2.imwrite(str(src), wide)
    return src, wide


class ThreeFacesWide(ThreeFaces):
    """ThreeFaces' faces, on the wide photo."""

    def __init__(self, landmarks: dict) -> None:
        super().__init__(landmarks)
        self.by_shape[(512, 2000)] = (self.faces, None)


def test_views_of_a_photo_with_faces_restored_and_left_out(
    tiny_models: TinyModels, landmarks: dict, wide_photo: tuple[Path, np.ndarray], tmp_path: Path
) -> None:
    src, wide = wide_photo
    views = tmp_path / "views" / "12"
    detector = ThreeFacesWide(landmarks)
    cfg = tiny_restore_config(tiny_models, faces="largest")
    with Restorer(cfg, threads=2, detector=detector) as r:
        (res,) = r.restore_files([FileJob(src, tmp_path / "out.png", views=views)])
    assert res.ok, res.error
    assert "views" in res.timings
    files = _files(views)
    assert set(files) == {
        "before.jpg",
        "after.jpg",
        "thumb.jpg",
        "faces.json",
        "faces/0.before.jpg",
        "faces/0.after.jpg",
        "faces/1.before.jpg",
        "faces/2.before.jpg",
    }
    # The same geometry both sides, long side PREVIEW_SIDE; the thumbnail THUMB_SIDE.
    assert _size(files["before.jpg"]) == _size(files["after.jpg"]) == (PREVIEW_SIDE, 410)
    assert _size(files["thumb.jpg"]) == (THUMB_SIDE, 82)
    meta = json.loads(files["faces.json"])
    assert (meta["width"], meta["height"], meta["source_width"], meta["source_height"]) == (
        1600,
        410,
        2000,
        512,
    )
    scale = 1600 / 2000
    assert [f["index"] for f in meta["faces"]] == [0, 1, 2]
    assert [f["restored"] for f in meta["faces"]] == [True, False, False]
    assert meta["faces"][0]["reason"] is None
    largest = "not the largest face (restore.faces = largest)"
    assert [f["reason"] for f in meta["faces"][1:]] == [largest, largest]
    for got, face in zip(meta["faces"], detector.faces):
        assert got["box"] == pytest.approx([float(v) * scale for v in face.box], abs=0.06)
        assert got["score"] == pytest.approx(face.score, abs=1e-4)
    # The restored face's crops are the generator's input and output, at its resolution (64 px).
    before_face = cv2.imdecode(np.frombuffer(files["faces/0.before.jpg"], np.uint8), cv2.IMREAD_COLOR)
    after_face = cv2.imdecode(np.frombuffer(files["faces/0.after.jpg"], np.uint8), cv2.IMREAD_COLOR)
    assert before_face.shape == after_face.shape == (64, 64, 3)
    assert np.abs(before_face.astype(int) - after_face).mean() > 10  # the (random) generator's
    # A face left out: its box cut from the photo, never larger than the model's crops.
    left = cv2.imdecode(np.frombuffer(files["faces/2.before.jpg"], np.uint8), cv2.IMREAD_COLOR)
    assert max(left.shape[:2]) <= 64
    # before.jpg is the photo as decoded, after.jpg the result (JPEG q85: within its error).
    before = cv2.imdecode(np.frombuffer(files["before.jpg"], np.uint8), cv2.IMREAD_COLOR).astype(int)
    after = cv2.imdecode(np.frombuffer(files["after.jpg"], np.uint8), cv2.IMREAD_COLOR).astype(int)
    want = cv2.resize(wide, (1600, 410), interpolation=cv2.INTER_AREA).astype(int)
    assert np.abs(before - want).mean() < 3
    x1, y1, x2, y2 = (int(v * scale) for v in detector.faces[0].box)
    assert np.abs(after[y1:y2, x1:x2] - before[y1:y2, x1:x2]).mean() > 5
    assert np.abs(after[:, 600:] - before[:, 600:]).mean() < 3  # the grey band is untouched


def test_a_failed_photo_gets_no_views_and_a_new_set_replaces_the_old(
    tiny_models: TinyModels, landmarks: dict, wide_photo: tuple[Path, np.ndarray], tmp_path: Path
) -> None:
    src, _ = wide_photo
    bad = tmp_path / "in" / "bad.jpg"
    bad.write_bytes(b"not a photo")
    views = tmp_path / "views"
    old = views / "1"
    replace_folder(old, {"stale.txt": b"x", "faces/9.before.jpg": b"y"})
    with Restorer(tiny_restore_config(tiny_models), threads=2, detector=ThreeFacesWide(landmarks)) as r:
        results = {
            res.src.name: res
            for res in r.restore_files(
                [
                    FileJob(bad, tmp_path / "bad.out", views=views / "2"),
                    FileJob(src, tmp_path / "out.png", views=old),
                ]
            )
        }
    assert not results["bad.jpg"].ok
    assert not (views / "2").exists()
    assert results["wide.png"].ok
    files = _files(old)
    assert "stale.txt" not in files
    assert "faces/9.before.jpg" not in files
    assert {"before.jpg", "after.jpg", "faces/2.after.jpg"} <= set(files)
    assert sorted(p.name for p in views.iterdir()) == ["1"]  # no temp folder left beside it


def test_replace_folder_refuses_names_that_leave_it(tmp_path: Path) -> None:
    for name in ("../evil", "/etc/evil", "a/../../evil", "", "c:evil"):
        with pytest.raises(ValueError):
            replace_folder(tmp_path / "v", {name: b"x"})
    assert not (tmp_path / "v").exists()
    assert list(tmp_path.iterdir()) == []


def _reasons(faces: list, left_out: list[LeftOut]) -> list[str | None]:
    why = {id(f): r for f, r in left_out}
    return [why.get(id(f)) for f in faces]


@pytest.mark.parametrize(
    ("changes", "reasons"),
    [
        ({}, [None, None, "a second detection of a face restored once", None, "under 8 px in the result, too small for restoring to change"]),
        ({"min_face": 60}, [None, None, "a second detection of a face restored once", "smaller than restore.min_face = 60", "under 8 px in the result, too small for restoring to change"]),
        ({"faces": "center"}, ["not the face nearest the centre (restore.faces = center)", None, "a second detection of a face restored once", "not the face nearest the centre (restore.faces = center)", "under 8 px in the result, too small for restoring to change"]),
        ({"max_faces": 1}, [None, "not among the 1 largest (restore.max_faces = 1)", "a second detection of a face restored once", "not among the 1 largest (restore.max_faces = 1)", "under 8 px in the result, too small for restoring to change"]),
        ({"strength": 0.0}, ["restore.strength = 0 restores no face", "restore.strength = 0 restores no face", "a second detection of a face restored once", "restore.strength = 0 restores no face", "under 8 px in the result, too small for restoring to change"]),
    ],
)  # fmt: skip
def test_every_face_left_out_has_its_reason(changes: dict, reasons: list[str | None]) -> None:
    big, mid = _face(100, 100, 300), _face(450, 400, 200)
    faces = [big, mid, _face(104, 102, 300, score=0.9), _face(800, 800, 60), _face(10, 900, 6)]
    left_out: list[LeftOut] = []
    chosen = select(faces, HW, RestoreConfig(**changes), [], left_out)
    assert _reasons(faces, left_out) == reasons
    assert [f for f in faces if not any(f is g for g, _ in left_out)] == chosen


def test_a_detection_that_cannot_be_a_face_says_why() -> None:
    good = _face(100, 100, 300)
    broken = _face(100, 100, 300)
    broken.landmarks[:] = np.nan
    left_out: list[LeftOut] = []
    kept = plausible([good, broken], HW, [], left_out)
    assert kept == [good]
    ((face, reason),) = left_out
    assert face is broken
    assert reason.startswith("cannot be a face in this photo (")


@pytest.mark.slow
def test_the_views_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import views as bench

    assert bench.main(["--rounds", "1", "--faces", "2"]) == 0
    out = capsys.readouterr().out
    assert "2 faces restored" in out
    assert "views cost: +" in out


def test_a_detection_without_numbers_gets_an_empty_box_and_no_crop(tmp_path: Path) -> None:
    from gpen_watch.imaging.load import load_image
    from gpen_watch.restore.api import FileResult
    from gpen_watch.restore.stages.staged import StagedPhoto
    from gpen_watch.restore.stages.views import view_files

    src = tmp_path / "grey.png"
    cv2.imwrite(str(src), np.full((40, 60, 3), 90, np.uint8))
    broken = _face(10, 10, 20)
    broken.box[:] = np.nan
    work = StagedPhoto(FileJob(src, tmp_path / "out.png"), FileResult(src, False))
    work.image = load_image(src)
    work.shown = [(broken, "cannot be a face in this photo (face box is not finite)")]
    files = view_files(work, work.image.pixels)
    meta = json.loads(files["faces.json"])
    assert meta["faces"] == [
        {
            "index": 0,
            "box": [0.0, 0.0, 0.0, 0.0],
            "score": 0.99,
            "restored": False,
            "reason": "cannot be a face in this photo (face box is not finite)",
        }
    ]
    assert not [name for name in files if name.startswith("faces/")]
    assert (meta["width"], meta["height"]) == (60, 40)  # never enlarged
