"""RetinaFace's anchors, the decoding of its outputs into boxes and landmarks, and the greedy
suppression of overlapping boxes.

Suppression runs in NumPy on the CPU in float32 with the usual greedy rule (best score first, ties
in index order; a box is dropped when its overlap with a kept one is above the threshold), which
keeps exactly the boxes torchvision's ``nms`` keeps (tests/test_own_networks.py), and stops once
``limit`` boxes are kept, so a broken detector that scores every anchor as a face costs no more
than ``limit`` passes.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from gpen_watch.restore.nets.retinaface import RetinaFaceConfig

# RetinaFace was trained on BGR images with these per-channel means subtracted.
BGR_MEAN = (104.0, 117.0, 123.0)


def anchor_priors(cfg: RetinaFaceConfig, h: int, w: int) -> torch.Tensor:
    """Anchors (P, 4) as (cx, cy, w, h) relative to an (h, w) input, in the network's output order:
    level by level, then rows, columns, and the anchor sizes of one pixel innermost.

    Vectorised: a 1000 px photo has ~40k anchors, and a Python loop over them cost more than the
    network on a GPU.
    """
    per_level = []
    for step, min_sizes in zip(cfg.steps, cfg.min_sizes):
        fh, fw = math.ceil(h / step), math.ceil(w / step)
        cy = (torch.arange(fh, dtype=torch.float32) + 0.5) * step / h
        cx = (torch.arange(fw, dtype=torch.float32) + 0.5) * step / w
        gy, gx = torch.meshgrid(cy, cx, indexing="ij")  # (fh, fw)
        anchors = []
        for m in min_sizes:
            sizes = torch.tensor([m / w, m / h]).expand(fh, fw, 2)
            anchors.append(torch.cat([torch.stack([gx, gy], dim=-1), sizes], dim=-1))  # (fh, fw, 4)
        per_level.append(torch.stack(anchors, dim=2).reshape(-1, 4))
    priors = torch.cat(per_level)
    return priors.clamp_(0, 1) if cfg.clip else priors


def decode_boxes(loc: torch.Tensor, priors: torch.Tensor, variance: tuple[float, float]) -> torch.Tensor:
    """(N, P, 4) offsets -> (x1, y1, x2, y2) relative to the input. ``priors``: (1, P, 4)."""
    centre = priors[..., :2] + loc[..., :2] * variance[0] * priors[..., 2:]
    size = priors[..., 2:] * torch.exp(loc[..., 2:] * variance[1])
    top_left = centre - size / 2
    return torch.cat([top_left, top_left + size], dim=-1)


def decode_landmarks(
    landm: torch.Tensor, priors: torch.Tensor, variance: tuple[float, float]
) -> torch.Tensor:
    """(N, P, 10) offsets -> five (x, y) points relative to the input, as (N, P, 10)."""
    n, p = landm.shape[:2]
    offsets = landm.reshape(n, p, 5, 2)
    points = priors[..., None, :2] + offsets * variance[0] * priors[..., None, 2:]
    return points.reshape(n, p, 10)


def suppress(boxes: np.ndarray, scores: np.ndarray, threshold: float, limit: int) -> np.ndarray:
    """Indices of the boxes kept by greedy non-maximum suppression, best first, at most ``limit``.

    ``boxes`` (K, 4) as x1, y1, x2, y2; ``scores`` (K,). A box is dropped when its intersection over
    union with a kept box is above ``threshold``. Computed in float32, term by term as torchvision
    does, so the same boxes are kept even where an overlap is the threshold itself.
    """
    b = np.asarray(boxes, dtype=np.float32).reshape(-1, 4)
    x1, y1, x2, y2 = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
    areas = (x2 - x1) * (y2 - y1)
    # Stable: equal scores keep their index order.
    order = np.argsort(-np.asarray(scores, dtype=np.float32), kind="stable")
    thr = np.float32(threshold)
    zero = np.float32(0)
    keep: list[int] = []
    while order.size and len(keep) < limit:
        i, rest = int(order[0]), order[1:]
        keep.append(i)
        w = np.maximum(zero, np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest]))
        h = np.maximum(zero, np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest]))
        inter = w * h
        with np.errstate(divide="ignore", invalid="ignore"):
            overlap = inter / (areas[i] + areas[rest] - inter)
        # A NaN overlap (two empty boxes) compares false, so it is kept, as torchvision keeps it.
        order = rest[~(overlap > thr)]
    return np.array(keep, dtype=np.int64)
