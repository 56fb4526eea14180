"""Face geometry: GPEN-template alignment and region-restricted paste-back."""

from __future__ import annotations

import json
import math
from pathlib import Path

import cv2
import numpy as np
import pytest

from gpen_watch.restore.stages.align import (
    GPEN_TEMPLATE_512,
    align_faces,
    estimate_similarity,
    face_template,
    invert_affine,
    transform_points,
    warp_affine_resampled,
)
from gpen_watch.restore.stages.paste import (
    feather_mask,
    paste_faces,
    paste_region,
    smooth_small_faces,
    soften_parse_mask,
)

DATA = Path(__file__).parent / "data"
ASTRONAUT = "skimage.data.astronaut"
HOPPER = "matplotlib grace_hopper.jpg"


@pytest.fixture(scope="module")
def reference() -> dict:
    return json.loads((DATA / "face_landmarks.json").read_text())


@pytest.fixture(scope="module")
def photos() -> dict[str, np.ndarray]:
    from matplotlib import cbook
    from skimage import data

    with cbook.get_sample_data("grace_hopper.jpg") as f:
        hopper = cv2.imdecode(np.frombuffer(f.read(), np.uint8), cv2.IMREAD_COLOR)
    return {ASTRONAUT: cv2.cvtColor(data.astronaut(), cv2.COLOR_RGB2BGR), HOPPER: hopper}


def _landmarks(reference: dict, key: str) -> np.ndarray:
    return np.asarray(reference[key]["landmarks5_xy"], dtype=np.float64)  # (F, 5, 2)


def _face_box(reference: dict, key: str) -> tuple[slice, slice]:
    x0, y0, x1, y1 = reference[key]["boxes_xyxy"][0]
    return slice(math.floor(y0), math.ceil(y1)), slice(math.floor(x0), math.ceil(x1))


def _psnr(a: np.ndarray, b: np.ndarray, peak: float = 255.0) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return math.inf if mse == 0 else 10.0 * math.log10(peak * peak / mse)


def _outside(shape: tuple[int, ...], boxes: list[tuple[int, int, int, int] | None]) -> np.ndarray:
    """(H, W) bool: True where no box covers the pixel."""
    keep = np.ones(shape[:2], dtype=bool)
    for box in boxes:
        if box is not None:
            x0, y0, x1, y1 = box
            keep[y0:y1, x0:x1] = False
    return keep


def _crop_footprint_box(affine: np.ndarray, size: int, hw: tuple[int, int]) -> tuple[int, int, int, int]:
    """Independent estimate of where a paste may write: crop corners mapped back, +3 px."""
    corners = np.array([[0, 0], [size - 1, 0], [0, size - 1], [size - 1, size - 1]], dtype=np.float64)
    pts = transform_points(invert_affine(affine), corners)
    x0, y0 = np.floor(pts.min(axis=0)).astype(int) - 3
    x1, y1 = np.ceil(pts.max(axis=0)).astype(int) + 4
    return max(0, x0), max(0, y0), min(hw[1], x1), min(hw[0], y1)


# --- template and similarity -------------------------------------------------------------


def test_template_is_gpen_and_scales_linearly() -> None:
    t512 = face_template(512)
    assert t512.shape == (5, 2)
    assert t512.dtype == np.float32
    np.testing.assert_allclose(t512[0], [202.041, 242.884], atol=1e-4)
    np.testing.assert_allclose(face_template(256), t512 / 2, atol=1e-4)
    # Eye distance ~107 px at 512 (facexlib's FFHQ template would be ~126).
    assert 106 < np.linalg.norm(t512[1] - t512[0]) < 108
    # Left eye (as seen) is on the image's left, mouth below nose below eyes.
    assert t512[0, 0] < t512[1, 0]
    assert t512[3, 0] < t512[4, 0]
    assert t512[:2, 1].max() < t512[2, 1] < t512[3:, 1].min()
    with pytest.raises(ValueError):
        face_template(0)


def _similarity(angle_deg: float, scale: float, tx: float, ty: float) -> np.ndarray:
    c, s = scale * math.cos(math.radians(angle_deg)), scale * math.sin(math.radians(angle_deg))
    return np.array([[c, -s, tx], [s, c, ty]])


def test_estimate_similarity_recovers_known_transform() -> None:
    rng = np.random.default_rng(0)
    src = rng.uniform(0, 400, size=(5, 2))
    for truth in (_similarity(23.0, 1.7, -31.5, 12.25), _similarity(-170.0, 0.31, 400.0, -5.0)):
        dst = transform_points(truth, src)
        np.testing.assert_allclose(estimate_similarity(src, dst), truth, atol=1e-9)
        # OpenCV agrees on noise-free points.
        cv_m, _ = cv2.estimateAffinePartial2D(
            src.astype(np.float32), dst.astype(np.float32), method=cv2.LMEDS
        )
        np.testing.assert_allclose(cv_m, truth, atol=1e-3)


def test_estimate_similarity_is_least_squares_with_noise() -> None:
    rng = np.random.default_rng(1)
    src = rng.uniform(0, 200, size=(5, 2))
    dst = transform_points(_similarity(10.0, 2.2, 5.0, 7.0), src) + rng.normal(0, 2.0, size=(5, 2))
    m = estimate_similarity(src, dst)

    def cost(a: float, b: float, tx: float, ty: float) -> float:
        return float(((transform_points(np.array([[a, -b, tx], [b, a, ty]]), src) - dst) ** 2).sum())

    params = (m[0, 0], m[1, 0], m[0, 2], m[1, 2])
    best = cost(*params)
    for k in range(4):  # every small step in any parameter makes the fit worse
        for step in (-1e-3, 1e-3):
            moved = list(params)
            moved[k] += step
            assert cost(*moved) > best
    cv_m, _ = cv2.estimateAffinePartial2D(src.astype(np.float32), dst.astype(np.float32), method=cv2.LMEDS)
    assert best <= cost(cv_m[0, 0], cv_m[1, 0], cv_m[0, 2], cv_m[1, 2]) + 1e-6


def test_estimate_similarity_never_reflects_and_rejects_degenerate() -> None:
    src = face_template(512).astype(np.float64)
    mirrored = src * [-1.0, 1.0]
    assert np.linalg.det(estimate_similarity(src, mirrored)[:, :2]) > 0
    with pytest.raises(ValueError):
        estimate_similarity(np.ones((5, 2)), src)
    with pytest.raises(ValueError):
        estimate_similarity(src[:4], src)


def test_invert_affine_round_trips() -> None:
    m = _similarity(33.0, 0.6, 10.0, -20.0)
    pts = np.array([[1.0, 2.0], [300.0, -40.0]])
    np.testing.assert_allclose(transform_points(invert_affine(m), transform_points(m, pts)), pts, atol=1e-9)
    with pytest.raises(ValueError):
        invert_affine(np.zeros((2, 3)))


# --- alignment -----------------------------------------------------------------------------


def test_aligned_points_land_on_template(reference: dict, photos: dict) -> None:
    size = 512
    template = face_template(size)
    # Exact when the landmarks are a similarity image of the template.
    truth = _similarity(-12.0, 0.4, 100.0, 60.0)
    synthetic = transform_points(truth, template)[None]
    crops, affines = align_faces(photos[ASTRONAUT], synthetic, size)
    assert crops.shape == (1, size, size, 3)
    assert crops.dtype == np.uint8
    assert affines.shape == (1, 2, 3)
    np.testing.assert_allclose(transform_points(affines[0], synthetic[0]), template, atol=1e-4)
    # Real faces are not the template (the astronaut smiles: her mouth corners sit 20 px off),
    # but the eyes land within 10 % of the template's 107 px eye distance, and nothing beyond 25 %.
    for key in (ASTRONAUT, HOPPER):
        lms = _landmarks(reference, key)
        _, affines = align_faces(photos[key], lms, size)
        residual = np.linalg.norm(transform_points(affines[0], lms[0]) - template, axis=1)
        assert residual[:2].max() < 0.1 * 107
        assert residual.max() < 0.25 * 107


def test_align_content_matches_geometry(reference: dict, photos: dict) -> None:
    """The crop pixel at a template point shows the image pixel at the landmark."""
    image = photos[HOPPER]
    lms = _landmarks(reference, HOPPER)
    crops, affines = align_faces(image, lms, 256)  # grace_hopper shrinks at 256: prefiltered path
    smooth = cv2.GaussianBlur(image, (0, 0), 3.0)  # compare at a scale both sample alike
    crop_smooth = cv2.GaussianBlur(crops[0], (0, 0), 3.0 * 256 / 512 * 1.2)
    for p in transform_points(affines[0], lms[0]):
        q = transform_points(invert_affine(affines[0]), p)
        a = crop_smooth[round(p[1]), round(p[0])].astype(int)
        b = smooth[round(q[1]), round(q[0])].astype(int)
        assert np.abs(a - b).max() < 25


def test_align_no_faces(photos: dict) -> None:
    crops, affines = align_faces(photos[ASTRONAUT], np.zeros((0, 5, 2)), 512)
    assert crops.shape == (0, 512, 512, 3)
    assert affines.shape == (0, 2, 3)


# --- paste-back ----------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "size"), [(ASTRONAUT, 512), (ASTRONAUT, 256), (HOPPER, 512)])
def test_identity_restorer_round_trip(reference: dict, photos: dict, key: str, size: int) -> None:
    image = photos[key]
    before = image.copy()
    crops, affines = align_faces(image, _landmarks(reference, key), size)
    out = paste_faces(image, crops, affines)
    assert out.shape == image.shape
    assert out.dtype == image.dtype
    np.testing.assert_array_equal(image, before)  # input untouched
    psnr = _psnr(out[_face_box(reference, key)], image[_face_box(reference, key)])
    print(f"identity round trip {key} @ {size}: PSNR over face box {psnr:.2f} dB")
    assert psnr >= 40.0
    # Nothing outside the crop's footprint changes, bit for bit.
    outside = _outside(image.shape, [_crop_footprint_box(affines[0], size, image.shape[:2])])
    assert outside.any()
    np.testing.assert_array_equal(out[outside], image[outside])
    # ... and nothing outside the declared paste region either.
    outside = _outside(image.shape, [paste_region(affines[0], size, image.shape[:2])])
    np.testing.assert_array_equal(out[outside], image[outside])


def test_modified_face_is_visible_and_seamless(reference: dict, photos: dict) -> None:
    image = photos[ASTRONAUT]
    crops, affines = align_faces(image, _landmarks(reference, ASTRONAUT), 512)
    out = paste_faces(image, 255 - crops, affines)
    # Centre of the face is (almost) fully replaced by the inverted crop.
    cx, cy = np.round(transform_points(invert_affine(affines[0]), [256.0, 300.0])).astype(int)
    assert np.abs(out[cy, cx].astype(int) - (255 - image[cy, cx].astype(int))).max() <= 6
    # No seam: along the paste region's border the image is untouched, and the change ramps up
    # smoothly (no jump larger than a fraction of the full inversion between neighbours).
    x0, y0, x1, _y1 = paste_region(affines[0], 512, image.shape[:2])
    np.testing.assert_array_equal(out[y0, x0:x1], image[y0, x0:x1])
    weight = feather_mask(512)
    warped = cv2.warpAffine(weight, invert_affine(affines[0]), image.shape[1::-1], flags=cv2.INTER_LINEAR)
    assert np.abs(np.diff(warped, axis=1)).max() < 0.1
    assert np.abs(np.diff(warped, axis=0)).max() < 0.1


def test_no_faces_returns_unchanged_copy(photos: dict) -> None:
    image = photos[ASTRONAUT]
    out = paste_faces(image, np.zeros((0, 512, 512, 3), np.uint8), np.zeros((0, 2, 3)))
    assert out is not image
    np.testing.assert_array_equal(out, image)


def test_uint16_image(reference: dict, photos: dict) -> None:
    image8 = photos[ASTRONAUT]
    image16 = image8.astype(np.uint16) * 257
    crops, affines = align_faces(image8, _landmarks(reference, ASTRONAUT), 512)
    out = paste_faces(image16, crops, affines)
    assert out.dtype == np.uint16
    assert out.shape == image16.shape
    box = _face_box(reference, ASTRONAUT)
    assert _psnr(out[box], image16[box], peak=65535.0) >= 40.0
    outside = _outside(image16.shape, [paste_region(affines[0], 512, image16.shape[:2])])
    np.testing.assert_array_equal(out[outside], image16[outside])
    # White face onto a black 16-bit image reaches full scale, not 255.
    white = np.full_like(crops, 255)
    centre = np.round(transform_points(invert_affine(affines[0]), [256.0, 256.0])).astype(int)
    out = paste_faces(np.zeros_like(image16), white, affines)
    assert out[centre[1], centre[0]].min() == 65535


def test_face_partly_off_image(reference: dict, photos: dict) -> None:
    cut = 215  # the astronaut's face spans x 181..268: cut through it
    image = np.ascontiguousarray(photos[ASTRONAUT][:, cut:])
    lms = _landmarks(reference, ASTRONAUT) - [cut, 0.0]
    crops, affines = align_faces(image, lms, 512)
    out = paste_faces(image, crops, affines)
    ys, xs = _face_box(reference, ASTRONAUT)
    visible = (ys, slice(0, xs.stop - cut))
    assert _psnr(out[visible], image[visible]) >= 40.0
    # Entirely off-image: nothing to paste.
    far = affines.copy()
    far[:, :, 2] += [5000.0, 0.0]
    np.testing.assert_array_equal(paste_faces(image, crops, far), image)


def test_tiny_image() -> None:
    rng = np.random.default_rng(2)
    image = rng.integers(0, 256, size=(9, 7, 3), dtype=np.uint8)
    lms = face_template(512)[None] / 512.0 * 8.0  # a face filling the whole image
    crops, affines = align_faces(image, lms, 256)
    out = paste_faces(image, 255 - crops, affines)
    assert out.shape == image.shape
    assert out.dtype == np.uint8
    assert not np.array_equal(out, image)


def test_rejects_wrong_channel_count(photos: dict) -> None:
    bgra = cv2.cvtColor(photos[ASTRONAUT], cv2.COLOR_BGR2BGRA)
    with pytest.raises(ValueError, match="colour channels"):
        paste_faces(bgra, np.zeros((1, 64, 64, 3), np.uint8), np.array([_similarity(0, 1, 0, 0)]))


# --- masks and overlaps -------------------------------------------------------------------


def test_feather_mask_shape() -> None:
    for size in (512, 256, 64):
        mask = feather_mask(size)
        assert mask.shape == (size, size)
        assert mask.dtype == np.float32
        assert mask.min() == 0.0
        assert mask.max() == 1.0
        for edge in (mask[0], mask[-1], mask[:, 0], mask[:, -1]):
            assert edge.max() == 0.0
        assert mask[size // 2, size // 2] == 1.0
        np.testing.assert_array_equal(mask, mask[::-1])
        np.testing.assert_array_equal(mask, mask.T)
    mask = feather_mask(512)
    mask[:] = 0  # callers get a copy: the cache stays intact
    assert feather_mask(512).max() == 1.0


def test_soften_parse_mask() -> None:
    hard = np.ones((512, 512), np.float32)
    soft = soften_parse_mask(hard)
    assert hard.min() == 1.0  # input untouched
    assert soft.dtype == np.float32
    assert soft.min() >= 0.0
    assert soft.max() <= 1.0
    # The outer 26 px were zeroed before blurring: the edge is ~0, and the ramp is centred at 26 px.
    assert soft[:2].max() < 1e-4
    assert soft[:, -2:].max() < 1e-4
    assert soft[:12].max() < 0.01
    assert soft[26, 256] == pytest.approx(0.5, abs=0.1)
    assert soft[256, 256] == pytest.approx(1.0)
    # 256: border and blur scale with the size.
    soft256 = soften_parse_mask(np.ones((256, 256), np.float32))
    np.testing.assert_allclose(soft256[128, ::8], soft[256, ::16], atol=0.05)


def _smooth_texture(rng: np.random.Generator, size: int) -> np.ndarray:
    noise = rng.uniform(0, 255, size=(size // 4, size // 4, 3)).astype(np.float32)
    return np.clip(cv2.resize(noise, (size, size), interpolation=cv2.INTER_CUBIC), 0, 255).astype(np.uint8)


def _reference_paste(
    image: np.ndarray, faces: np.ndarray, affines: np.ndarray, masks: np.ndarray | None
) -> np.ndarray:
    """Straightforward full-frame paste with upstream's "stronger mask wins" rule."""
    height, width = image.shape[:2]
    size = faces.shape[1]
    full_mask = np.zeros((height, width), np.float32)
    full_face = np.zeros((height, width, 3), np.float32)
    for i in range(len(faces)):
        inverse = invert_affine(affines[i])
        face = warp_affine_resampled(
            faces[i], inverse, (width, height), border_mode=cv2.BORDER_REPLICATE
        ).astype(np.float32)
        crop_mask = feather_mask(size) if masks is None else soften_parse_mask(masks[i])
        mask = cv2.warpAffine(crop_mask, inverse, (width, height), flags=cv2.INTER_LINEAR)
        stronger = mask > full_mask
        full_mask[stronger] = mask[stronger]
        full_face[stronger] = face[stronger]
    m = full_mask[..., None]
    return np.clip(np.rint(image * (1 - m) + full_face * m), 0, 255).astype(np.uint8)


def _crowd(size: int) -> tuple[np.ndarray, np.ndarray]:
    """Forward affines of four faces: two overlapping, one shrunk on paste, one near a corner."""
    placements = [  # (angle, forward scale, image x, image y) of each crop's centre
        (10.0, 0.55, 120.0, 120.0),
        (-25.0, 0.7, 190.0, 150.0),  # overlaps the first
        (5.0, 2.5, 330.0, 60.0),  # crop shrinks on paste (prefiltered path)
        (40.0, 0.8, 15.0, 290.0),  # partly off the left edge
    ]
    affines = []
    for angle, scale, x, y in placements:
        m = _similarity(angle, scale, 0.0, 0.0)
        centre = transform_points(m, [x, y])
        m[:, 2] = size / 2 - centre
        affines.append(m)
    return np.array(affines), np.array([p[2:] for p in placements])


@pytest.mark.parametrize("with_parse", [False, True])
def test_region_paste_matches_full_frame_reference(with_parse: bool) -> None:
    rng = np.random.default_rng(3)
    size = 128
    image = _smooth_texture(rng, 400)[:300]
    faces = np.stack([_smooth_texture(rng, size) for _ in range(4)])
    affines, _ = _crowd(size)
    masks = None
    if with_parse:  # elliptical "face" probabilities, different per face
        masks = np.zeros((4, size, size), np.float32)
        for i in range(4):
            cv2.ellipse(masks[i], (64, 70), (40 + 4 * i, 52), 0, 0, 360, 0.5 + 0.15 * i, -1)
    out = paste_faces(image, faces, affines, masks)
    expected = _reference_paste(image, faces, affines, masks)
    assert np.abs(out.astype(int) - expected.astype(int)).max() <= 1


def test_overlap_stronger_mask_wins() -> None:
    size = 64
    image = np.full((160, 200, 3), 100, np.uint8)
    red = np.zeros((size, size, 3), np.uint8)
    red[..., 2] = 255
    blue = np.zeros((size, size, 3), np.uint8)
    blue[..., 0] = 255
    # Two 1.5x-magnified crops whose centres are 24 px apart: a wide overlap.
    first = _similarity(0.0, 1 / 1.5, 0.0, 0.0)
    first[:, 2] = 32 - transform_points(first, [88.0, 80.0])
    second = _similarity(15.0, 1 / 1.5, 0.0, 0.0)
    second[:, 2] = 32 - transform_points(second, [112.0, 80.0])
    masks = np.stack([np.full((size, size), 0.4, np.float32), np.full((size, size), 0.9, np.float32)])
    faces = np.stack([red, blue])
    affines = np.stack([first, second])
    out = paste_faces(image, faces, affines, masks)
    # Deep inside the overlap the blue face (mask 0.9) wins outright: no red mixed in.
    expected = np.array([0.1 * 100 + 0.9 * 255, 0.1 * 100, 0.1 * 100])
    np.testing.assert_allclose(out[80, 100], expected, atol=1.0)
    # Order does not matter.
    swapped = paste_faces(image, faces[::-1], affines[::-1], masks[::-1])
    np.testing.assert_array_equal(swapped, out)
    # Where only the red face reaches, it is blended at its own strength.
    np.testing.assert_allclose(out[80, 66], [60, 60, 0.6 * 100 + 0.4 * 255], atol=1.0)


def test_template_constant_is_read_only_copy_safe() -> None:
    template = face_template(512)
    template[:] = 0
    assert GPEN_TEMPLATE_512[0, 0] == pytest.approx(202.041)


def test_overlap_groups_are_transitive_and_separate() -> None:
    from gpen_watch.restore.stages.paste import _overlap_groups

    boxes = [(0, 0, 10, 10), (50, 50, 60, 60), (9, 9, 20, 20), (19, 0, 30, 10), (10, 0, 19, 9)]
    # 0-2 overlap, 2-3 overlap (x 19..20, y 9..10); 1 is alone; 4 only touches edges (half-open).
    assert _overlap_groups(boxes) == [[0, 2, 3], [1], [4]]
    assert _overlap_groups([]) == []


def test_parse_masks_of_another_size_are_resized() -> None:
    rng = np.random.default_rng(4)
    image = _smooth_texture(rng, 200)
    faces = _smooth_texture(rng, 64)[None]
    affine = _similarity(5.0, 0.5, -20.0, -20.0)[None]
    masks = np.zeros((1, 128, 128), np.float32)
    cv2.circle(masks[0], (64, 64), 40, 1.0, -1)
    resized = cv2.resize(masks[0], (64, 64), interpolation=cv2.INTER_LINEAR)[None]
    np.testing.assert_array_equal(
        paste_faces(image, faces, affine, masks), paste_faces(image, faces, affine, resized)
    )


def test_final_masks_can_be_passed_unsoftened() -> None:
    rng = np.random.default_rng(5)
    image = _smooth_texture(rng, 200)
    faces = np.stack([_smooth_texture(rng, 64) for _ in range(2)])
    affines = np.stack([_similarity(5.0, 0.5, -20.0, -20.0), _similarity(-5.0, 0.6, -40.0, -30.0)])
    raw = np.zeros((2, 64, 64), np.float32)
    cv2.circle(raw[0], (32, 34), 22, 1.0, -1)
    cv2.circle(raw[1], (30, 32), 20, 0.8, -1)
    final = np.stack([soften_parse_mask(m) for m in raw])
    expected = paste_faces(image, faces, affines, raw)
    np.testing.assert_array_equal(paste_faces(image, faces, affines, final, soften_masks=False), expected)
    # A broadcast (read-only) feather mask used as given equals the default feathering.
    feather = np.broadcast_to(feather_mask(64), (2, 64, 64))
    np.testing.assert_array_equal(
        paste_faces(image, faces, affines, feather, soften_masks=False), paste_faces(image, faces, affines)
    )


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_blend_keeps_untouched_pixels_exact_and_rounds_the_rest(dtype: type) -> None:
    """Weight 0 gives back the photo bit for bit, weight 1 the face; in between the result is the
    rounded mix (uint8 takes OpenCV's one-pass blend, uint16 the float path)."""
    from gpen_watch.restore.stages.paste import _blend_into

    rng = np.random.default_rng(7)
    top = np.iinfo(dtype).max
    target = rng.integers(0, top + 1, (64, 80, 3), dtype=np.uint64).astype(dtype)
    face = rng.integers(0, 256, (64, 80, 3), dtype=np.uint8)
    weight = rng.random((64, 80), dtype=np.float32)
    weight[:, :20] = 0.0
    weight[:, 20:40] = 1.0
    gain = 257.0 if dtype == np.uint16 else 1.0
    out = np.zeros((70, 90, 3), dtype)  # blend into a strided view, as paste_faces does
    view = out[3:67, 5:85]
    view[...] = target
    _blend_into(view, face, weight, gain)
    assert np.array_equal(view[:, :20], target[:, :20])
    assert np.array_equal(view[:, 20:40], (face[:, 20:40] * gain).astype(dtype))
    w = weight[..., None].astype(np.float64)
    expected = np.rint(target * (1 - w) + face * gain * w)
    assert np.abs(view.astype(np.float64) - expected).max() <= 1
    assert not out[:3].any()
    assert not out[:, :5].any()  # nothing outside the view was written


def test_small_faces_get_upstreams_3x3_smoothing_and_large_ones_none() -> None:
    faces = np.random.default_rng(3).integers(0, 256, (3, 64, 64, 3), dtype=np.uint8)
    original = faces.copy()
    # Shorter box sides 99, 100 and 40 px: the first and last are small.
    boxes = np.array([[0, 0, 99, 300], [10, 10, 110, 130], [5, 5, 200, 45]], np.float32)
    out = smooth_small_faces(faces, boxes, 100)
    assert np.array_equal(faces, original)  # the input is not touched
    kernel = np.outer([1, 2, 1], [1, 2, 1]).astype(np.float32) / 16
    for i in (0, 2):
        assert np.abs(out[i].astype(int) - cv2.filter2D(faces[i], -1, kernel)).max() <= 1
    assert np.array_equal(out[1], faces[1])
    assert np.array_equal(smooth_small_faces(faces, boxes, 0), faces)  # 0: never
