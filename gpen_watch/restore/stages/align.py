"""Face alignment to a family's 5-point template (numpy + OpenCV only: no torch here).

Conventions used throughout ``align`` and ``paste``:

* Points are (x, y) pixel coordinates with pixel centres at integers, the convention of
  ``cv2.warpAffine``.
* An affine is a (2, 3) float64 matrix ``M`` that maps a point ``p`` to ``M[:, :2] @ p + M[:, 2]``.
  ``align_faces`` returns the *forward* affines (full image -> face crop); ``paste`` inverts them.
* Images are BGR, (H, W, 3), uint8 (uint16 is accepted too; crops keep the input's dtype).
"""

from __future__ import annotations

import math

import cv2
import numpy as np

from gpen_watch.catalog.face_frames import GPEN_FRAME, FaceFrame

# GPEN's reference points for a 512x512 crop, (x, y), in this order: left eye, right eye, nose tip,
# left mouth corner, right mouth corner ("left" = left as seen in the image); each family's are in
# its frame (``catalog.face_frames``). The geometric checks below use these.
GPEN_TEMPLATE_512 = np.array(GPEN_FRAME.template, dtype=np.float32)

# Below this scale factor (output pixels per input pixel) a warp is treated as a shrink and the
# source is low-pass filtered first (see warp_affine_resampled). Just under 1.0 the bicubic kernel's
# own support already suppresses the little aliasing there is, and an extra filter would only blur.
_PREFILTER_BELOW = 0.9
# Lanczos window size (lobes) of the anti-aliasing filter; 3 is what image libraries use for
# high-quality downscaling (Pillow's LANCZOS, ImageMagick's default).
_LANCZOS_LOBES = 3
# The Lanczos kernel grows as 1/scale (6/scale + 1 taps). Below this scale the source region is
# first shrunk with INTER_AREA (cost linear in the region's pixels, whatever the factor) to where
# the remaining shrink is _RESIDUAL_SCALE, so the kernel never exceeds 6/0.125 + 1 = 49 taps: a
# detector reporting a face millions of pixels across once asked for a 2.5-million-tap filter.
# At a residual 0.25 the box filter's response at the output's Nyquist frequency is sinc(1/8),
# 0.97, so it barely touches what the Lanczos filter keeps.
_LANCZOS_MIN_SCALE = 0.125
_RESIDUAL_SCALE = 0.25
# A detection is not a face of this photo when its landmarks spread wider than this many times the
# photo's long side, its box is more than _MAX_BOX_SIDE times that side, or less than
# _MIN_BOX_INSIDE of the box lies in the photo (a face cut by the frame keeps far more than that).
_MAX_LANDMARK_SPAN = 2.0
_MAX_BOX_SIDE = 4.0
_MIN_BOX_INSIDE = 0.1


def face_template(size: int, frame: FaceFrame = GPEN_FRAME) -> np.ndarray:
    """``frame``'s 5-point template for a ``size`` x ``size`` crop: (5, 2) float32, (x, y).

    The 512 template is scaled linearly (256 halves every coordinate), as upstream does.
    """
    if size <= 0:
        raise ValueError(f"crop size must be positive, got {size}")
    points = np.array(frame.template, dtype=np.float32)
    result: np.ndarray = (points * np.float32(size / 512.0)).astype(np.float32)
    return result


def estimate_similarity(src_pts: np.ndarray, dst_pts: np.ndarray) -> np.ndarray:
    """Least-squares similarity (rotation, uniform scale, translation; never a reflection).

    Args:
        src_pts: (N, 2) points, N >= 2.
        dst_pts: (N, 2) corresponding points.

    Returns:
        (2, 3) float64 ``M`` minimising ``sum_i |M[:, :2] @ src_i + M[:, 2] - dst_i|^2`` over
        matrices of the form ``[[a, -b, tx], [b, a, ty]]``.

    The model is linear in (a, b, tx, ty), so the minimiser is closed-form: after removing both
    centroids, ``a = sum(s . d) / sum(|s|^2)`` and ``b = sum(s x d) / sum(|s|^2)``. It is the same
    solution Umeyama's method gives, and ``[[a, -b], [b, a]]`` is a scaled rotation by
    construction, so a mirrored point set cannot produce a reflection.
    """
    src = np.asarray(src_pts, dtype=np.float64)
    dst = np.asarray(dst_pts, dtype=np.float64)
    if src.ndim != 2 or src.shape[1] != 2 or src.shape != dst.shape or len(src) < 2:
        raise ValueError(f"need two (N>=2, 2) point arrays, got {src.shape} and {dst.shape}")
    if not (np.isfinite(src).all() and np.isfinite(dst).all()):
        raise ValueError("points must be finite")
    src_mean = src.mean(axis=0)
    dst_mean = dst.mean(axis=0)
    s = src - src_mean  # (N, 2)
    d = dst - dst_mean  # (N, 2)
    spread = float((s * s).sum())
    if spread <= 1e-12 * (1.0 + float(np.abs(src_mean).max())) ** 2:
        raise ValueError("source points coincide: similarity transform is undefined")
    a = float((s[:, 0] * d[:, 0] + s[:, 1] * d[:, 1]).sum()) / spread
    b = float((s[:, 0] * d[:, 1] - s[:, 1] * d[:, 0]).sum()) / spread
    linear = np.array([[a, -b], [b, a]])
    translation = dst_mean - linear @ src_mean
    return np.hstack([linear, translation[:, None]])


def invert_affine(m: np.ndarray) -> np.ndarray:
    """Inverse of a (2, 3) affine: ``[A | t]`` -> ``[A^-1 | -A^-1 t]``, (2, 3) float64."""
    m = np.asarray(m, dtype=np.float64)
    if m.shape != (2, 3):
        raise ValueError(f"affine must be (2, 3), got {m.shape}")
    linear = m[:, :2]
    det = float(np.linalg.det(linear))
    if not math.isfinite(det) or abs(det) < 1e-12:
        raise ValueError("affine is singular")
    inv_linear = np.linalg.inv(linear)
    return np.hstack([inv_linear, (-inv_linear @ m[:, 2])[:, None]])


def affine_scale(m: np.ndarray) -> float:
    """Linear scale factor of an affine (destination pixels per source pixel): sqrt(|det A|)."""
    return math.sqrt(abs(float(np.linalg.det(np.asarray(m, dtype=np.float64)[:, :2]))))


def paste_sides(affines: np.ndarray, size: int) -> np.ndarray:
    """(F,) the side in photo pixels that each ``size`` px crop covers once pasted back, from the
    forward (photo -> crop) affines (F, 2, 3)."""
    return np.array([size / max(affine_scale(m), 1e-12) for m in affines], dtype=np.float64)


def transform_points(m: np.ndarray, pts: np.ndarray) -> np.ndarray:
    """Apply a (2, 3) affine to (..., 2) points; returns float64 of the same shape."""
    m = np.asarray(m, dtype=np.float64)
    pts = np.asarray(pts, dtype=np.float64)
    result: np.ndarray = pts @ m[:, :2].T + m[:, 2]
    return result


def _preimage_box(
    m: np.ndarray, dsize: tuple[int, int], src_hw: tuple[int, int], margin: int
) -> tuple[int, int, int, int] | None:
    """Integer box (x0, y0, x1, y1), half-open, of source pixels a warp into ``dsize`` can read.

    The destination's footprint [-0.5, w-0.5] x [-0.5, h-0.5] is mapped back through ``m`` and
    widened by ``margin`` source pixels for the filters' support; None when it misses the source.
    """
    w, h = dsize
    corners = np.array([[-0.5, -0.5], [w - 0.5, -0.5], [-0.5, h - 0.5], [w - 0.5, h - 0.5]])
    src_corners = transform_points(invert_affine(m), corners)
    x0 = max(0, math.floor(src_corners[:, 0].min()) - margin)
    y0 = max(0, math.floor(src_corners[:, 1].min()) - margin)
    x1 = min(src_hw[1], math.ceil(src_corners[:, 0].max()) + margin + 1)
    y1 = min(src_hw[0], math.ceil(src_corners[:, 1].max()) + margin + 1)
    if x1 <= x0 or y1 <= y0:
        return None
    return x0, y0, x1, y1


def lanczos_lowpass_kernel(scale: float, lobes: int = _LANCZOS_LOBES) -> np.ndarray:
    """1-D Lanczos-windowed sinc low-pass for shrinking by ``scale`` (< 1): (2*half+1,) float32.

    Cut-off at the output's Nyquist frequency, ``0.5 * scale`` cycles per source pixel, which is
    what a Lanczos resize does when it stretches its kernel by 1/scale; taps sum to 1.
    """
    if not _LANCZOS_MIN_SCALE <= scale < 1.0:
        # The bound on the filter's size is this function's to keep, not its callers'.
        raise ValueError(f"Lanczos prefilter scale must be in [{_LANCZOS_MIN_SCALE}, 1), got {scale}")
    cutoff = 0.5 * scale
    half = math.ceil(lobes / (2.0 * cutoff))
    n = np.arange(-half, half + 1, dtype=np.float64)
    taps = np.sinc(2.0 * cutoff * n) * np.sinc(2.0 * cutoff * n / lobes)
    taps[np.abs(n) >= lobes / (2.0 * cutoff)] = 0.0
    result: np.ndarray = (taps / taps.sum()).astype(np.float32)
    return result


def warp_affine_resampled(
    src: np.ndarray,
    m: np.ndarray,
    dsize: tuple[int, int],
    *,
    border_mode: int = cv2.BORDER_REFLECT_101,
    float_output: bool = False,
) -> np.ndarray:
    """``cv2.warpAffine(src, m, dsize)`` with resampling chosen by the warp's scale.

    Args:
        src: (H, W) or (H, W, C) uint8, uint16 or float32 image.
        m: (2, 3) affine, source -> destination pixel coordinates (a similarity in practice).
        dsize: (width, height) of the output, as OpenCV spells it.
        border_mode: OpenCV border rule for pixels the warp reads outside ``src`` (constant
            borders fill with 0).
        float_output: return float32 (unrounded, may overshoot the input range slightly) instead
            of ``src``'s dtype (rounded and saturated).

    Returns:
        (height, width[, C]) array.

    Magnifying or near 1:1: INTER_CUBIC, sharper than bilinear and close to lossless when a bicubic
    upscale is undone (align a small face, paste the untouched crop back: 58 dB on the astronaut).
    Shrinking (scale < 0.9): warpAffine only point-samples (it has no INTER_AREA), which aliases
    fine detail such as hair, lashes and teeth into moire once it skips source pixels. So the
    source region the warp reads is first low-pass filtered with a separable Lanczos-3 kernel cut
    at the output's Nyquist frequency, then warped bicubically. Measured on the astronaut, against
    Pillow's properly anti-aliased LANCZOS resize: this scheme 49-52 dB; INTER_AREA (box filter)
    pre-shrink 39-40 dB; plain bicubic 30 dB at scale 0.37. The box filter also attenuates the
    passband: it turned the 512-crop round trip into 38 dB, the Lanczos filter gives 43.5 dB.
    """
    m = np.asarray(m, dtype=np.float64)
    if min(src.shape[:2]) == 1 and border_mode == cv2.BORDER_REFLECT_101:
        # The same pixels for a one-pixel side; OpenCV's warp never returns with reflection there.
        border_mode = cv2.BORDER_REPLICATE
    scale = affine_scale(m)
    work_dtype = np.float32 if float_output else src.dtype
    if scale >= _PREFILTER_BELOW:
        return cv2.warpAffine(
            src.astype(work_dtype, copy=False), m, dsize, flags=cv2.INTER_CUBIC, borderMode=border_mode
        )
    if not math.isfinite(scale) or scale <= 0.0:
        raise ValueError("affine is degenerate (zero or non-finite scale)")
    residual = max(scale, _RESIDUAL_SCALE if scale < _LANCZOS_MIN_SCALE else 0.0)
    half = len(lanczos_lowpass_kernel(residual)) // 2
    # Filter only the source region the output can reach (plus the filter's and the bicubic
    # kernel's reach, so the region's own edges never leak in): on a 12 MP photo filtering the
    # whole frame for every face would cost far more than the warp. The margin is in source
    # pixels: after a pre-shrink one filtered pixel spans scale / residual of them.
    margin = math.ceil((half + 3) * residual / scale)
    box = _preimage_box(m, dsize, src.shape[:2], margin=margin)
    if box is None:
        # The output lies wholly off the source: only the border rule decides its pixels.
        region, x0, y0 = src, 0, 0
    else:
        x0, y0, x1, y1 = box
        region = src[y0:y1, x0:x1]
    # region pixel -> destination pixel
    local = m.copy()
    local[:, 2] += m[:, :2] @ np.array([x0, y0], dtype=np.float64)
    if residual > scale:
        region, local = _preshrink(region, local, scale / residual)
        residual = affine_scale(local)
    kernel = lanczos_lowpass_kernel(min(max(residual, _LANCZOS_MIN_SCALE), _PREFILTER_BELOW))
    filtered = cv2.sepFilter2D(region, cv2.CV_32F, kernel, kernel, borderType=cv2.BORDER_REFLECT_101)
    warped = cv2.warpAffine(filtered, local, dsize, flags=cv2.INTER_CUBIC, borderMode=border_mode)
    if float_output:
        return warped
    return _round_to(warped, src.dtype)


def _preshrink(region: np.ndarray, m: np.ndarray, factor: float) -> tuple[np.ndarray, np.ndarray]:
    """Shrink ``region`` by about ``factor`` (< 1) with INTER_AREA; returns it and the affine
    ``m`` (region pixel -> destination) rewritten for the shrunk pixels."""
    h, w = region.shape[:2]
    # At least 2 pixels a side (when there were): see the one-pixel note in warp_affine_resampled.
    new_w, new_h = max(min(2, w), round(w * factor)), max(min(2, h), round(h * factor))
    shrunk = cv2.resize(region, (new_w, new_h), interpolation=cv2.INTER_AREA)
    # cv2.resize maps pixel centres as region = (shrunk + 0.5) * (w / new_w) - 0.5, per axis.
    sx, sy = w / new_w, h / new_h
    to_region = np.array([[sx, 0.0, 0.5 * sx - 0.5], [0.0, sy, 0.5 * sy - 0.5]])
    composed = np.hstack([m[:, :2] @ to_region[:, :2], (m[:, :2] @ to_region[:, 2] + m[:, 2])[:, None]])
    return shrunk, composed


def face_problem(box: np.ndarray | None, landmarks: np.ndarray, image_hw: tuple[int, int]) -> str | None:
    """Why a detection cannot be a face in an image of ``image_hw`` (H, W), or None if it can.

    Args:
        box: (4,) x1, y1, x2, y2 in image pixels, or None when only landmarks are known.
        landmarks: (5, 2) points, ordered as ``GPEN_TEMPLATE_512``.

    A broken or mismatched detector checkpoint reports such geometry; aligning it would ask for a
    crop of millions of source pixels (or none at all), so the one place that checks it is here.
    """
    h, w = image_hw
    long_side = float(max(h, w))
    pts = np.asarray(landmarks, dtype=np.float64)
    if pts.shape != (5, 2) or not np.isfinite(pts).all():
        return "landmarks are not finite"
    span = float((pts.max(axis=0) - pts.min(axis=0)).max())
    if span > _MAX_LANDMARK_SPAN * long_side:
        return f"landmarks {span:.0f} px apart in a {w}x{h} photo"
    if box is not None:
        b = np.asarray(box, dtype=np.float64)
        if b.shape != (4,) or not np.isfinite(b).all():
            return "face box is not finite"
        bw, bh = float(b[2] - b[0]), float(b[3] - b[1])
        if bw <= 0 or bh <= 0:
            return "face box is empty"
        if max(bw, bh) > _MAX_BOX_SIDE * long_side:
            return f"face box {bw:.0f}x{bh:.0f} px in a {w}x{h} photo"
        inside_w = max(0.0, min(float(b[2]), w) - max(float(b[0]), 0.0))
        inside_h = max(0.0, min(float(b[3]), h) - max(float(b[1]), 0.0))
        if inside_w * inside_h < _MIN_BOX_INSIDE * bw * bh:
            return "face box lies outside the photo"
    centre = pts.mean(axis=0)
    if not (-span <= centre[0] <= w + span and -span <= centre[1] <= h + span):
        return "landmarks lie outside the photo"
    try:
        forward = estimate_similarity(pts, face_template(512))
        invert_affine(forward)
    except ValueError as exc:
        return f"no alignment possible ({exc})"
    return None


def _round_to(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Round float pixels to ``dtype``, saturating integer types (float dtypes pass through)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return values.astype(dtype, copy=False)
    info = np.iinfo(dtype)
    result: np.ndarray = np.clip(np.rint(values), info.min, info.max).astype(dtype)
    return result


def align_faces(
    image_bgr: np.ndarray, landmarks: np.ndarray, size: int, frame: FaceFrame = GPEN_FRAME
) -> tuple[np.ndarray, np.ndarray]:
    """Cut each face out of ``image_bgr`` aligned to ``frame``'s template (the model family's).

    Args:
        image_bgr: (H, W, 3) uint8 BGR image (uint16 accepted; crops keep the dtype).
        landmarks: (F, 5, 2) points in image pixels, ordered as ``GPEN_TEMPLATE_512``.
        size: crop side in pixels (512 for GPEN-BFR-512, 256 for GPEN-BFR-256).
        frame: the family's template (``catalog.face_frames``); GPEN's by default.

    Returns:
        crops: (F, size, size, 3) of the image's dtype.
        affines: (F, 2, 3) float64 forward affines, image -> crop; pass them to ``paste_faces``.

    Border: BORDER_REFLECT_101. A face near the image edge has part of its crop outside the image.
    A constant fill (upstream GPEN leaves warpAffine's black; facexlib uses a flat grey) puts a hard
    straight edge and a flat area into the network's input, which a GAN-prior restorer treats as
    content and tends to smear dark halos and texture artefacts from into the real face pixels.
    Reflection continues the local colours and textures, so the visible part is restored as if the
    face were whole; the filled pixels never reach the output, because pasting writes only inside
    the image.
    """
    image = np.asarray(image_bgr)
    if image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"image must be (H, W, 3), got {image.shape}")
    if image.dtype not in (np.uint8, np.uint16):
        raise ValueError(f"image must be uint8 or uint16, got {image.dtype}")
    pts = np.asarray(landmarks, dtype=np.float64)
    if pts.ndim != 3 or pts.shape[1:] != (5, 2):
        raise ValueError(f"landmarks must be (F, 5, 2), got {pts.shape}")
    template = face_template(size, frame)
    count = len(pts)
    crops = np.empty((count, size, size, 3), dtype=image.dtype)
    affines = np.empty((count, 2, 3), dtype=np.float64)
    for i in range(count):
        affines[i] = estimate_similarity(pts[i], template)
        crops[i] = warp_affine_resampled(image, affines[i], (size, size), border_mode=cv2.BORDER_REFLECT_101)
    return crops, affines
