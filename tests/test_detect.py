"""The batched detector must find what facexlib's own detect_faces finds (the reference, where it is
installed), at a fraction of the cost."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gpen_watch.restore.nets.anchors import anchor_priors
from gpen_watch.restore.nets.retinaface import CONFIGS, RetinaFace, build_retinaface
from gpen_watch.restore.stages.detect import FaceDetector


@pytest.fixture(scope="module")
def net() -> RetinaFace:
    torch.manual_seed(0)
    m = build_retinaface("mobile0.25")
    # Random weights score every anchor near 0.5; sharpen the class head so that the threshold
    # selects a few hundred boxes and NMS has real work to do.
    with torch.no_grad():
        for head in m.ClassHead:
            head.conv1x1.weight.mul_(20000)
            head.conv1x1.bias.zero_()
    return m.eval()


def _photo(h: int, w: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 255, (h // 8, w // 8, 3), dtype=np.uint8)
    return np.ascontiguousarray(np.kron(img, np.ones((8, 8, 1), dtype=np.uint8)))


@pytest.mark.parametrize("arch", ["resnet50", "mobile0.25"])
def test_priors_match_facexlib(arch: str) -> None:
    pytest.importorskip("facexlib", reason="facexlib, the reference, is in the test extra")
    from facexlib.detection.retinaface import generate_config
    from facexlib.detection.retinaface_utils import PriorBox

    for h, w in [(640, 480), (96, 160), (1000, 704)]:
        ref = PriorBox(generate_config(arch), image_size=(h, w)).forward()
        # Exact on any CPU: elementwise IEEE arithmetic, correctly rounded whatever the vector width.
        assert torch.equal(ref, anchor_priors(CONFIGS[arch], h, w))  # type: ignore[index]


def test_same_faces_as_facexlib_at_full_size(net: RetinaFace) -> None:
    pytest.importorskip("facexlib", reason="facexlib, the reference, is in the test extra")
    from facexlib.detection.retinaface import RetinaFace as Reference

    reference = Reference(network_name="mobile0.25", half=False, device=torch.device("cpu"))
    reference.load_state_dict(net.state_dict(), strict=True)
    img = _photo(256, 320, 1)  # multiples of 32: no padding, so both see identical input
    with torch.no_grad():
        ref = reference.eval().detect_faces(img, conf_threshold=0.9, nms_threshold=0.4, use_origin_size=True)
    det = FaceDetector(net, torch.device("cpu"), threshold=0.9, max_side=10_000, max_faces=10_000)
    faces = det.detect([img])[0]
    assert len(ref) > 0, "test needs some detections"
    assert len(faces) == len(ref)
    ours = np.array([np.r_[f.box, f.score, f.landmarks.ravel()] for f in faces])
    ref = ref[np.argsort(-ref[:, 4])]
    np.testing.assert_allclose(ours, ref, atol=1e-3)


def test_batch_equals_single_and_scales_back(net: RetinaFace) -> None:
    det = FaceDetector(net, torch.device("cpu"), threshold=0.9, max_side=10_000, max_faces=10_000)
    a, b = _photo(256, 320, 2), _photo(192, 256, 3)
    together = det.detect([a, b])
    # b is padded to a's size in the batch; padding is the mean colour, which the network sees as zero.
    alone = det.detect([b])[0]
    assert len(together) == 2
    assert len(together[1]) > 0

    # Anchors near the padded border see different context, so compare the confident interior ones.
    def interior(fs):
        return np.array([f.box[:4] for f in fs if f.box[2] < 200 and f.box[3] < 150]).reshape(-1, 4)

    # The same boxes up to float32 rounding (a batch of two runs other kernels than one photo), not
    # rounded to whole pixels, where a coordinate near .5 could fall either way on another CPU.
    got, want = interior(together[1]), interior(alone)
    assert len(want) > 0
    assert len(got) == len(want)
    nearest = np.abs(got[:, None, :] - want[None, :, :]).max(axis=2).min(axis=1)
    assert nearest.max() < 0.01, nearest


def test_downscaled_detection_maps_back_to_image_coordinates(net: RetinaFace) -> None:
    img = _photo(512, 640, 4)
    det = FaceDetector(net, torch.device("cpu"), threshold=0.9, max_side=320, shrink_above=320)
    faces = det.detect([img])[0]
    assert faces
    boxes = np.array([f.box for f in faces])
    # Boxes live in the 640x512 frame, not the 320x256 detection copy.
    assert boxes[:, 2].max() > 330 or boxes[:, 3].max() > 260
    assert len(faces) <= det.max_faces


def test_default_detects_up_to_1500_px_at_own_size_and_larger_on_a_1000_px_copy(net: RetinaFace) -> None:
    """Upstream GPEN's rule (restore.detect_shrink_above, restore.detect_max_side): the 1328 px
    Solvay photo shrunk to 1000 px lost one of its 29 faces."""
    det = FaceDetector(net, torch.device("cpu"))
    for (h, w), detected in [
        ((568, 1328), (568, 1328)),
        ((1500, 1000), (1500, 1000)),
        ((1200, 1501), (799, 1000)),
        ((4000, 3000), (1000, 750)),
    ]:
        prepared = det.prepare(np.zeros((h, w, 3), np.uint8))
        assert prepared.small.shape[:2] == detected, (h, w)
        assert prepared.scale == pytest.approx(detected[1] / w, abs=1e-3)
