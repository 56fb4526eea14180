"""How much fine detail a face already has, judged before it is restored (restore.skip_sharp).

The measure (docs/identity.md, "Faces already sharp") looks at the inner face, the square around
the eyes, nose and mouth, at its own pixels, or where it is larger than a 512 px crop holds it (its
eyes over 107 px apart), shrunk to that: no face generator here restores finer than 512 px crops
hold, so a large face is sharp when it is sharp there. The scale is the same whichever model runs,
so the measure and restore.sharp_above mean one thing.
There it compares the finest band of detail (a 3x3 Laplacian) with the next coarser one (the same
on the face halved): on a sharp photo of a face the two carry about the same energy, and blurring,
enlarging a small copy or heavy JPEG compression empty the finest band first. The noise is
estimated apart (Immerkaer's operator, its median absolute response) and counted against the
detail twice over, taken out of the finest band and added to the coarser one: a noisy face is one
that restoring would help. JPEG's 8 x 8 block edges, which look like fine detail, are left out of
the finest band where the face is measured at its own pixels (the two pixel rows and columns that
meet at the grid lines the face's own gradients show).

The measure is a ratio, so the face's size in pixels and its contrast divide out: a small sharp
face, a large blurred one and a noisy one are judged by what their pixels hold, not their size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from gpen_watch.restore.stages import align

# The inner face: a square centred on the five landmarks, this many times the larger of the eye
# distance and the eyes-to-mouth distance on each side of its centre (brows to chin, cheek to
# cheek, little hair or background).
_HALF_SIDE = 0.9
# The crop whose scale caps the one a face is measured at (GPEN's template at 512 px).
_REFERENCE_CROP = 512
# Below this many pixels a side there is too little face to judge: it is restored.
_MIN_SIDE = 8
_LAPLACIAN = np.array([[0.0, 0.25, 0.0], [0.25, -1.0, 0.25], [0.0, 0.25, 0.0]], dtype=np.float32)
# White noise of variance s^2 puts _LAPLACIAN's sum of squares (1.25) times s^2 into the band.
_NOISE_GAIN = float((_LAPLACIAN**2).sum())
_IMMERKAER = np.array([[1.0, -2.0, 1.0], [-2.0, 4.0, -2.0], [1.0, -2.0, 1.0]], dtype=np.float32)
# Its response to white noise of deviation s has deviation 6 s; a median absolute value of a
# normal variable is 0.6745 of its deviation.
_IMMERKAER_SCALE = 6.0 * 0.6745
_JPEG_BLOCK = 8
# BT.601 luma from BGR, as JPEG itself computes it.
_LUMA = np.array([0.114, 0.587, 0.299], dtype=np.float32)


@dataclass(frozen=True)
class Detail:
    """A face's detail measure and the noise it was corrected for."""

    measure: float
    noise: float  # deviation in grey levels (0-255)
    side: int  # the inner face's side in pixels where it was measured

    def text(self) -> str:
        return f"detail {self.measure:.2f}"


def face_detail(image_bgr: np.ndarray, landmarks: np.ndarray) -> Detail | None:
    """The detail measure of the face with ``landmarks`` (5, 2) in ``image_bgr`` (H, W, 3) uint8;
    None when too little of it is in the photo to judge."""
    pts = np.asarray(landmarks, dtype=np.float64)
    eyes = float(np.linalg.norm(pts[1] - pts[0]))
    mouth = float(np.linalg.norm((pts[3] + pts[4]) / 2 - (pts[0] + pts[1]) / 2))
    half = _HALF_SIDE * max(eyes, mouth)
    cx, cy = pts.mean(axis=0)
    h, w = image_bgr.shape[:2]
    x0, y0 = max(0, math.floor(cx - half)), max(0, math.floor(cy - half))
    x1, y1 = min(w, math.ceil(cx + half) + 1), min(h, math.ceil(cy + half) + 1)
    if x1 - x0 < _MIN_SIDE or y1 - y0 < _MIN_SIDE:
        return None
    grey: np.ndarray = image_bgr[y0:y1, x0:x1].astype(np.float32) @ _LUMA
    scale = align.affine_scale(align.estimate_similarity(pts, align.face_template(_REFERENCE_CROP)))
    own_pixels = scale >= 1.0
    if not own_pixels:
        size = (max(_MIN_SIDE, round(grey.shape[1] * scale)), max(_MIN_SIDE, round(grey.shape[0] * scale)))
        grey = cv2.resize(grey, size, interpolation=cv2.INTER_AREA)
    fine = _band(grey)
    if own_pixels:
        fine = fine[np.ix_(_off_grid(grey, 0), _off_grid(grey, 1))]
    coarse = _band(_halved(grey))
    noise = _noise(grey)
    spill = _NOISE_GAIN * noise**2
    measure = (float(np.mean(fine**2)) - spill) / (float(np.mean(coarse**2)) + spill + 1e-6)
    return Detail(max(0.0, measure), noise, int(min(grey.shape)))


def _band(grey: np.ndarray) -> np.ndarray:
    """The finest band of ``grey``: its 3x3 Laplacian, the border's pixels left out."""
    out: np.ndarray = cv2.filter2D(grey, cv2.CV_32F, _LAPLACIAN, borderType=cv2.BORDER_REFLECT)[1:-1, 1:-1]
    return out


def _halved(grey: np.ndarray) -> np.ndarray:
    h, w = grey.shape[0] // 2 * 2, grey.shape[1] // 2 * 2
    out: np.ndarray = grey[:h, :w].reshape(h // 2, 2, w // 2, 2).mean(axis=(1, 3))
    return out


def _noise(grey: np.ndarray) -> float:
    response = cv2.filter2D(grey, cv2.CV_32F, _IMMERKAER, borderType=cv2.BORDER_REFLECT)[1:-1, 1:-1]
    return float(np.median(np.abs(response))) / _IMMERKAER_SCALE


def _off_grid(grey: np.ndarray, axis: int) -> np.ndarray:
    """Which of the band's rows (``axis`` 0) or columns (1) lie off a JPEG block edge: the two on
    either side of the grid line (one in every 8) where the region's steps across that axis are
    strongest. The band starts one pixel into the region."""
    steps = np.abs(np.diff(grey, axis=axis)).mean(axis=1 - axis)  # step k: between k and k + 1
    phases = [steps[p::_JPEG_BLOCK].mean() if len(steps[p::_JPEG_BLOCK]) else 0.0 for p in range(_JPEG_BLOCK)]
    edge = int(np.argmax(phases))
    n = grey.shape[axis] - 2
    place = (np.arange(1, n + 1) - edge) % _JPEG_BLOCK  # 0: the pixel before the edge, 1: after it
    keep: np.ndarray = (place != 0) & (place != 1)
    return keep
