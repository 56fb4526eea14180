"""The benchmark in its quickest form, so it keeps working: tiny models, two small photos, modes 2-3."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks import solvay
from benchmarks.known_faces import FaceTable
from benchmarks.photos import build_photo_set, find_solvay


def test_known_faces_follow_the_photo_size(tmp_path: Path) -> None:
    photos = build_photo_set(tmp_path / "p", 3, 0.2, solvay=tmp_path / "absent.png")
    assert [p.source for p in photos.photos] == ["astronaut", "grace-hopper", "astronaut"]
    assert any("Solvay" in n for n in photos.notes)
    assert len({p.path.read_bytes() for p in photos.photos}) == 3  # no duplicates for the journal
    table = FaceTable(photos.faces)
    small = table.faces_for(512, 512)
    big = table.faces_for(2048, 2048)
    assert len(small) == 1
    assert np.allclose(big[0].landmarks, small[0].landmarks * 4, atol=1e-3)
    assert np.allclose(small[0].landmarks[0], [205.0, 101.7], atol=0.05)
    assert table.faces_for(500, 900) == []  # no source has that shape


def test_solvay_marks_are_inside_the_photo() -> None:
    lm = solvay.landmarks()
    assert lm.shape == (29, 5, 2)
    w, h = solvay.SIZE_WH
    assert (lm[..., 0] > 0).all()
    assert (lm[..., 0] < w).all()
    assert (lm[..., 1] > 0).all()
    assert (lm[..., 1] < h).all()
    # Eyes level and left of right, mouth below the eyes.
    assert (lm[:, 0, 0] < lm[:, 1, 0]).all()
    assert (lm[:, 3, 1] > lm[:, 0, 1]).all()
    path = find_solvay()
    if path is not None:  # the shared photo is the one the marks were made on
        import cv2

        assert cv2.imread(str(path)).shape[1::-1] == solvay.SIZE_WH


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_quickest_benchmark_runs_modes_2_and_3(tmp_path: Path) -> None:
    from benchmarks.cli import main

    out = tmp_path / "results"
    rc = main(
        [
            "--quick",
            "--tiny",
            "--images",
            "2",
            "--megapixels",
            "0.3",
            "--modes",
            "warm-loop,engine",
            "--out",
            str(out),
            "--solvay",
            str(tmp_path / "absent.png"),
        ]
    )
    assert rc == 0
    data = json.loads((out / "results.json").read_text())
    assert set(data["modes"]) == {"warm-loop", "engine"}
    for mode in data["modes"].values():
        (run,) = mode["runs"]
        assert run["ok"] == run["images"] == 2
        assert run["faces"] == 2  # one known face per portrait
        assert mode["median"]["images_per_s"] > 0
        assert {"decode", "detect", "align", "restore", "paste", "encode"} <= set(run["stages"])
    assert "known landmarks" in " ".join(data["notes"])
    assert (out / "throughput.png").stat().st_size > 1000
    assert "engine" in (out / "table.txt").read_text()
    # The engine's resident memory as each stage ended, for the memory budget's figures.
    rss = data["modes"]["engine"]["rss_at_stage_end_mb"]
    assert {"decode", "align", "restore", "paste", "encode", "peak"} <= set(rss)
    assert 0 < rss["decode"] <= rss["peak"]
    assert "RSS MB at stage end, (3) gpen-watch engine" in (out / "table.txt").read_text()


@pytest.mark.slow
def test_engine_mode_takes_prescale_from_the_engines_timings(tmp_path: Path) -> None:
    """The pre-scale column comes from the engine's own FileResult.timings, not from a patched loader."""
    from benchmarks.engine import run_engine
    from benchmarks.models import write_models
    from benchmarks.spec import RunSpec

    photos = build_photo_set(tmp_path / "p", 2, 0.3, solvay=tmp_path / "absent.png")
    photos.save(tmp_path / "photos.json")
    models = write_models(tmp_path / "models", tiny=True)
    spec = RunSpec(models, tmp_path / "photos.json", tmp_path / "out", max_side=256, threads=2, io_threads=1)
    run = run_engine(spec, tmp_path / "out")
    assert run.ok == 2
    assert run.faces == 2  # the known faces follow the photos down to 256 px
    assert run.stages["prescale"] > 0
    assert run.stages["decode"] > 0
    assert run.generator_s == run.stages["restore"] > 0


def test_prepared_detection_equals_direct_detection() -> None:
    """The engine shrinks photos for the detector on its decode threads (``prepare``); the benchmark
    counts on that path costing and finding the same as ``detect`` on the photo itself."""
    import torch

    from gpen_watch.restore.nets.retinaface import build_retinaface
    from gpen_watch.restore.stages.detect import FaceDetector

    torch.manual_seed(0)
    net = build_retinaface("mobile0.25")
    with torch.no_grad():  # sharpen the random class head so a few boxes pass the threshold
        for head in net.ClassHead:
            head.conv1x1.weight.mul_(20000)
            head.conv1x1.bias.zero_()
    det = FaceDetector(net.eval(), torch.device("cpu"), max_side=320, shrink_above=320)
    rng = np.random.default_rng(5)
    img = np.kron(rng.integers(0, 255, (64, 80, 3), dtype=np.uint8), np.ones((8, 8, 1), np.uint8))
    prepared = det.prepare(img)
    assert prepared.shape == (512, 640)
    assert max(prepared.small.shape[:2]) == 320
    direct, split = det.detect([img])[0], det.detect([prepared])[0]
    assert direct
    assert len(direct) == len(split)
    np.testing.assert_allclose([f.box for f in direct], [f.box for f in split])


def test_real_upstream_gets_the_known_faces_in_its_own_format(tmp_path: Path) -> None:
    from benchmarks.real_upstream import upstream_faces

    photos = build_photo_set(tmp_path / "p", 1, 0.2, solvay=tmp_path / "absent.png")
    table = FaceTable(photos.faces)
    (face,) = table.faces_for(512, 512)
    dets, landms = upstream_faces(table, 512, 512)
    assert dets.shape == (1, 5)
    assert dets[0, 4] >= 0.9  # upstream skips scores under 0.9
    # Upstream reads each row as np.reshape(row, (2, 5)): five x's, then five y's.
    assert np.allclose(np.reshape(landms[0], (2, 5)).T, face.landmarks)
    assert np.allclose(dets[0, :4], face.box)
    empty = upstream_faces(table, 500, 900)
    assert empty[0].shape == (0, 5)
    assert empty[1].shape == (0, 10)


def test_face_box_psnr_compares_only_the_faces(tmp_path: Path) -> None:
    import cv2

    from benchmarks.real_upstream_mode import face_box_psnr

    photos = build_photo_set(tmp_path / "p", 1, 0.2, solvay=tmp_path / "absent.png")
    photos.save(tmp_path / "photos.json")
    src = cv2.imread(str(photos.photos[0].path))
    (face,) = FaceTable(photos.faces).faces_for(*src.shape[:2])
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    changed = src.copy()
    changed[:5] = 255 - changed[:5]  # outside the face box: must not count
    x1, y1 = face.box[:2].astype(int)
    changed[y1 + 2, x1 + 2] = (int(changed[y1 + 2, x1 + 2, 0]) + 16) % 256  # one pixel inside
    # Lossless content under the photos' .jpg names (cv2.imread reads by content): JPEG would
    # spread the one-pixel change.
    ok, buf = cv2.imencode(".png", changed)
    assert ok
    (tmp_path / "b" / photos.photos[0].path.name).write_bytes(buf.tobytes())
    ok, buf = cv2.imencode(".png", src)
    (tmp_path / "a" / photos.photos[0].path.name).write_bytes(buf.tobytes())
    agree = face_box_psnr(tmp_path / "photos.json", tmp_path / "a", tmp_path / "b")
    assert agree is not None
    assert agree.faces == 1
    assert 40 < agree.min_db < 99  # one changed pixel in the box: high but finite
    same = face_box_psnr(tmp_path / "photos.json", tmp_path / "a", tmp_path / "a")
    assert same is not None
    assert same.min_db == 99.0


def test_upstream_option_names_a_folder_that_is_not_gpen(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks.cli import main

    rc = main(["--upstream", str(tmp_path), "--out", str(tmp_path / "r")])
    assert rc == 2
    err = capsys.readouterr().err
    assert str(tmp_path) in err
    assert "not a checkout of yangxy/GPEN" in err
    assert "--upstream" in err


def test_detect_real_mode_reports_the_faces_the_real_detector_finds(tmp_path: Path) -> None:
    """--detect-real: the models hold the trained MobileNet as the store's file, and the benchmark's
    detector reports what that network finds in the photo instead of the known marks."""
    import torch

    from benchmarks.cli import build_parser
    from benchmarks.engine import face_table
    from benchmarks.known_faces import KnownFaces
    from benchmarks.models import write_models
    from benchmarks.photos import SHARED_DETECTOR, PhotoSet, find_shared
    from benchmarks.spec import RunSpec
    from gpen_watch.imaging.load import load_image
    from gpen_watch.restore.engines import verify
    from gpen_watch.restore.stages.detect import FaceDetector

    weights, photo = find_shared(SHARED_DETECTOR), find_solvay()
    if weights is None or photo is None:
        pytest.skip("../shared (real detector weights, Solvay photo) is not beside the repository")
    assert build_parser().parse_args(["--detect-real"]).detect_real == Path("")
    models = write_models(tmp_path / "models", tiny=True, real_detector=weights)
    assert models.detector == "retinaface_mobile0.25"
    spec = RunSpec(models, tmp_path / "set.json", tmp_path / "out", detect_real=True)
    assert face_table(spec, PhotoSet(tmp_path, [], {}, [])) is None
    net = verify.load_detector(models.detector, models.model_dir, device="cpu", download=False)
    detector = KnownFaces(FaceDetector(net, torch.device("cpu")), None)
    assert len(detector.detect([load_image(photo).bgr8])[0]) == 29  # the marks count 29 too
