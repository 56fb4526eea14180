"""dlib's five-point landmark predictor (``shape_predictor_5_face_landmarks.dat``) in numpy.

Kazemi and Sullivan's cascade of regression-tree forests: from a mean shape placed in a face's box,
each of 15 stages reads 800 pixels at places fixed relative to the current shape (an anchor
landmark plus an offset, turned and scaled with the shape), and each of its 500 trees of depth 4
compares pairs of them to pick a leaf, whose correction is added to the shape. The five points are
the outer and inner corners of the eye on the image's right, then of the eye on its left, then the
bottom of the nose: what dlib's face chips (and so the face-recognition network) are aligned by.

Evaluated here as dlib does, step for step (pixels by dlib's grey value, the integer mean of red,
green and blue; places rounded to the nearest pixel; a place outside the image reads 0), so on the
same box it gives dlib's points. Tests hold it to dlib's own predictor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpen_watch.restore.nets.dlib_format import DlibStream

POINTS = 5


@dataclass(frozen=True)
class ShapePredictor:
    """The cascade as arrays: C stages of T trees of depth D (S = 2^D - 1 splits, 2^D leaves),
    F feature pixels a stage."""

    mean_shape: np.ndarray  # (P, 2) float32, in the box's unit square
    split_a: np.ndarray  # (C, T, S) int: the feature pixels each split compares
    split_b: np.ndarray  # (C, T, S) int
    threshold: np.ndarray  # (C, T, S) float32
    leaves: np.ndarray  # (C, T, 2^D, P * 2) float32: the correction each leaf adds
    anchors: np.ndarray  # (C, F) int: the landmark each feature pixel is placed by
    offsets: np.ndarray  # (C, F, 2) float32: its offset from it, in the mean shape's frame

    @property
    def depth(self) -> int:
        return int(np.log2(self.leaves.shape[2]))

    def __call__(self, image: np.ndarray, box: tuple[int, int, int, int]) -> np.ndarray:
        """The landmarks (P, 2) float64, (x, y) pixels, of the face in ``box`` (left, top, right,
        bottom; inclusive, as dlib's rectangles) of ``image``: (H, W) uint8 grey, or (H, W, 3)
        uint8 colour, of which only the pixels read are made grey (``dlib_gray``)."""
        points: np.ndarray = self.many([image], [box])[0]
        return points

    def many(self, images: Sequence[np.ndarray], boxes: Sequence[tuple[int, int, int, int]]) -> np.ndarray:
        """The landmarks (N, P, 2) of N faces, face i in ``boxes[i]`` of ``images[i]`` (as
        ``__call__`` takes them; the images may differ in size). The faces go through each stage
        together, so numpy's work per call is spread over them all; each face's arithmetic is its
        own, the same as alone."""
        n = len(images)
        if n == 0:
            return np.zeros((0, POINTS, 2))
        corners = np.array([[float(v) for v in box] for box in boxes])
        origin = corners[:, None, 0:2]
        scale = corners[:, None, 2:4] - origin
        shape = np.repeat(self.mean_shape[None], n, axis=0)
        stages, trees, splits = self.split_a.shape
        leaves_per_tree = self.leaves.shape[2]
        # Flat indices: np.take on one axis is several times faster than indexing three.
        first_split = np.arange(trees)[None, :] * splits
        first_leaf = np.arange(trees)[None, :] * leaves_per_tree - splits
        first_value = np.arange(n)[:, None] * self.offsets.shape[1]
        heights = np.array([image.shape[0] for image in images])[:, None]
        widths = np.array([image.shape[1] for image in images])[:, None]
        for stage in range(stages):
            turn = _similarities(self.mean_shape, shape).astype(np.float32)
            places = self.offsets[stage] @ turn.transpose(0, 2, 1) + shape[:, self.anchors[stage]]
            pixels = np.floor(origin + places.astype(np.float64) * scale + 0.5).astype(np.int64)
            x, y = pixels[..., 0], pixels[..., 1]
            inside = (x >= 0) & (x < widths) & (y >= 0) & (y < heights)
            np.clip(x, 0, np.maximum(widths - 1, 0), out=x)
            np.clip(y, 0, np.maximum(heights - 1, 0), out=y)
            values = np.where(inside, _grey([_read(image, y[i], x[i]) for i, image in enumerate(images)]), 0)
            values = values.astype(np.float32)
            split_a, split_b = self.split_a[stage].ravel(), self.split_b[stage].ravel()
            threshold = self.threshold[stage].ravel()
            node = np.zeros((n, trees), dtype=np.int64)
            for _ in range(self.depth):
                at = first_split + node
                a = values.take(first_value + split_a.take(at))
                b = values.take(first_value + split_b.take(at))
                left_branch = a - b > threshold.take(at)
                node = np.where(left_branch, 2 * node + 1, 2 * node + 2)
            moves = self.leaves[stage].reshape(trees * leaves_per_tree, -1).take(first_leaf + node, axis=0)
            shape = shape + moves.sum(axis=1).reshape(n, -1, 2)
        result: np.ndarray = origin + shape.astype(np.float64) * scale
        return result


def _read(image: np.ndarray, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The pixels at (``y``, ``x``), places within the image (an empty image reads zeros)."""
    if image.shape[0] == 0 or image.shape[1] == 0:
        return np.zeros((len(x), *image.shape[2:]), dtype=image.dtype)
    pixels: np.ndarray = image[y, x]
    return pixels


def _grey(reads: list[np.ndarray]) -> np.ndarray:
    """Each face's pixels read (F of them, grey or BGR) as dlib's grey values (F, features)."""
    if all(r.ndim == 2 for r in reads):
        grey: np.ndarray = np.stack(reads).astype(np.uint16).sum(axis=2) // 3
        return grey
    return np.stack([r if r.ndim == 1 else r.astype(np.uint16).sum(axis=1) // 3 for r in reads])


def _similarities(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The 2x2 scaled rotations (N, 2, 2) of the least-squares similarities taking ``src`` (P, 2)
    to each of ``dst`` (N, P, 2)."""
    s = src.astype(np.float64) - src.mean(axis=0)
    d = dst.astype(np.float64) - dst.mean(axis=1, keepdims=True)
    spread = float((s * s).sum())
    a = (s[:, 0] * d[:, :, 0] + s[:, 1] * d[:, :, 1]).sum(axis=1) / spread
    b = (s[:, 0] * d[:, :, 1] - s[:, 1] * d[:, :, 0]).sum(axis=1) / spread
    return np.stack([np.stack([a, -b], axis=1), np.stack([b, a], axis=1)], axis=1)


def dlib_gray(image_bgr: np.ndarray) -> np.ndarray:
    """The grey dlib's predictor reads from a colour image: (B + G + R) // 3, uint8."""
    total = image_bgr.astype(np.uint16).sum(axis=2)
    result: np.ndarray = (total // 3).astype(np.uint8)
    return result


def read_shape_predictor(path: Path, advice: str = "") -> ShapePredictor:
    """The predictor in ``path`` (dlib's ``shape_predictor_5_face_landmarks.dat``). A file that
    is not a five-point predictor of full trees raises ModelError; ``advice`` is said after it."""
    s = DlibStream.open(path, advice)
    s.version("the shape predictor", 1)
    mean_shape = s.matrix().reshape(-1)
    if mean_shape.size != 2 * POINTS:
        raise s.fail(f"a shape of {mean_shape.size // 2} points, not {POINTS}")
    stages: list[list[tuple[list[tuple[int, int, float]], list[np.ndarray]]]] = s.items(
        lambda: s.items(lambda: (s.items(lambda: (s.integer(), s.integer(), s.real())), s.items(s.matrix)))
    )
    anchors = s.items(lambda: s.items(s.integer))
    offsets = s.items(lambda: s.items(lambda: (s.real(), s.real())))
    if not s.at_end:
        raise s.fail("more data after the predictor")
    if not stages or len(anchors) != len(stages) or len(offsets) != len(stages):
        raise s.fail(f"{len(stages)} stages with {len(anchors)} and {len(offsets)} feature sets")
    return _arrays(s, mean_shape, stages, anchors, offsets)


def _arrays(
    s: DlibStream,
    mean_shape: np.ndarray,
    stages: list[list[tuple[list[tuple[int, int, float]], list[np.ndarray]]]],
    anchors: list[list[int]],
    offsets: list[list[tuple[float, float]]],
) -> ShapePredictor:
    """The cascade as rectangular arrays, once every stage is seen to have the same shape."""
    trees, splits = len(stages[0]), len(stages[0][0][0])
    features = len(anchors[0])
    for stage, anchor, offset in zip(stages, anchors, offsets):
        if len(stage) != trees or len(anchor) != features or len(offset) != features:
            raise s.fail("stages of different sizes")
        for tree_splits, tree_leaves in stage:
            if len(tree_splits) != splits or len(tree_leaves) != splits + 1:
                raise s.fail("a tree that is not full")
            if any(leaf.size != 2 * POINTS for leaf in tree_leaves):
                raise s.fail("a leaf that does not move every point")
    if (splits + 1) & splits:
        raise s.fail(f"trees of {splits} splits")
    split = np.array([[[(a, b) for a, b, _ in splits_] for splits_, _ in stage] for stage in stages])
    threshold = np.array(
        [[[t for _, _, t in splits_] for splits_, _ in stage] for stage in stages], np.float32
    )
    leaves = np.array(
        [[np.stack(leaves_).reshape(splits + 1, -1) for _, leaves_ in stage] for stage in stages]
    )
    anchor_array = np.array(anchors, dtype=np.int64)
    if split.min() < 0 or split.max() >= features or anchor_array.min() < 0 or anchor_array.max() >= POINTS:
        raise s.fail("a split or an anchor that names no feature or point")
    return ShapePredictor(
        mean_shape=mean_shape.reshape(POINTS, 2).astype(np.float32),
        split_a=split[..., 0].astype(np.int64),
        split_b=split[..., 1].astype(np.int64),
        threshold=threshold,
        leaves=leaves.astype(np.float32),
        anchors=anchor_array,
        offsets=np.array(offsets, dtype=np.float32),
    )
