"""dlib's face-recognition network and five-point predictor as gpen-watch's own code reads and runs
them (``nets.face_descriptor``, ``nets.shape_predictor``), against dlib itself (PyPI's dlib-bin, in
the test extra) with dlib's released files (../shared/fixtures/dlib) on the Solvay photo's faces.

Tolerances: descriptors within 1e-4 a value of dlib's on the same chips (float32 through 29
convolutions, summed in other orders by other kernels: 4e-7 measured here); the predictor's points,
rounded as dlib rounds them, identical on at least 90 % of the faces and within a pixel on all (a
split whose two pixels differ by exactly its threshold could go either way under another float
order: none did here, on 31 faces). A damaged file is refused in words.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from dlib_models import PREDICTOR, RECOGNITION, needs_dlib_models, solvay_bgr

from gpen_watch.base.errors import ModelError
from gpen_watch.restore.nets.face_descriptor import read_descriptor_net
from gpen_watch.restore.nets.shape_predictor import dlib_gray, read_shape_predictor

pytestmark = [needs_dlib_models, pytest.mark.slow]


@pytest.fixture(scope="module")
def dlib_faces():  # -> (dlib, rgb, rectangles)
    dlib = pytest.importorskip("dlib", reason="dlib (dlib-bin), the reference, is not installed")
    rgb = np.ascontiguousarray(solvay_bgr()[:, :, ::-1])
    return dlib, rgb, list(dlib.get_frontal_face_detector()(rgb, 1))


def test_the_network_gives_dlibs_descriptors(dlib_faces) -> None:
    dlib, rgb, rects = dlib_faces
    predictor = dlib.shape_predictor(str(PREDICTOR))
    reference = dlib.face_recognition_model_v1(str(RECOGNITION))
    chips = np.stack([dlib.get_face_chip(rgb, predictor(rgb, r), 150, 0.25) for r in rects])
    want = np.array([reference.compute_face_descriptor(c) for c in chips])
    net = read_descriptor_net(RECOGNITION)
    with torch.inference_mode():
        x = torch.from_numpy(chips).permute(0, 3, 1, 2).float()
        got = net(x.contiguous()).numpy()
        # As the engine runs it: channels_last, the chips' own layout.
        engine = net.to(memory_format=torch.channels_last)(x).numpy()
    assert len(rects) >= 25
    assert np.abs(got - want).max() < 1e-4
    assert np.abs(engine - want).max() < 1e-4


def test_the_predictor_gives_dlibs_points(dlib_faces) -> None:
    dlib, rgb, rects = dlib_faces
    reference = dlib.shape_predictor(str(PREDICTOR))
    ours = read_shape_predictor(PREDICTOR)
    gray = dlib_gray(np.ascontiguousarray(rgb[:, :, ::-1]))
    same = 0
    for r in rects:
        want = np.array([(p.x, p.y) for p in reference(rgb, r).parts()])
        got = np.floor(ours(gray, (r.left(), r.top(), r.right(), r.bottom())) + 0.5)
        assert np.abs(got - want).max() <= 1
        same += bool((got == want).all())
    assert same >= 0.9 * len(rects)


def test_faces_taken_together_get_the_points_each_gets_alone(dlib_faces) -> None:
    """The predictor takes a batch's faces through its stages together (``many``): each gets
    exactly the points it gets alone, whatever the others are: crops of other sizes, grey or
    colour, a box partly off its image, an image of a few pixels."""
    _, rgb, rects = dlib_faces
    bgr = np.ascontiguousarray(rgb[:, :, ::-1])
    ours = read_shape_predictor(PREDICTOR)
    images, boxes = [], []
    for k, r in enumerate(rects[:12]):
        x0, y0 = max(0, r.left() - 40), max(0, r.top() - 30 - k)
        crop = bgr[y0 : r.bottom() + 40 + 3 * k, x0 : r.right() + 25]
        images.append(dlib_gray(crop) if k % 3 == 1 else crop)
        boxes.append((r.left() - x0, r.top() - y0, r.right() - x0, r.bottom() - y0))
    images += [bgr[:40, :30], bgr]
    boxes += [(-20, -10, 35, 50), (-30, 5, 60, 90)]
    together = ours.many(images, boxes)
    alone = np.stack([ours(image, box) for image, box in zip(images, boxes)])
    assert np.array_equal(together, alone)
    assert ours.many([], []).shape == (0, 5, 2)


@pytest.mark.parametrize("source", [RECOGNITION, PREDICTOR], ids=["network", "predictor"])
def test_a_damaged_file_is_refused_in_words(source, tmp_path) -> None:
    read = read_descriptor_net if source == RECOGNITION else read_shape_predictor
    cut = tmp_path / source.name
    cut.write_bytes(source.read_bytes()[: source.stat().st_size // 2])
    with pytest.raises(
        ModelError, match=rf"{cut}: not a whole dlib model file of this kind \(the file ends early"
    ):
        read(cut, "get it again")
    other = tmp_path / "other.dat"
    other.write_bytes((PREDICTOR if source == RECOGNITION else RECOGNITION).read_bytes()[:4096])
    with pytest.raises(ModelError, match=r"not a whole dlib model file of this kind .*; get it again"):
        read(other, "get it again")
