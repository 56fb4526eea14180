"""Static int8 quantisation of an ONNX export (restore.engines.onnx_quant, issue 36): the int8
model ONNX Runtime runs holds int8 weights and gives the fp32 model's output within a bound; its
cache beside the fp32 export is reused while current and made again when the export changes, the
calibration changes, or the int8 file is not whole. Skipped where the `onnx` extra is not installed.

The network is the project's ParseNet at 64 px (random weights: ten residual blocks at 32 px, the
real architecture's layers), exported once for the module (~5 s on 2 cores); it is calibrated on
real faces that ship in scikit-image and matplotlib, fitted to 64 px. How close int8 comes is
checked on the one network with real weights here, RetinaFace-MobileNet0.25 (../shared/fixtures),
at 320 px: random weights say little about it (see the first test).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
pytest.importorskip("onnxscript")

import cv2
import onnx
import onnx.numpy_helper
import onnxruntime as ort
import torch

from gpen_watch.restore.engines import onnx_derived, onnx_quant
from gpen_watch.restore.engines.onnx_quant import Calibration, cached_quantized

SIDE = 64
DET_SIDE = 320
SHARED = Path(__file__).resolve().parents[1].parent / "shared"
REAL_DETECTOR = SHARED / "fixtures" / "retinaface_mobilenet0.25_real.pth"
needs_shared = pytest.mark.skipif(
    not REAL_DETECTOR.is_file(), reason="../shared (the real RetinaFace weights) is not beside the repository"
)


def _hopper() -> np.ndarray:
    """matplotlib's photo of Grace Hopper, RGB uint8."""
    cbook = pytest.importorskip("matplotlib.cbook")
    with cbook.get_sample_data("grace_hopper.jpg") as f:
        bgr = cv2.imdecode(np.frombuffer(f.read(), np.uint8), cv2.IMREAD_COLOR)
    return np.ascontiguousarray(bgr[..., ::-1])


def _faces() -> np.ndarray:
    """(6, 3, 64, 64) float32 in [-1, 1]: real faces (the astronaut, Grace Hopper), each as cut,
    mirrored and cut a little wider."""
    skdata = pytest.importorskip("skimage.data")
    astronaut = skdata.astronaut()  # RGB uint8 512x512; the face is around (y 20..220, x 140..330)
    hopper = _hopper()
    crops = []
    for img, (y0, y1, x0, x1) in ((astronaut, (20, 220, 140, 330)), (hopper, (60, 360, 90, 420))):
        for pad in (0, 30):
            crop = img[max(0, y0 - pad) : y1 + pad, max(0, x0 - pad) : x1 + pad]
            crops.append(cv2.resize(crop, (SIDE, SIDE), interpolation=cv2.INTER_AREA))
        crops.append(crops[-2][:, ::-1])
    arr = np.stack(crops).transpose(0, 3, 1, 2).astype(np.float32) / 127.5 - 1
    return np.ascontiguousarray(arr)


def _calibration(faces: np.ndarray, label: str = "test-faces") -> Calibration:
    return Calibration(label, [{"x": f[None]} for f in faces])


def _export(seed: int, dst: Path) -> Path:
    from gpen_watch.restore.nets.fold import drop_image_head, fold_batchnorm
    from gpen_watch.restore.nets.parsenet import ParseNet

    torch.manual_seed(seed)
    net = ParseNet(in_size=SIDE, out_size=SIDE).eval()
    fold_batchnorm(net)
    drop_image_head(net)
    with torch.no_grad():
        program = torch.onnx.export(
            net, (torch.zeros(1, 3, SIDE, SIDE),), dynamo=True, opset_version=18, input_names=["x"]
        )
    assert program is not None
    program.save(str(dst), external_data=False)
    return dst


@pytest.fixture(scope="module")
def fp32_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _export(0, tmp_path_factory.mktemp("fp32") / "parsenet.onnx")


@pytest.fixture
def fp32(fp32_export: Path, tmp_path: Path) -> Path:
    """A copy of the export in a folder of the test's own: the int8 cache goes beside it."""
    return Path(shutil.copy(fp32_export, tmp_path / "parsenet.onnx"))


def _run(path: Path, faces: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return np.concatenate([session.run(None, {"x": f[None]})[0] for f in faces])


def test_the_int8_model_has_int8_weights_and_runs(fp32: Path) -> None:
    faces = _faces()
    calib, held_out = faces[:4], faces[4:]  # measured on Grace Hopper's wider and mirrored crops
    made = cached_quantized(fp32, _calibration(calib))
    assert made.made and made.path == fp32.with_name("parsenet.int8.onnx")
    graph = onnx.load(str(made.path)).graph
    ops = {n.op_type for n in graph.node}
    assert {"QuantizeLinear", "DequantizeLinear", "Conv"} <= ops
    int8 = [t for t in graph.initializer if t.data_type == onnx.TensorProto.INT8]
    # Every convolution's weights are int8, per output channel (one scale per channel).
    convs = [n for n in graph.node if n.op_type == "Conv"]
    assert len(int8) >= len(convs) > 20
    assert made.path.stat().st_size < fp32.stat().st_size / 3  # 1 byte a weight, not 4

    ref, got = _run(fp32, held_out), _run(made.path, held_out)
    assert ref.shape == got.shape == (len(held_out), 19, SIDE, SIDE)
    assert np.abs(got - ref).max() > 0  # a different computation, not the fp32 file again
    # How close is for the real detector below: with random weights (ParseNet's are, here) the
    # logits are small sums of large terms, so 8-bit activations lose much of them (measured here:
    # 25 % of the mean |logit|; 16-bit activations: 0.8 %). Still a face parser's output, not noise:
    assert (got.argmax(1) == ref.argmax(1)).mean() > 0.5  # of 19 classes; chance is ~5 %


@needs_shared
def test_the_real_detector_in_int8_finds_the_face_fp32_finds_within_a_bound(tmp_path: Path) -> None:
    from skimage import data

    from benchmarks.onnx_int8 import detector_input, faces_from, photo_canvas
    from gpen_watch.restore.nets.fold import fold_batchnorm
    from gpen_watch.restore.nets.retinaface import build_retinaface

    net = build_retinaface("mobile0.25")
    net.load_state_dict(torch.load(REAL_DETECTOR, map_location="cpu", weights_only=True))
    fold_batchnorm(net.eval())

    def canvas(rgb: np.ndarray) -> np.ndarray:
        return photo_canvas(np.ascontiguousarray(rgb[..., ::-1]), (DET_SIDE, DET_SIDE))

    # Calibrated on other photos (a face among them), measured on the astronaut's.
    calib = [canvas(_hopper()), canvas(np.stack([data.camera()] * 3, -1)), canvas(data.coffee())]
    photo = canvas(data.astronaut())
    x = detector_input(photo)
    with torch.no_grad():
        program = torch.onnx.export(
            net, (torch.from_numpy(x),), dynamo=True, opset_version=18, input_names=["x"]
        )
    assert program is not None
    fp32 = tmp_path / "detector.onnx"
    program.save(str(fp32), external_data=False)
    made = cached_quantized(fp32, Calibration("test-photos", [{"x": detector_input(c)} for c in calib]))
    ref = faces_from(_run_all(fp32, x), net.config, photo)
    got = faces_from(_run_all(made.path, x), net.config, photo)
    assert len(ref) == len(got) == 1
    side = float(max(ref[0].box[2:] - ref[0].box[:2]))  # ~75 px at this size
    # Why a tenth of the face's side: that is what the aligned crop may move before a restored
    # face sits visibly off (GPEN's template is fitted to all five points by least squares, which
    # halves one point's error). Measured here: box corners 1.7 px (2.3 %), landmarks 3.2 px
    # (4.3 %), score 0.007; on the Solvay photo see docs/benchmarks.md, "int8 through ONNX
    # Runtime". A broken quantiser loses the face or moves it by about its own size.
    assert np.abs(got[0].box - ref[0].box).max() < 0.1 * side
    assert np.linalg.norm(got[0].landmarks - ref[0].landmarks, axis=1).max() < 0.1 * side
    assert abs(got[0].score - ref[0].score) < 0.05


def _run_all(path: Path, x: np.ndarray) -> list[np.ndarray]:
    return [
        np.asarray(o)
        for o in ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    ]


def test_a_current_int8_file_is_reused_and_a_changed_export_or_calibration_remade(
    fp32: Path, tmp_path: Path
) -> None:
    faces = _faces()
    first = cached_quantized(fp32, _calibration(faces[:2]))
    stamp = first.path.stat().st_mtime_ns
    again = cached_quantized(fp32, _calibration(faces[:2]))
    assert not again.made and again.manifest == first.manifest
    assert first.path.stat().st_mtime_ns == stamp

    other_calibration = cached_quantized(fp32, _calibration(faces[2:4]))
    assert other_calibration.made
    assert other_calibration.manifest.recipe != first.manifest.recipe

    # The weights changed, so the export did (one convolution's weights, nudged: a whole second
    # export would cost ~10 s): the int8 file beside it is made from the new one.
    model = onnx.load(str(fp32))
    weights = next(
        t for t in model.graph.initializer if t.data_type == onnx.TensorProto.FLOAT and len(t.dims) == 4
    )
    weights.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(weights) * 1.01, weights.name))
    onnx.save(model, str(tmp_path / "new.onnx"))
    (tmp_path / "new.onnx").replace(fp32)
    remade = cached_quantized(fp32, _calibration(faces[2:4]))
    assert remade.made
    assert remade.manifest.fp32_sha256 == onnx_derived.file_sha256(fp32) != first.manifest.fp32_sha256
    assert onnx_quant.stale_reason(remade.path, remade.manifest.fp32_sha256, remade.manifest.recipe) is None


def test_a_truncated_or_half_made_int8_file_is_refused_and_made_again(fp32: Path) -> None:
    faces = _faces()
    calibration = _calibration(faces[:2])
    made = cached_quantized(fp32, calibration)
    whole = made.path.read_bytes()
    made.path.write_bytes(whole[: len(whole) // 2])  # a copy or a disk that stopped half-way
    assert onnx_quant.stale_reason(made.path, made.manifest.fp32_sha256, calibration.name) == (
        "the file is not the one its manifest describes"
    )
    again = cached_quantized(fp32, calibration)
    assert again.made
    assert _run(again.path, faces[:1]).shape == (1, 19, SIDE, SIDE)

    # A run killed between the int8 file and its manifest: no manifest, so nothing is trusted.
    onnx_derived.manifest_path(again.path).unlink()
    assert cached_quantized(fp32, calibration).made
    # No temp file is left beside the export, whatever happened.
    assert sorted(p.name for p in fp32.parent.iterdir()) == [
        "parsenet.int8.onnx",
        "parsenet.int8.onnx.json",
        "parsenet.onnx",
    ]


def test_no_calibration_inputs_is_refused_with_a_sentence(fp32: Path) -> None:
    with pytest.raises(ValueError, match=r"no calibration inputs for parsenet\.onnx"):
        cached_quantized(fp32, Calibration("empty", []))
    assert not onnx_quant.quantized_path(fp32).exists()
