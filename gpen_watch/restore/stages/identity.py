"""Whether a restored face still looks like the same person: face descriptors and their distance.

A face is described as dlib's face recognition describes it (docs/identity.md): the five-point
predictor (``nets.shape_predictor``) finds its eye corners and nose in a box placed from the
detector's landmarks, the face is cut out as dlib's 150 px chip (its ``get_face_chip`` geometry,
25 % padding), and the ResNet (``nets.face_descriptor``) makes 128 numbers of it. The identity
distance of a restored face is the Euclidean distance between the descriptors of its aligned crop
before and after the generator, both cut with the points found on the crop before: the face is
compared where it is pasted back, and a moved eye counts as a change.

The stage takes the crops the generator was given and what it gave back, so a batch of faces from
several photos is described in one pass of the network on the engine's device.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np
import torch

from gpen_watch.restore.nets.face_descriptor import CHIP_SIZE, FaceDescriptorNet
from gpen_watch.restore.nets.shape_predictor import ShapePredictor
from gpen_watch.restore.stages import align

# dlib's five-point chip template, (x, y) in the unit square of a chip without padding: the corners
# of the eye on the image's right (outer, inner), of the eye on its left (outer, inner), and the
# bottom of the nose, in the predictor's order. dlib's published values (get_face_chip_details).
_CHIP_TEMPLATE = np.array(
    [
        [0.8595674595992, 0.2134981538014],
        [0.6460604764104, 0.2289674387677],
        [0.1205750620789, 0.2137274526848],
        [0.3340850613712, 0.2290642403242],
        [0.4901123135679, 0.6277975316475],
    ]
)
# The border around the template dlib's face recognition is trained with, as a share of its side.
CHIP_PADDING = 0.25

# Where dlib's face detector would put its box, from the detector's five landmarks: the centre
# offset from the landmarks' mean and the side, in units of the eyes-to-mouth distance. Fitted
# on the faces both detectors find in the test photos (docs/identity.md); the predictor corrects
# the rest, as it does for dlib's own boxes.
_BOX_SHIFT = (-0.0551, -0.0652)
_BOX_SIDE = 2.2007


def predictor_box(landmarks: np.ndarray) -> tuple[int, int, int, int]:
    """The box (left, top, right, bottom; inclusive integers, as dlib's) the shape predictor
    starts from, for a face with the detector's ``landmarks`` (5, 2): eyes, nose, mouth corners."""
    pts = np.asarray(landmarks, dtype=np.float64)
    eyes = (pts[0] + pts[1]) / 2
    mouth = (pts[3] + pts[4]) / 2
    unit = float(np.linalg.norm(mouth - eyes))
    centre = pts.mean(axis=0) + np.array(_BOX_SHIFT) * unit
    half = _BOX_SIDE * unit / 2
    left, top = round(centre[0] - half), round(centre[1] - half)
    right, bottom = round(centre[0] + half), round(centre[1] + half)
    return int(left), int(top), int(right), int(bottom)


def chip_affine(points: np.ndarray, size: int = CHIP_SIZE, padding: float = CHIP_PADDING) -> np.ndarray:
    """The (2, 3) affine from image pixels to dlib's ``size`` px chip of the face whose
    predictor ``points`` (5, 2) are given: dlib's chip geometry (its template fitted by least
    squares, its extraction rectangle's corners on the chip's corner pixels)."""
    template = (padding + _CHIP_TEMPLATE) / (2 * padding + 1) * size
    to_image = align.estimate_similarity(template, points)  # chip -> image
    a, b = float(to_image[0, 0]), float(to_image[1, 0])
    scale = math.hypot(a, b)
    angle = math.atan2(b, a)
    centre = align.transform_points(to_image, np.array([size / 2, size / 2]))
    step = (size * scale - 1) / (size - 1)  # image pixels per chip pixel
    rot = np.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]]) * step
    half = (size - 1) / 2
    forward = np.hstack([rot, (centre - rot @ np.array([half, half]))[:, None]])
    return align.invert_affine(forward)


def cut_chip(image_bgr: np.ndarray, affine: np.ndarray, size: int = CHIP_SIZE) -> np.ndarray:
    """The chip (size, size, 3) RGB uint8 that ``affine`` (image -> chip) cuts from the image,
    bilinear as dlib's; a chip that shrinks its face by more than half is cut from the image
    halved (a Gaussian pyramid) until it does not, as dlib does, so no detail aliases."""
    m = np.asarray(affine, dtype=np.float64).copy()
    image = image_bgr
    while align.affine_scale(m) < 0.5 and min(image.shape[:2]) >= 4:
        image = cv2.pyrDown(image)
        m[:, :2] *= 2.0  # a halved image's pixel i sits on the original's pixel 2i
    chip = cv2.warpAffine(image, m, (size, size), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    result: np.ndarray = np.ascontiguousarray(chip[:, :, ::-1])
    return result


@dataclass
class IdentityModels:
    """The descriptor network (on the engine's device) and the landmark predictor."""

    net: FaceDescriptorNet
    predictor: ShapePredictor
    device: torch.device

    def points(self, image_bgr: np.ndarray, landmarks: np.ndarray) -> np.ndarray:
        """The predictor's five points (5, 2) of the face with the detector's ``landmarks``."""
        return self.predictor(image_bgr, predictor_box(landmarks))

    def describe(self, chips: np.ndarray) -> np.ndarray:
        """(N, 150, 150, 3) RGB uint8 chips -> (N, 128) float32 descriptors, in one pass."""
        if len(chips) == 0:
            return np.zeros((0, 128), dtype=np.float32)
        with torch.inference_mode():
            x = torch.from_numpy(np.ascontiguousarray(chips)).to(self.device)
            x = x.permute(0, 3, 1, 2).float()
            out: np.ndarray = self.net(x).float().cpu().numpy()
        return out

    def points_of(self, images: Sequence[np.ndarray], landmarks: Sequence[np.ndarray]) -> np.ndarray:
        """``points`` of N faces (N, 5, 2), face i in ``images[i]``: the predictor takes them
        through its stages together (eight faces: about half the time a face of one at a time,
        the same points)."""
        return self.predictor.many(images, [predictor_box(lm) for lm in landmarks])

    def describe_faces(self, images: Sequence[np.ndarray], landmarks: Sequence[np.ndarray]) -> np.ndarray:
        """The descriptors (N, 128) of N faces, face i in ``images[i]`` (BGR) with the detector's
        ``landmarks[i]`` (5, 2): predictor, chip, network."""
        points = self.points_of(images, landmarks)
        chips = [cut_chip(image, chip_affine(p)) for image, p in zip(images, points)]
        return self.describe(np.stack(chips) if chips else np.zeros((0, CHIP_SIZE, CHIP_SIZE, 3), np.uint8))

    def compare(
        self, before: Sequence[np.ndarray], after: Sequence[np.ndarray], landmarks: Sequence[np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray]:
        """For F aligned crops before and after the generator ((S, S, 3) BGR each; S may differ
        between faces), with the detector's landmarks in crop pixels ((5, 2) each): the descriptors
        of the faces before (F, 128) and the distance (F,) of each face after from itself before."""
        chips = []
        for crop_before, crop_after, points in zip(before, after, self.points_of(before, landmarks)):
            affine = chip_affine(points)
            chips += [cut_chip(crop_before, affine), cut_chip(crop_after, affine)]
        if not chips:
            return np.zeros((0, 128), dtype=np.float32), np.zeros(0, dtype=np.float64)
        described = self.describe(np.stack(chips))
        first, second = described[0::2], described[1::2]
        return first, distance(first, second)


def distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Euclidean distance between descriptors, row by row (..., 128) -> (...)."""
    result: np.ndarray = np.linalg.norm(a.astype(np.float64) - b.astype(np.float64), axis=-1)
    return result
