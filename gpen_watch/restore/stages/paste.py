"""Paste restored face crops back into the full image (numpy + OpenCV only: no torch here).

Each face is warped back with the inverse of its alignment affine and blended as
``out = img * (1 - m) + face * m``. Where faces overlap, the face with the larger mask value wins
per pixel and ``m`` is that larger value (upstream GPEN's rule), so the result does not depend on
the order in which faces are pasted.

All work happens inside each face's paste region: the bounding box of its crop mapped back into
the image, clipped to it. Blending a 12 MP frame costs ~40x more per face than blending the region.
Faces whose regions overlap (transitively) are processed as one group over the group's bounding
box, so the per-pixel "stronger mask wins" rule sees every face that can touch a pixel; groups are
disjoint, so no pixel is ever blended twice.
"""

from __future__ import annotations

import functools
import math

import cv2
import numpy as np

from gpen_watch.catalog.face_frames import GPEN_FRAME, PasteMask
from gpen_watch.restore.stages.align import invert_affine, transform_points, warp_affine_resampled

# Feathered mask geometry at 512 (scaled linearly with the crop size). The outer band is exactly
# zero: GPEN's output is least reliable next to the crop border (the network saw padding there),
# and a zero border guarantees the warped mask reaches 0 before the paste region's edge, so no
# seam can form. The ramp is a smoothstep over 56 px (34 px from 10 % to 90 %), close to upstream's
# rectangle inset 26 px and blurred twice with sigma 11 (40 px from 10 % to 90 %; newer upstream
# code blurs with sigma 4, a harder edge), but it reaches exactly 0 and 1 instead of leaking a few
# percent to the crop border.
_FEATHER_ZERO_512 = 16.0
_FEATHER_RAMP_512 = 56.0
# Rounded corners: crop corners hold background, and a square-cornered ramp would show a diagonal
# crease where the two edge ramps meet.
_FEATHER_CORNER_512 = 128.0
# facexlib's square paste mask (FaceRestoreHelper without a parser) is made in the photo: the
# pasted crop's footprint eroded by r = side // 20 px and blurred by a Gaussian of that radius, so
# it rises from 0 at the crop's edge to 1 about a tenth of the side in. Here it is made once in
# crop space with the crop's own side, which is facexlib's mask exactly for a face pasted at 1:1;
# for one pasted smaller, facexlib's whole-pixel radius makes its ramp a little wider.
_SQUARE_PARTS = 20
# [1, 2, 1] / 4 both ways: the 3x3 smoothing of small faces (upstream's kernel, separated).
_BINOMIAL_3 = np.array([0.25, 0.5, 0.25], dtype=np.float32)


def feather_mask(size: int) -> np.ndarray:
    """Soft rounded-rectangle mask for a ``size`` x ``size`` crop: (size, size) float32 in [0, 1].

    0 on the outer ``16/512 * size`` pixels, rising with a smoothstep over ``56/512 * size`` pixels
    to 1 inside; corners rounded with radius ``128/512 * size``. Used when no parse mask is given.
    """
    result: np.ndarray = _feather_mask_cached(int(size)).copy()
    return result


@functools.lru_cache(maxsize=8)
def _feather_mask_cached(size: int) -> np.ndarray:
    if size <= 0:
        raise ValueError(f"crop size must be positive, got {size}")
    k = size / 512.0
    zero, ramp, radius = _FEATHER_ZERO_512 * k, _FEATHER_RAMP_512 * k, _FEATHER_CORNER_512 * k
    centres = np.arange(size, dtype=np.float64)
    edge = np.minimum(centres, size - 1 - centres)  # (size,) distance to the outermost pixel row
    dx = edge[None, :]
    dy = edge[:, None]
    # Distance to the crop's border, measured inwards, with corners rounded to `radius`.
    straight = np.minimum(dx, dy)
    in_corner = (dx < radius) & (dy < radius)
    rounded = radius - np.hypot(radius - np.minimum(dx, radius), radius - np.minimum(dy, radius))
    distance = np.where(in_corner, np.maximum(rounded, 0.0), straight)  # (size, size)
    t = np.clip((distance - zero) / max(ramp, 1e-6), 0.0, 1.0)
    mask = (t * t * (3.0 - 2.0 * t)).astype(np.float32)
    mask.setflags(write=False)
    return mask


def square_mask(size: int) -> np.ndarray:
    """facexlib's paste mask without a parser, for a ``size`` x ``size`` crop: (size, size)
    float32 in [0, 1], 0 at the crop's edge, 1 from about a tenth of the side in."""
    result: np.ndarray = _square_mask_cached(int(size)).copy()
    return result


@functools.lru_cache(maxsize=8)
def _square_mask_cached(size: int) -> np.ndarray:
    if size <= 0:
        raise ValueError(f"crop size must be positive, got {size}")
    # facexlib: the footprint loses its first row and column (a 2 px erosion), and its area's root
    # over 20 is the radius r of a 2r-wide erosion (anchored at its middle) and of a (2r + 1)-tap
    # Gaussian with OpenCV's sigma for that size.
    radius = max(1, (size - 1) // _SQUARE_PARTS)
    index = np.arange(size)
    inside = ((index >= radius + 1) & (index <= size - radius)).astype(np.float64)
    taps = cv2.getGaussianKernel(2 * radius + 1, 0.3 * (radius - 1) + 0.8, cv2.CV_64F)[:, 0]
    profile = np.convolve(inside, taps, mode="same")
    profile[[0, -1]] = 0.0  # exactly zero on the edge pixels, as every paste mask here
    mask = np.outer(profile, profile).astype(np.float32)
    mask.setflags(write=False)
    return mask


def plain_mask(size: int, rule: PasteMask = GPEN_FRAME.mask) -> np.ndarray:
    """The paste mask of a family (``rule``) where no parser gives one: (size, size) float32, read-only."""
    return _feather_mask_cached(size) if rule.plain == "feather" else _square_mask_cached(size)


def soften_parse_mask(mask: np.ndarray, rule: PasteMask = GPEN_FRAME.mask) -> np.ndarray:
    """A family's treatment of a face-parsing mask: (S, S) [0, 1] -> (S, S) float32 [0, 1].

    ``mask`` is the per-pixel probability of "face region" (ParseNet classes other than
    ``rule.not_face``) for one crop. The outer ``rule.parse_border / 512 * S`` pixels are zeroed
    (the network's output is least reliable at the crop border and the warped mask must vanish
    before the paste region's edge) and it is Gaussian-blurred twice with sigma
    ``rule.parse_sigma / 512 * S`` so the parse boundary becomes a soft transition; GPEN zeroes the
    border first (upstream GPEN's order: 26 px, sigma 4), facexlib after (10 px, sigma 11). The
    input is not modified.
    """
    soft: np.ndarray = np.clip(np.asarray(mask, dtype=np.float32), 0.0, 1.0)  # a new array
    if soft.ndim != 2 or soft.shape[0] != soft.shape[1]:
        raise ValueError(f"parse mask must be (S, S), got {soft.shape}")
    size = soft.shape[0]
    k = size / 512.0
    border = max(1, round(rule.parse_border * k))
    if not rule.border_after_blur:
        _zero_border(soft, border)
    # Upstream passes a 101x101 kernel; 4 sigma of support gives the same values within 1e-4 at
    # a third of the cost.
    sigma = rule.parse_sigma * k
    ksize = 2 * math.ceil(4.0 * sigma) + 1
    for _ in range(2):
        soft = cv2.GaussianBlur(soft, (ksize, ksize), sigma, borderType=cv2.BORDER_REFLECT_101)
    if rule.border_after_blur:
        _zero_border(soft, border)
    clipped: np.ndarray = np.clip(soft, 0.0, 1.0)
    return clipped


def _zero_border(mask: np.ndarray, border: int) -> None:
    mask[:border, :] = 0.0
    mask[-border:, :] = 0.0
    mask[:, :border] = 0.0
    mask[:, -border:] = 0.0


def smooth_small_faces(faces: np.ndarray, boxes: np.ndarray, below: float) -> np.ndarray:
    """Faces whose detection box is smaller than ``below`` pixels, smoothed with a 3x3 binomial.

    faces: (F, S, S, 3) uint8 restored crops; boxes: (F, 4) x1, y1, x2, y2 detection boxes in image
    pixels. A face counts as small when the box's shorter side is under ``below`` (0: none is).
    Upstream GPEN does the same before pasting: a small face is shrunk a lot on the way back into
    the photo, and the generator's fine texture would alias into speckle. Returns a new array; the
    other faces are copied unchanged.
    """
    out = np.array(faces, dtype=np.uint8, copy=True)
    if below <= 0 or len(out) == 0:
        return out
    b = np.asarray(boxes, dtype=np.float64).reshape(len(out), 4)
    short = np.minimum(b[:, 2] - b[:, 0], b[:, 3] - b[:, 1])
    for index in np.flatnonzero(short < below):
        out[index] = cv2.sepFilter2D(
            out[index], -1, _BINOMIAL_3, _BINOMIAL_3, borderType=cv2.BORDER_REFLECT_101
        )
    return out


def paste_region(
    affine: np.ndarray, crop_size: int, image_hw: tuple[int, int]
) -> tuple[int, int, int, int] | None:
    """Pixels a crop can touch when pasted back: (x0, y0, x1, y1), half-open, or None if none.

    ``affine`` is the forward (image -> crop) affine. The crop's footprint
    [-0.5, S - 0.5]^2 is mapped into the image, its bounding box widened by one pixel for the
    interpolation kernels and clipped to the image. Pixels outside it are never written.
    """
    inverse = invert_affine(affine)
    edge = crop_size - 0.5
    corners = np.array([[-0.5, -0.5], [edge, -0.5], [-0.5, edge], [edge, edge]])
    mapped = transform_points(inverse, corners)  # (4, 2) in image pixels
    height, width = image_hw
    x0 = max(0, math.floor(mapped[:, 0].min()) - 1)
    y0 = max(0, math.floor(mapped[:, 1].min()) - 1)
    x1 = min(width, math.ceil(mapped[:, 0].max()) + 2)
    y1 = min(height, math.ceil(mapped[:, 1].max()) + 2)
    if x1 <= x0 or y1 <= y0:
        return None
    return x0, y0, x1, y1


def _overlap_groups(boxes: list[tuple[int, int, int, int]]) -> list[list[int]]:
    """Indices of ``boxes`` grouped into connected components of pairwise overlap.

    Returns groups in order of their first member, each sorted ascending (paste order).
    """
    count = len(boxes)
    if count == 0:
        return []
    b = np.asarray(boxes, dtype=np.int64)  # (N, 4)
    overlap = (
        (b[:, None, 0] < b[None, :, 2])
        & (b[None, :, 0] < b[:, None, 2])
        & (b[:, None, 1] < b[None, :, 3])
        & (b[None, :, 1] < b[:, None, 3])
    )  # (N, N), symmetric, True on the diagonal
    group_of = [-1] * count
    groups: list[list[int]] = []
    for start in range(count):
        if group_of[start] >= 0:
            continue
        group_of[start] = len(groups)
        members, stack = [start], [start]
        while stack:
            for other in np.flatnonzero(overlap[stack.pop()]):
                if group_of[other] < 0:
                    group_of[other] = group_of[start]
                    members.append(int(other))
                    stack.append(int(other))
        groups.append(sorted(members))
    return groups


def _check_inputs(
    image: np.ndarray, faces: np.ndarray, affines: np.ndarray, masks: np.ndarray | None
) -> None:
    if image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(
            f"image must be (H, W, 3); pass only the colour channels of grey/BGRA images, got {image.shape}"
        )
    if image.dtype not in (np.uint8, np.uint16):
        raise ValueError(f"image must be uint8 or uint16, got {image.dtype}")
    if faces.ndim != 4 or faces.shape[3] != 3 or faces.shape[1] != faces.shape[2] or faces.dtype != np.uint8:
        raise ValueError(f"faces must be (F, S, S, 3) uint8, got {faces.shape} {faces.dtype}")
    if affines.shape != (len(faces), 2, 3):
        raise ValueError(f"affines must be ({len(faces)}, 2, 3), got {affines.shape}")
    if masks is not None and (
        masks.ndim != 3 or len(masks) != len(faces) or masks.shape[1] != masks.shape[2]
    ):
        raise ValueError(f"masks must be ({len(faces)}, S, S), got {masks.shape}")


def paste_faces(
    image: np.ndarray,
    faces: np.ndarray,
    affines: np.ndarray,
    masks: np.ndarray | None = None,
    *,
    soften_masks: bool = True,
    rule: PasteMask = GPEN_FRAME.mask,
) -> np.ndarray:
    """Blend restored face crops back into ``image``; returns a new array, ``image`` is untouched.

    Args:
        image: (H, W, 3) BGR, uint8 or uint16. Grey or BGRA images: the caller passes (and later
            reassembles) only the 3 colour channels; alpha is left to the caller.
        faces: (F, S, S, 3) uint8 BGR restored crops (scaled by 257 onto a uint16 image).
        affines: (F, 2, 3) forward affines, image -> crop, as ``align_faces`` returns them.
        masks: optional (F, S', S') float32 face-region probabilities in [0, 1] from a face parser
            (resized to S when S' differs); softened with ``soften_parse_mask``. Without them every
            face uses ``plain_mask(S, rule)``.
        soften_masks: False when ``masks`` are already final blend masks (e.g. the output of
            ``soften_parse_mask`` or ``feather_mask``, computed once by the caller): they are then
            used as given (clipped to [0, 1]) and should be 0 at the crop border.
        rule: the model family's paste mask (``catalog.face_frames``); GPEN's by default.

    Returns:
        (H, W, 3) array of ``image``'s dtype. Pixels outside every face's ``paste_region`` and
        pixels whose mask is 0 are bit-identical to ``image``.
    """
    image = np.asarray(image)
    faces = np.asarray(faces)
    affines = np.asarray(affines, dtype=np.float64)
    masks = None if masks is None else np.asarray(masks, dtype=np.float32)
    _check_inputs(image, faces, affines, masks)
    out: np.ndarray = image.copy()
    if len(faces) == 0:
        return out
    size = faces.shape[1]
    gain = 257.0 if image.dtype == np.uint16 else 1.0  # 8-bit face -> 16-bit range: 255 * 257 = 65535
    regions = [paste_region(a, size, image.shape[:2]) for a in affines]
    # Faces wholly off-image drop out.
    placed = {i: region for i, region in enumerate(regions) if region is not None}
    order = list(placed)
    crop_masks = _CropMasks(masks, soften_masks, rule)
    for group in _overlap_groups([placed[i] for i in order]):
        members = [order[g] for g in group]
        _paste_group(out, faces, affines, crop_masks, [(i, placed[i]) for i in members], gain)
    return out


class _CropMasks:
    """The masks of ``paste_faces``' faces as given: each face's in crop space, on request."""

    def __init__(self, masks: np.ndarray | None, soften: bool, rule: PasteMask) -> None:
        self.masks, self.soften, self.rule = masks, soften, rule

    def crop_mask(self, index: int, size: int) -> np.ndarray:
        """(S, S) float32 blend mask of one face in crop space."""
        if self.masks is None:
            return plain_mask(size, self.rule)
        mask = self.masks[index]
        if mask.shape[0] != size:
            mask = cv2.resize(mask, (size, size), interpolation=cv2.INTER_LINEAR)
        return soften_parse_mask(mask, self.rule) if self.soften else np.clip(mask, 0.0, 1.0)


def _warp_face(
    faces: np.ndarray,
    affines: np.ndarray,
    masks: _CropMasks,
    index: int,
    region: tuple[int, int, int, int],
) -> tuple[np.ndarray, np.ndarray]:
    """One face and its blend mask warped into its paste region: (h, w, 3) uint8, (h, w) float32."""
    x0, y0, x1, y1 = region
    # Crop -> region-local pixels: the inverse affine shifted by the region's origin, so the warps
    # produce only the region's pixels instead of a full frame.
    local = invert_affine(affines[index])
    local[:, 2] -= (x0, y0)
    dsize = (x1 - x0, y1 - y0)
    # Replicated border: pixels just outside the crop get its edge colour rather than black. The
    # mask is 0 there anyway; this only keeps the interpolation at the crop's edge clean.
    face = warp_affine_resampled(faces[index], local, dsize, border_mode=cv2.BORDER_REPLICATE)
    # The mask is smooth, so bilinear is exact enough; outside the crop it is 0.
    mask = cv2.warpAffine(
        masks.crop_mask(index, faces.shape[1]),
        local,
        dsize,
        flags=cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=0.0,
    )
    return face, mask


def _paste_group(
    out: np.ndarray,
    faces: np.ndarray,
    affines: np.ndarray,
    masks: _CropMasks,
    members: list[tuple[int, tuple[int, int, int, int]]],
    gain: float,
) -> None:
    """Blend one group of mutually overlapping faces into ``out`` in place, over the group's box."""
    if len(members) == 1:  # the common case: no per-pixel competition, blend straight from the warp
        index, (x0, y0, x1, y1) = members[0]
        face, mask = _warp_face(faces, affines, masks, index, (x0, y0, x1, y1))
        _blend_into(out[y0:y1, x0:x1], face, mask, gain)
        return
    gx0 = min(r[0] for _, r in members)
    gy0 = min(r[1] for _, r in members)
    gx1 = max(r[2] for _, r in members)
    gy1 = max(r[3] for _, r in members)
    # Per-pixel strongest mask so far and the face it belongs to, over the group box only.
    best_mask = np.zeros((gy1 - gy0, gx1 - gx0), dtype=np.float32)
    best_face = np.zeros((gy1 - gy0, gx1 - gx0, 3), dtype=np.uint8)
    for index, region in members:
        x0, y0, x1, y1 = region
        face, mask = _warp_face(faces, affines, masks, index, region)
        window = (slice(y0 - gy0, y1 - gy0), slice(x0 - gx0, x1 - gx0))
        wins = mask > best_mask[window]  # strictly: on a tie the earlier face keeps the pixel, as upstream
        np.copyto(best_face[window], face, where=wins[..., None])
        np.maximum(best_mask[window], mask, out=best_mask[window])
    _blend_into(out[gy0:gy1, gx0:gx1], best_face, best_mask, gain)


def _blend_into(target: np.ndarray, face: np.ndarray, weight: np.ndarray, gain: float) -> None:
    """``target = target + (face * gain - target) * weight``, rounded, in place.

    target: (h, w, 3) uint8/uint16 view into the output; face: (h, w, 3) uint8; weight: (h, w)
    float32 in [0, 1]. Written as base + delta * m so that m == 0 gives back exactly ``base``
    (untouched pixels stay bit-identical), and in place on one float32 buffer because on a
    2-megapixel region each extra temporary costs several milliseconds.
    """
    if target.dtype == np.uint8 and gain == 1.0:
        # The same sum in one vectorised OpenCV pass: 3x faster on a 6 MP portrait face region
        # (34 vs 104 ms), within 1 level of the float path on 0.1 % of pixels (rounding); weights
        # 0 and 1 still give back the target and the face exactly.
        target[...] = cv2.blendLinear(face, target, weight, 1.0 - weight)
        return
    base = target.astype(np.float32)
    mixed = face.astype(np.float32)
    if gain != 1.0:
        mixed *= gain
    mixed -= base
    mixed *= weight[..., None]
    mixed += base
    np.rint(mixed, out=mixed)
    np.clip(mixed, 0, np.iinfo(target.dtype).max, out=mixed)
    target[...] = mixed
