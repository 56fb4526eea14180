"""The identity check with dlib's real, trained model files (../shared/fixtures/dlib), on real faces.

The network and the five-point predictor are the project's own, equal to dlib's
(tests/test_dlib_nets.py); here dlib (PyPI's dlib-bin, in the test extra) is the reference for the
chips cut from the points, and the engine's way of starting the predictor is measured against
dlib's detector's. Then the check itself on the Solvay photo's 29 people, found by the project's real detector:
each face against itself after what a good restoration does stays under restore.identity_threshold,
each against the other 28 people stays over it (the counts are printed: docs/identity.md quotes
them), a face of another person pasted in is flagged, and so is noise.

Tolerance: descriptors from chips cut here against dlib's chips within 0.03 (two bilinear
samplers: 0.004-0.018 measured).
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from dlib_models import (
    PREDICTOR,
    RECOGNITION,
    SOLVAY_PEOPLE,
    identity_models,
    needs_dlib_models,
    real_detector,
    solvay_bgr,
)

from gpen_watch.config import RestoreConfig
from gpen_watch.restore.stages import align, identity

pytestmark = [needs_dlib_models, pytest.mark.slow]

THRESHOLD = RestoreConfig().identity_threshold


@pytest.fixture(scope="module")
def models() -> identity.IdentityModels:
    return identity_models()


@pytest.fixture(scope="module")
def photo() -> np.ndarray:
    return solvay_bgr()


@pytest.fixture(scope="module")
def landmarks(photo: np.ndarray) -> np.ndarray:
    """The 29 people as the project's real detector finds them, at the photo's own size."""
    faces = real_detector().detect([photo])[0]
    assert len(faces) == SOLVAY_PEOPLE
    return np.stack([f.landmarks for f in faces]).astype(np.float64)


@pytest.fixture(scope="module")
def originals(models: identity.IdentityModels, photo: np.ndarray, landmarks: np.ndarray) -> np.ndarray:
    return models.describe_faces([photo] * len(landmarks), landmarks)


@pytest.fixture(scope="module")
def dlib_faces(photo: np.ndarray):  # -> list of (dlib rectangle, rgb)
    dlib = pytest.importorskip("dlib", reason="dlib (dlib-bin), the reference, is not installed")
    rgb = np.ascontiguousarray(photo[:, :, ::-1])
    return dlib, rgb, list(dlib.get_frontal_face_detector()(rgb, 1))


# --- the project's modules against dlib ----------------------------------------------------------


def test_chips_cut_here_give_dlibs_descriptors(models: identity.IdentityModels, dlib_faces) -> None:
    """dlib's chip geometry: at dlib's own (integer) points, the chip cut here and dlib's give the
    same person to within 0.03."""
    dlib, rgb, rects = dlib_faces
    predictor = dlib.shape_predictor(str(PREDICTOR))
    reference = dlib.face_recognition_model_v1(str(RECOGNITION))
    bgr = np.ascontiguousarray(rgb[:, :, ::-1])
    for r in rects:
        shape = predictor(rgb, r)
        points = np.array([(p.x, p.y) for p in shape.parts()], dtype=np.float64)
        chip = identity.cut_chip(bgr, identity.chip_affine(points))
        theirs = dlib.get_face_chip(rgb, shape, 150, 0.25)
        assert np.abs(chip.astype(int) - theirs).mean() < 1.0
        want = np.array(reference.compute_face_descriptor(rgb, shape))
        assert identity.distance(models.describe(chip[None])[0], want) < 0.03


def test_detectors_landmarks_place_the_predictor_as_dlibs_detector_does(
    models: identity.IdentityModels, dlib_faces, photo: np.ndarray, landmarks: np.ndarray
) -> None:
    """The engine starts the predictor from a box placed by the project's detector's landmarks,
    not dlib's detector: the descriptors move by a median under 0.04 and at most 0.08 (0.020 and
    0.049 measured), well under the threshold. (Aligning by the detector's five points alone,
    without the predictor, moved them by a median 0.12 and up to 0.39: docs/identity.md.)"""
    from gpen_watch.restore.nets.shape_predictor import dlib_gray

    _, _, rects = dlib_faces
    gray = dlib_gray(photo)
    moved = []
    for r in rects:
        centre = np.array([(r.left() + r.right()) / 2, (r.top() + r.bottom()) / 2])
        nearest = landmarks[np.argmin(np.linalg.norm(landmarks.mean(axis=1) - centre, axis=1))]
        theirs = models.predictor(gray, (r.left(), r.top(), r.right(), r.bottom()))
        ours = models.points(photo, nearest)
        a, b = (
            models.describe(identity.cut_chip(photo, identity.chip_affine(p))[None])[0]
            for p in (theirs, ours)
        )
        moved.append(identity.distance(a, b))
    assert np.median(moved) < 0.04
    assert max(moved) < 0.08


# --- the check on the Solvay photo's 29 people ---------------------------------------------------


def _sharpen(img: np.ndarray) -> np.ndarray:
    return cv2.addWeighted(img, 1.5, cv2.GaussianBlur(img, (0, 0), 1.0), -0.5, 0)


def _denoise(img: np.ndarray) -> np.ndarray:
    return cv2.fastNlMeansDenoisingColored(img, None, 5, 5, 7, 21)


def _jpeg(img: np.ndarray, quality: int = 70) -> np.ndarray:
    ok, data = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, quality])
    assert ok
    return cv2.imdecode(data, cv2.IMREAD_COLOR)


def _mirrored(points: np.ndarray, width: int) -> np.ndarray:
    """The detector's five points of the faces in the photo flipped left to right (the eyes and
    the mouth corners change sides, so their order too)."""
    out = points.copy()
    out[..., 0] = width - 1 - out[..., 0]
    return out[:, [1, 0, 2, 4, 3]]


def test_each_person_stays_under_the_threshold_after_what_a_good_restoration_does(
    models: identity.IdentityModels, photo: np.ndarray, landmarks: np.ndarray, originals: np.ndarray
) -> None:
    """The whole photo sharpened, denoised, saved at JPEG quality 70, shrunk to 0.7 and flipped:
    each of the 29 people, described again from scratch (the predictor runs anew), stays under
    the threshold: 145 of 145 (largest 0.23 measured)."""
    w = photo.shape[1]
    variants = {
        "sharpened": (_sharpen(photo), landmarks),
        "denoised": (_denoise(photo), landmarks),
        "JPEG q70": (_jpeg(photo), landmarks),
        "0.7x": (
            cv2.resize(photo, None, fx=0.7, fy=0.7, interpolation=cv2.INTER_AREA),
            (landmarks + 0.5) * 0.7 - 0.5,
        ),
        "flipped": (np.ascontiguousarray(photo[:, ::-1]), _mirrored(landmarks, w)),
    }
    under = 0
    for name, (image, points) in variants.items():
        d = identity.distance(models.describe_faces([image] * len(points), points), originals)
        print(f"same person, {name}: median {np.median(d):.3f}, largest {d.max():.3f}")
        under += int((d < THRESHOLD).sum())
    print(f"same person under {THRESHOLD}: {under} of {5 * SOLVAY_PEOPLE}")
    assert under == 5 * SOLVAY_PEOPLE


def test_each_person_stays_over_the_threshold_from_the_other_28(originals: np.ndarray) -> None:
    d = identity.distance(originals[:, None], originals[None])
    pairs = d[np.triu_indices(len(originals), 1)]
    over = int((pairs > THRESHOLD).sum())
    print(
        f"different people over {THRESHOLD}: {over} of {len(pairs)} pairs "
        f"(smallest {pairs.min():.3f}, median {np.median(pairs):.3f})"
    )
    assert len(pairs) == SOLVAY_PEOPLE * (SOLVAY_PEOPLE - 1) // 2
    assert over == len(pairs)


@pytest.fixture(scope="module")
def crops(photo: np.ndarray, landmarks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each face as GPEN-BFR-512's aligned crop, and its landmarks in crop pixels."""
    template = align.face_template(512)
    affines = [align.estimate_similarity(lm, template) for lm in landmarks]
    cut = np.stack([align.warp_affine_resampled(photo, m, (512, 512)) for m in affines])
    return cut, np.stack([align.transform_points(m, lm) for m, lm in zip(affines, landmarks)])


def test_a_restoration_that_keeps_the_person_is_not_flagged(
    models: identity.IdentityModels, crops: tuple[np.ndarray, np.ndarray]
) -> None:
    """As the engine compares: each crop against the same crop sharpened, denoised, at JPEG 70
    and shrunk to 0.7 and back, cut at the points found before."""
    before, points = crops

    def rescaled(c: np.ndarray) -> np.ndarray:
        small = cv2.resize(c, (358, 358), interpolation=cv2.INTER_AREA)
        return cv2.resize(small, (512, 512), interpolation=cv2.INTER_CUBIC)

    for change in (_sharpen, _denoise, _jpeg, rescaled):
        _, d = models.compare(before, np.stack([change(c) for c in before]), points)
        assert d.max() < THRESHOLD, change.__name__


def test_another_persons_face_pasted_in_is_flagged(
    models: identity.IdentityModels, crops: tuple[np.ndarray, np.ndarray]
) -> None:
    """Each face's crop given back as its neighbour's (two faces swapped before paste-back, for
    every face): every one is over the threshold."""
    before, points = crops
    swapped = before[np.roll(np.arange(len(before)), 1)]
    _, d = models.compare(before, swapped, points)
    print(f"swapped faces: smallest distance {d.min():.3f}")
    assert (d > THRESHOLD).all()


def test_noise_in_place_of_a_face_is_flagged(
    models: identity.IdentityModels, crops: tuple[np.ndarray, np.ndarray]
) -> None:
    """What a generator with random weights gives back (the tests' GPEN) is no face at all."""
    before, points = crops
    noise = np.random.default_rng(0).integers(0, 256, before.shape, dtype=np.uint8)
    _, d = models.compare(before, noise, points)
    assert (d > THRESHOLD).all()
