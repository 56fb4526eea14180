"""The project's own RetinaFace, ParseNet and suppression against the reference implementations.

gpen-watch runs its own network modules (``restore.nets.retinaface``, ``restore.nets.resnet``,
``restore.nets.parsenet``, ``restore.nets.anchors``) so that it needs neither torchvision nor facexlib.
facexlib (and torchvision with it) stays in the test extra as the reference: each test here skips
cleanly where it is not installed, and runs in the README's test venv and CI.

Tolerances: the networks compute the same convolutions in the same order as the reference, so the
outputs agree to float32 rounding; 1e-4 (relative to the output's range) leaves room for another
CPU's kernels. The load-time rewrites are held to the same bar. Detection on the real photo is
compared on the same padded pixels: the same 29 faces, boxes overlapping by IoU >= 0.99, landmarks
within 0.5 px, scores within 1e-4. The restored photo: within one level of 255 per channel.
"""

from __future__ import annotations

import copy
import importlib
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch
from conftest import TinyModels, isolated_env, make_tiny_models, same_photo_but_overlaps, tiny_restore_config
from test_fold import _with_random_statistics
from torch import nn

from gpen_watch.catalog import registry
from gpen_watch.imaging.load import load_image
from gpen_watch.restore.api import FileJob
from gpen_watch.restore.engines import verify
from gpen_watch.restore.nets.anchors import BGR_MEAN, suppress
from gpen_watch.restore.nets.fold import as_channels_last, prepare_conv_net, prepare_detector
from gpen_watch.restore.nets.retinaface import CONFIGS, RetinaFace
from gpen_watch.restore.stages.detect import Face, FaceDetector

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
SOLVAY = SHARED / "data" / "Solvay_conference_1927.png"
REAL_DETECTOR = SHARED / "fixtures" / "retinaface_mobilenet0.25_real.pth"
needs_shared = pytest.mark.skipif(
    not (SOLVAY.is_file() and REAL_DETECTOR.is_file()),
    reason="../shared (the Solvay photo and the real RetinaFace weights) is not beside the repository",
)


def _reference(name: str) -> ModuleType:
    """A module of the reference implementation, or a skip where it cannot be imported (not
    installed, or torchvision's CUDA build beside a CPU torch, which fails at import)."""
    try:
        return importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - torchvision raises RuntimeError there, not ImportError
        pytest.skip(f"the reference {name} cannot be imported here: {type(exc).__name__}: {exc}")


def _reference_retinaface(arch: str) -> nn.Module:
    import warnings

    retinaface = _reference("facexlib.detection.retinaface")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torchvision's resnet50(pretrained=False) deprecation
        net: nn.Module = retinaface.RetinaFace(network_name=arch, half=False, device=torch.device("cpu"))
    return net.eval()


def _close(got: torch.Tensor, want: torch.Tensor) -> None:
    scale = float(want.abs().max()) or 1.0
    assert float((got - want).abs().max()) <= 1e-4 * scale, float((got - want).abs().max())


def _same_outputs(reference: nn.Module, ours: nn.Module, ready: nn.Module, x: torch.Tensor) -> None:
    """``ours`` as loaded and ``ready`` as the engine prepares it (channels_last input) both give
    ``reference``'s outputs on ``x``."""
    with torch.inference_mode():
        want = reference(x)
        for got in (ours(x), ready(as_channels_last(x))):
            for g, w in zip(got, want, strict=True):
                assert g.shape == w.shape
                _close(g, w)


# --- the networks, loaded through the users' path -----------------------------------------------


@pytest.mark.parametrize(
    ("arch", "shape"),
    [("mobile0.25", (2, 3, 96, 160)), pytest.param("resnet50", (1, 3, 160, 128), marks=pytest.mark.slow)],
)
def test_retinaface_loads_the_published_layout_and_equals_the_reference(
    arch: str, shape: tuple[int, int, int, int], tmp_path: Path
) -> None:
    torch.manual_seed(0)
    reference = _with_random_statistics(_reference_retinaface(arch))
    name = f"retinaface_{arch}"
    # As the release stores it: nn.DataParallel's "module." prefix on every key.
    torch.save(
        {f"module.{k}": v for k, v in reference.state_dict().items()},
        tmp_path / registry.detector_spec(name).filename,
    )
    ours = verify.load_detector(name, tmp_path, download=False)
    assert isinstance(ours, RetinaFace)
    ready = prepare_detector(copy.deepcopy(ours), torch.device("cpu"))
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(1)) * 60
    _same_outputs(reference, ours, ready, x)


def test_parsenet_loads_the_published_layout_and_equals_the_reference(tmp_path: Path) -> None:
    parsenet = _reference("facexlib.parsing.parsenet")
    torch.manual_seed(0)
    reference = _with_random_statistics(parsenet.ParseNet(in_size=512, out_size=512, parsing_ch=19))
    torch.save(reference.state_dict(), tmp_path / registry.parser_spec().filename)
    ours = verify.load_parser(tmp_path, download=False)
    # The rewrites the engine makes at load time: folding, the polyphase upsampling, the ring fix.
    ready = prepare_conv_net(copy.deepcopy(ours), torch.device("cpu"))
    kinds = {type(m).__name__ for m in ready.modules()}
    assert {"PolyphaseUpBlock", "RingFixedConv"} <= kinds
    assert not any(isinstance(m, nn.BatchNorm2d) for m in ready.modules())
    x = torch.rand(1, 3, 128, 128, generator=torch.Generator().manual_seed(2)) * 2 - 1
    _same_outputs(reference, ours, ready, x)


# --- suppression --------------------------------------------------------------------------------


def test_suppression_keeps_what_torchvision_keeps_ties_included() -> None:
    tv_ops = _reference("torchvision.ops")
    rng = np.random.default_rng(0)
    for trial in range(200):
        n = int(rng.integers(1, 300))
        corner = rng.uniform(0, 100, (n, 2)).astype(np.float32)
        boxes = np.concatenate([corner, corner + rng.uniform(0, 40, (n, 2)).astype(np.float32)], 1)
        if trial % 4 == 0:
            boxes[: n // 3] = boxes[0]  # exact duplicates: an overlap of exactly 1
        # Eight score levels: most boxes share their score with others.
        scores = (rng.integers(1, 9, n) / 8).astype(np.float32)
        for threshold in (0.4, 0.5):
            want = tv_ops.nms(torch.from_numpy(boxes), torch.from_numpy(scores), threshold).numpy()
            np.testing.assert_array_equal(suppress(boxes, scores, threshold, 10_000), want)
            np.testing.assert_array_equal(suppress(boxes, scores, threshold, 5), want[:5])


def test_suppression_of_nothing_and_of_empty_boxes() -> None:
    assert suppress(np.zeros((0, 4), np.float32), np.zeros(0, np.float32), 0.4, 10).tolist() == []
    # Zero-area boxes overlap nothing (0/0 is not above the threshold): all are kept.
    points = np.array([[5, 5, 5, 5], [5, 5, 5, 5]], np.float32)
    assert suppress(points, np.array([0.9, 0.95], np.float32), 0.4, 10).tolist() == [1, 0]


# --- the real detector on the real photo --------------------------------------------------------


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    return float(inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter))


@needs_shared
def test_real_detector_finds_the_same_29_faces_as_the_reference() -> None:
    state = torch.load(REAL_DETECTOR, map_location="cpu", weights_only=True)
    reference = _reference_retinaface("mobile0.25")
    reference.load_state_dict(state, strict=True)
    ours = RetinaFace(CONFIGS["mobile0.25"])
    ours.load_state_dict(state, strict=True)
    # The photo padded with the mean colour to a multiple of 32, as the engine pads it: both
    # networks then see the same pixels.
    photo = load_image(SOLVAY).bgr8
    h, w = photo.shape[:2]
    padded = np.empty((-(-h // 32) * 32, -(-w // 32) * 32, 3), np.uint8)
    padded[:] = np.array(BGR_MEAN, np.uint8)
    padded[:h, :w] = photo
    with torch.no_grad():
        want = reference.eval().detect_faces(padded, conf_threshold=0.9, nms_threshold=0.4)
    detector = FaceDetector(prepare_detector(ours, torch.device("cpu")), torch.device("cpu"), max_side=10_000)
    got: list[Face] = detector.detect([padded])[0]
    assert len(got) == len(want) == 29
    want = want[np.argsort(-want[:, 4], kind="stable")]
    for face, row in zip(got, want, strict=True):
        assert _iou(face.box, row[:4]) >= 0.99
        assert float(np.abs(face.landmarks - row[5:15].reshape(5, 2)).max()) <= 0.5
        assert abs(face.score - float(row[4])) <= 1e-4


@pytest.fixture(scope="module")
def solvay_models(tmp_path_factory: pytest.TempPathFactory) -> TinyModels:
    """The tiny random GPEN and ParseNet, and the real MobileNet detector in the store's place."""
    if not REAL_DETECTOR.is_file():
        pytest.skip("../shared is not beside the repository")
    models = make_tiny_models(tmp_path_factory.mktemp("own-nets-models"), with_parser=True)
    shutil.copyfile(
        REAL_DETECTOR, models.model_dir / registry.detector_spec("retinaface_mobile0.25").filename
    )
    return models


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with isolated_env(tmp_path_factory.mktemp("own-nets-home")) as folder:
        yield folder


def _restore_solvay(models: TinyModels, out: Path) -> np.ndarray:
    from gpen_watch.restore.engines.restorer import Restorer

    # fp32 parsing: int8 calibrates on the graph it is given, and the two graphs differ in what
    # the load-time rewrites can reach, not in what they compute.
    cfg = tiny_restore_config(models, use_parse=True, parse_precision="fp32")
    with Restorer(cfg, download=False) as restorer:
        (result,) = restorer.restore_files([FileJob(SOLVAY, out)])
    assert result.ok, result.error
    return load_image(out).bgr8


@needs_shared
@pytest.mark.slow
def test_solvay_restored_with_the_own_networks_equals_the_reference_networks(
    solvay_models: TinyModels, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole photo through the engine, first with the own modules, then with facexlib's built
    in their place (each given the anchor settings the engine reads): within one level."""
    ours = _restore_solvay(solvay_models, tmp_path / "ours.png")
    parsenet = _reference("facexlib.parsing.parsenet")

    def reference_detector(arch: str) -> nn.Module:
        net = _reference_retinaface(arch)
        net.config = CONFIGS[arch]  # type: ignore[index]
        return net

    builders: dict[str, Callable[..., Any]] = {
        "build_retinaface": reference_detector,
        "ParseNet": lambda in_size=512, out_size=512: parsenet.ParseNet(in_size, out_size, parsing_ch=19),
    }
    for name, build in builders.items():
        monkeypatch.setattr(verify, name, build)
    want = _restore_solvay(solvay_models, tmp_path / "reference.png")
    same_photo_but_overlaps(ours, want, "Solvay, own networks against facexlib's")
