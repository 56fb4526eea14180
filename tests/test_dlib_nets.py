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
    with torch.inference_mode():
        got = read_descriptor_net(RECOGNITION)(torch.from_numpy(chips).permute(0, 3, 1, 2).float()).numpy()
    assert len(rects) >= 25
    assert np.abs(got - want).max() < 1e-4


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
