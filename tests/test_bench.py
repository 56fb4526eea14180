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


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_tiny_benchmark_runs_the_engine_on_torch_and_onnx(tmp_path: Path) -> None:
    """--engine torch,onnx: one mode per runtime, each with its stage columns, its ratio to the warm
    loop against the goal, and the ONNX one's pixel difference from torch's output."""
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
            "--engine",
            "torch,onnx",
            "--provider",
            "cpu",
            "--out",
            str(out),
            "--solvay",
            str(tmp_path / "absent.png"),
        ]
    )
    assert rc == 0
    data = json.loads((out / "results.json").read_text())
    assert set(data["modes"]) == {"warm-loop", "engine", "engine[onnx-cpu]"}
    for name, engine in (("engine", "torch"), ("engine[onnx-cpu]", "onnx")):
        (run,) = data["modes"][name]["runs"]
        assert run["ok"] == run["images"] == 2
        assert run["settings"]["engine"] == engine
        # "restore" stays whole beside its split, so nothing reading it changes.
        assert 0 < run["stages"]["generate"] <= run["stages"]["restore"]
    assert data["modes"]["engine[onnx-cpu]"]["runs"][0]["settings"]["provider"] == "cpu"
    # The export happened in a warm-up before the rounds, reported on its own.
    (warm,) = data["warm_up"]
    assert warm["mode"] == "engine[onnx-cpu]"
    assert warm["load_s"] > 0
    assert data["engine_modes_vs_torch_pixels"]["engine[onnx-cpu]"]["photos"] == 2
    text = (out / "table.txt").read_text()
    head = next(line for line in text.splitlines() if "generate faces/s" in line)
    for column in ("photos/s", "detect faces/s", "parse faces/s", "peak RSS MB", "x (2)", "goal"):
        assert column in head
    rows = {line.split("  ")[0]: line for line in text.splitlines() if line.startswith("(3)")}
    onnx_row = rows["(3) gpen-watch engine (restore), onnx-cpu"]
    torch_row = rows["(3) gpen-watch engine (restore)"]
    for row in (onnx_row, torch_row):
        assert "3.0x goal: " in row
        assert ("not met (" in row) or ("met (" in row)
    assert "onnx-cpu vs the torch engine, over 2 photos" in text
    assert "warm-up engine[onnx-cpu]: load with export" in text


def test_engine_options_that_cannot_run_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks.cli import main

    assert main(["--engine", "torch,jax", "--out", str(tmp_path / "r")]) == 2
    assert "--engine jax: choose from torch, onnx" in capsys.readouterr().err
    assert main(["--engine", "onnx", "--provider", "cpu,tpu", "--out", str(tmp_path / "r")]) == 2
    assert "--provider tpu" in capsys.readouterr().err
    assert main(["--parse-precision", "auto,fp8", "--out", str(tmp_path / "r")]) == 2
    assert "--parse-precision fp8: choose from auto, fp32, bf16, int8" in capsys.readouterr().err
    empty = tmp_path / "no-openvino"
    empty.mkdir()
    assert main(["--engine", "onnx", "--openvino-path", str(empty), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert str(empty) in err
    assert "pip install --target" in err


def test_engine_modes_are_named_and_configured_by_runtime(tmp_path: Path) -> None:
    from benchmarks.engine_modes import expand, mode_env, mode_spec
    from benchmarks.models import BenchModels
    from benchmarks.spec import RunSpec

    modes = expand(["torch", "onnx"], ["cpu", "openvino"])
    assert modes == ["engine", "engine[onnx-cpu]", "engine[onnx-openvino]"]
    # Another ParseNet format is a torch mode of its own; the ONNX exports are fp32 only.
    assert expand(["torch", "onnx"], ["cpu"], ("auto", "bf16")) == [
        "engine",
        "engine[parse-bf16]",
        "engine[onnx-cpu]",
    ]
    spec = RunSpec(BenchModels(tmp_path, "x.pth", "retinaface_mobile0.25", False, 64), tmp_path, tmp_path)
    cfg = mode_spec(spec, "engine[onnx-openvino]").restore_config()
    assert (cfg.engine, cfg.provider, cfg.parse_precision) == ("onnx", "openvino", "auto")
    assert mode_spec(spec, "engine").restore_config().engine == "torch"
    cfg = mode_spec(spec, "engine[parse-bf16]").restore_config()
    assert (cfg.engine, cfg.parse_precision) == ("torch", "bf16")
    # Only the OpenVINO mode's process gets the other wheel, first on its path.
    env = mode_env("engine[onnx-openvino]", tmp_path / "ov")
    assert env["PYTHONPATH"].split(":")[0] == str(tmp_path / "ov")
    assert mode_env("engine[onnx-cpu]", tmp_path / "ov") == {}
    assert mode_env("engine[onnx-openvino]", None) == {}


def test_enhancer_counts_the_parsers_seconds_apart(tmp_path: Path) -> None:
    """FaceEnhancer.parse_s: the benchmark's parse / generate split of the "restore" stage."""
    import torch
    from torch import nn

    from benchmarks.engine_modes import split_parse
    from benchmarks.models import TINY_GPEN
    from gpen_watch.restore.engines.gpen_family import runner
    from gpen_watch.restore.nets.gpen_model import build_gpen
    from gpen_watch.restore.runtime.device import placement
    from gpen_watch.restore.stages.enhance import FaceEnhancer

    class Parser(nn.Module):  # ParseNet's interface (a tuple, its class map first), small
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 19, 3, padding=1)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
            return (self.conv(x),)

    torch.manual_seed(0)
    place = placement("cpu", "fp32", False)
    model = runner(build_gpen(TINY_GPEN).eval(), place)
    crops = np.random.default_rng(0).integers(0, 255, (3, 64, 64, 3), dtype=np.uint8)
    plain = FaceEnhancer(model, place, 2)
    plain.enhance(crops)
    assert plain.parse_s == 0.0
    parsing = FaceEnhancer(model, place, 2, Parser().eval(), parser_ready=True)
    _, masks = parsing.enhance(crops)
    assert masks is not None and masks.shape == (3, 64, 64)
    first = parsing.parse_s
    assert first > 0
    parsing.enhance(crops)
    assert parsing.parse_s > first  # a running total over the calls
    split = split_parse({"restore": 2.0, "detect": 1.0}, 0.5)
    assert split == {"restore": 2.0, "detect": 1.0, "parse": 0.5, "generate": 1.5}
    assert split_parse({"detect": 1.0}, 0.0) == {"detect": 1.0}


def test_gpu_script_runs_the_cpu_provider_in_place_of_a_missing_gpu_one() -> None:
    from benchmarks.gpu_onnx import plan

    both = plan(["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"])
    assert [(r.mode, r.why) for r in both] == [("engine[onnx-cuda]", ""), ("engine[onnx-tensorrt]", "")]
    (cpu,) = plan(["CPUExecutionProvider"])  # neither: the CPU provider runs once, saying why
    assert cpu.mode == "engine[onnx-cpu]"
    assert cpu.asked == "cuda"
    assert "CUDAExecutionProvider is not in this onnxruntime" in cpu.why
    assert "pip install onnxruntime-gpu" in cpu.why
    cuda_only = plan(["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert [r.mode for r in cuda_only] == ["engine[onnx-cuda]", "engine[onnx-cpu]"]
    assert cuda_only[1].asked == "tensorrt"


def test_daemon_modes_follow_the_engines_runtimes() -> None:
    from benchmarks.engine_modes import DaemonMode, daemon_modes
    from benchmarks.report import label

    modes = daemon_modes([1, 2], ["engine", "engine[onnx-openvino]"])
    assert modes == ["daemon-1w", "daemon-1w[onnx-openvino]", "daemon-2w", "daemon-2w[onnx-openvino]"]
    assert daemon_modes([1], ["engine[onnx-cpu]"]) == ["daemon-1w[onnx-cpu]"]
    mode = DaemonMode.parse("daemon-2w[onnx-openvino]")
    assert (mode.workers, mode.engine_mode) == (2, "engine[onnx-openvino]")
    assert mode.settings() == {"restore.engine": "onnx", "restore.provider": "openvino"}
    assert DaemonMode.parse("daemon-1w").settings() == {}
    assert label("daemon-2w[onnx-openvino]") == "(4) daemon, 2 workers, onnx-openvino"
    assert label("daemon-1w") == "(4) daemon, 1 worker"
    assert label("engine[onnx-cpu]") == "(3) gpen-watch engine (restore), onnx-cpu"


def test_other_engine_modes_are_compared_with_the_torch_engines_pixels(tmp_path: Path) -> None:
    import cv2

    from benchmarks.engine_report import diff_lines

    img = np.random.default_rng(1).integers(0, 200, (40, 60, 3), dtype=np.uint8)
    other = img.copy()
    other[10, 20, 1] += 7
    for mode, pixels in (("engine", img), ("engine[onnx-cpu]", other)):
        folder = tmp_path / "r0" / mode
        folder.mkdir(parents=True)
        ok, buf = cv2.imencode(".png", pixels)  # lossless, under the photo's own name
        assert ok
        (folder / "a.jpg").write_bytes(buf.tobytes())
    lines, data = diff_lines(tmp_path, ["engine", "engine[onnx-cpu]"], 1, ["a.jpg", "missing.jpg"])
    assert data == {
        "engine[onnx-cpu]": {
            "photos": 1,
            "max": 7,
            "mean": round(7 / img.size, 4),
            "over_one": round(1 / img.size, 6),
        }
    }
    (line,) = lines
    assert "onnx-cpu vs the torch engine, over 1 photos" in line
    assert "largest pixel difference 7 levels of 255" in line
    assert f"{1 / img.size:.3%} of values more than one level off" in line
    # Without the torch engine in the run there is nothing to compare with.
    assert diff_lines(tmp_path, ["engine[onnx-cpu]"], 1, ["a.jpg"]) == ([], {})
