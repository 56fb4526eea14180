"""dlib's released face-recognition and five-point models, and the real photo and detector, for
the tests that need trained weights (../shared beside the repository; CI has it).

Each test module that uses them skips where they are absent, saying why.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
DLIB_DIR = SHARED / "fixtures" / "dlib"
RECOGNITION = DLIB_DIR / "dlib_face_recognition_resnet_model_v1.dat"
PREDICTOR = DLIB_DIR / "shape_predictor_5_face_landmarks.dat"
SOLVAY = SHARED / "data" / "Solvay_conference_1927.png"
REAL_DETECTOR = SHARED / "fixtures" / "retinaface_mobilenet0.25_real.pth"
SOLVAY_PEOPLE = 29

needs_dlib_models = pytest.mark.skipif(
    not (RECOGNITION.is_file() and PREDICTOR.is_file() and SOLVAY.is_file() and REAL_DETECTOR.is_file()),
    reason="../shared (dlib's model files, the Solvay photo, the real RetinaFace weights) is not "
    "beside the repository",
)


def identity_models():  # -> IdentityModels
    from gpen_watch.restore.nets.face_descriptor import read_descriptor_net
    from gpen_watch.restore.nets.shape_predictor import read_shape_predictor
    from gpen_watch.restore.stages.identity import IdentityModels

    return IdentityModels(
        read_descriptor_net(RECOGNITION), read_shape_predictor(PREDICTOR), torch.device("cpu")
    )


def real_detector():  # -> FaceDetector
    """The project's detector with the real MobileNet weights, at its default settings."""
    from gpen_watch.catalog.registry import get_spec
    from gpen_watch.restore.engines.verify import build_retinaface, load_weights
    from gpen_watch.restore.nets.fold import prepare_detector
    from gpen_watch.restore.stages.detect import FaceDetector

    spec = get_spec("retinaface_mobile0.25")
    cpu = torch.device("cpu")
    net = load_weights(build_retinaface(spec.arch), REAL_DETECTOR, spec.name)
    return FaceDetector(prepare_detector(net, cpu), cpu)


def solvay_bgr() -> np.ndarray:
    from gpen_watch.imaging.load import load_image

    return load_image(SOLVAY).bgr8
