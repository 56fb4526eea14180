"""Face detection with the RetinaFace network (``retinaface``), batched and on the worker's device.

The reference implementations' ``detect_faces`` keeps per-call state on the module (scale, resize)
and runs at the photo's full size; on a 12 MP photo that costs more than restoring a face. Here a
photo whose long
side is over ``shrink_above`` is shrunk to ``max_side`` first (upstream GPEN's rule: over 1500 px,
detected at 1000 px; smaller photos at their own size, where shrinking would lose small faces),
several photos go through the network in one padded batch, and the decoding of boxes and landmarks
is done without touching the module, so a detector can be shared.

Shrinking a 12 MP photo costs ~30-45 ms of CPU, more than the network itself on a GPU. ``prepare``
does it on its own so the engine can run it on its decode threads; the device loop then passes the
result to ``detect``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import cv2
import numpy as np
import torch

from gpen_watch.restore.nets.anchors import BGR_MEAN, anchor_priors, decode_boxes, decode_landmarks, suppress
from gpen_watch.restore.nets.retinaface import RetinaFace

# Feature strides go down to 32: padding to a multiple keeps every prior aligned with the image.
_STRIDE = 32


@dataclass
class Face:
    """One detected face, in the coordinates of the image that was passed in."""

    box: np.ndarray  # (4,) x1, y1, x2, y2
    score: float
    landmarks: np.ndarray  # (5, 2) left eye, right eye, nose, left mouth, right mouth (image left/right)

    @property
    def size(self) -> float:
        """Eye-to-mouth extent in pixels: what decides whether a face is worth restoring."""
        span = self.landmarks.max(axis=0) - self.landmarks.min(axis=0)
        return float(max(span))


@dataclass
class Prepared:
    """A photo shrunk for the detector: made on any thread by ``prepare``, passed to ``detect``."""

    small: np.ndarray  # (h, w, 3) BGR uint8: the photo, or its copy shrunk to max_side
    scale: float  # small size / original size (<= 1)
    shape: tuple[int, int]  # the original image's (H, W), like an image array's shape[:2]


class Detector(Protocol):
    """What the engine asks of a detector: ``FaceDetector``, or a stand-in that reports known faces
    (tests, benchmarks). The engine also calls a ``prepare`` method like ``FaceDetector``'s on its
    decode threads when the detector has one."""

    def detect(self, images: Sequence[np.ndarray | Prepared]) -> list[list[Face]]: ...


class FaceDetector:
    """Runs a RetinaFace network on batches of BGR uint8 images."""

    def __init__(
        self,
        net: RetinaFace,
        device: torch.device,
        threshold: float = 0.9,
        max_side: int = 1000,
        shrink_above: int = 1500,
        nms_threshold: float = 0.4,
        max_faces: int = 200,
    ) -> None:
        self.net = net.eval()
        self.device = device
        self.threshold = threshold
        self.max_side = max_side
        self.shrink_above = shrink_above
        self.nms_threshold = nms_threshold
        # A cap protects against a broken detector flooding the restorer with thousands of boxes.
        self.max_faces = max_faces
        self._cfg = net.config
        self._mean = torch.tensor(BGR_MEAN, device=device).view(1, 3, 1, 1)
        self._prior_cache: dict[tuple[int, int], torch.Tensor] = {}

    def prepare(self, image: np.ndarray) -> Prepared:
        """The detector's input for one image (H,W,3 BGR uint8); thread-safe, no torch involved."""
        long_side = max(image.shape[:2])
        scale = min(1.0, self.max_side / long_side) if long_side > self.shrink_above else 1.0
        return Prepared(_shrink(image, scale), scale, (int(image.shape[0]), int(image.shape[1])))

    def detect(self, images: Sequence[np.ndarray | Prepared]) -> list[list[Face]]:
        """Faces of each image (H,W,3 BGR uint8, or what ``prepare`` made of one), best score first,
        in the original image's coordinates."""
        if not images:
            return []
        prepared = [im if isinstance(im, Prepared) else self.prepare(im) for im in images]
        scales = [p.scale for p in prepared]
        small = [p.small for p in prepared]
        hp = _round_up(max(im.shape[0] for im in small), _STRIDE)
        wp = _round_up(max(im.shape[1] for im in small), _STRIDE)
        # (N, H, W, 3) padded with the mean colour, so the padding is zero after normalisation.
        batch = np.empty((len(small), hp, wp, 3), dtype=np.uint8)
        batch[:] = np.array(BGR_MEAN, dtype=np.uint8)
        for i, im in enumerate(small):
            batch[i, : im.shape[0], : im.shape[1]] = im
        x = torch.from_numpy(batch).to(self.device).permute(0, 3, 1, 2).float() - self._mean
        with torch.inference_mode():
            loc, conf, landm = self.net(x)  # (N,P,4), (N,P,2) softmaxed, (N,P,10)
            priors = self._priors(hp, wp)
            boxes = decode_boxes(loc.float(), priors, self._cfg.variance)
            points = decode_landmarks(landm.float(), priors, self._cfg.variance)
            size = torch.tensor([wp, hp], device=self.device, dtype=torch.float32)
            boxes = boxes * size.repeat(2)
            points = points * size.repeat(5)
            scores = conf[..., 1].float()
            results = []
            for i, s in enumerate(scales):
                results.append(self._select(boxes[i], scores[i], points[i], 1.0 / s))
        return results

    def _priors(self, h: int, w: int) -> torch.Tensor:
        key = (h, w)
        if key not in self._prior_cache:
            if len(self._prior_cache) > 16:
                self._prior_cache.clear()
            self._prior_cache[key] = anchor_priors(self._cfg, h, w).to(self.device).unsqueeze(0)
        return self._prior_cache[key]

    def _select(
        self, boxes: torch.Tensor, scores: torch.Tensor, points: torch.Tensor, back: float
    ) -> list[Face]:
        keep = scores > self.threshold
        # Suppression runs on the CPU: the candidates above the threshold are few, and their
        # coordinates come back to the CPU anyway.
        boxes_np = boxes[keep].cpu().numpy()
        scores_np = scores[keep].cpu().numpy()
        points_np = points[keep].cpu().numpy()
        order = suppress(boxes_np, scores_np, self.nms_threshold, self.max_faces)
        boxes_np = boxes_np[order] * np.float32(back)
        points_np = (points_np[order] * np.float32(back)).reshape(-1, 5, 2)
        return [Face(b, float(sc), p) for b, sc, p in zip(boxes_np, scores_np[order], points_np)]


def _shrink(img: np.ndarray, scale: float) -> np.ndarray:
    if scale >= 1.0:
        return img
    h, w = img.shape[:2]
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    # INTER_AREA: shrinking with a plain bilinear filter aliases and costs the detector small faces.
    return cv2.resize(img, size, interpolation=cv2.INTER_AREA)


def _round_up(n: int, m: int) -> int:
    return (n + m - 1) // m * m
