"""The pipeline on faces a trained detector finds in a real photo: the 1927 Solvay group (29 faces).

The detector is real (RetinaFace-MobileNet0.25's trained weights, ../shared/fixtures), installed in
a model folder under the name the model store looks for; the GPEN generator is the tiny
random-weight one of conftest.py. So the faces' places, sizes and landmarks are what a user meets;
only the restored pixels are meaningless. The tests skip where ../shared (beside the repository)
is absent; CI has it.

Tolerances:
- Detection against facexlib's own ``detect_faces`` on the same pixels: the same network, but this
  project pads a batch to a multiple of 32 with the mean colour where facexlib's convolutions
  zero-pad each feature map at the photo's edge. Most faces agree to float32 rounding (< 0.01 px);
  a face whose deep-level anchors see that padding can have a neighbouring anchor win the NMS,
  whose regression differs by up to about a pixel. Landmarks must agree within 1/8 of the face's
  eye distance (about 2 px on these faces, far under the 15 px between a face's eyes) and most of
  them to 0.01 px.
- Alignment against upstream GPEN's arithmetic (Umeyama's similarity from the five points to the
  template, the inverse for paste-back), written out here in float64: the two are the same
  closed-form least squares, so they agree to 1e-6 px in the crop (float64 rounding on values
  of a few hundred pixels is ~1e-13; 1e-6 leaves room for a different but equivalent formula).
- Faces found on a changed copy of the photo (a grayscale or CMYK version, a 16-bit PNG, turned
  by EXIF): matched one to one, landmarks within 1/4 of the eye distance, boxes within 1/4 of their
  side: a lossy or colourless copy moves the detector's estimate a little, never to another face.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from conftest import TinyModels, isolated_env, make_tiny_models, tiny_restore_config
from PIL import Image
from service_harness import queue_empty

from gpen_watch.imaging.load import load_image
from gpen_watch.restore.api import FileJob, FileResult
from gpen_watch.restore.stages import align
from gpen_watch.restore.stages.detect import Face, FaceDetector

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
SOLVAY = SHARED / "data" / "Solvay_conference_1927.png"
REAL_DETECTOR = SHARED / "fixtures" / "retinaface_mobilenet0.25_real.pth"
SOLVAY_FACES = 29

pytestmark = pytest.mark.skipif(
    not (SOLVAY.is_file() and REAL_DETECTOR.is_file()),
    reason="../shared (the Solvay photo and the real RetinaFace weights) is not beside the repository",
)


# --- what the module shares: one set of models, one engine, one reference detection -------------


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with isolated_env(tmp_path_factory.mktemp("real-home")) as folder:
        yield folder


@pytest.fixture(scope="module")
def real_models(tmp_path_factory: pytest.TempPathFactory) -> TinyModels:
    """The tiny random GPEN, and the real MobileNet detector as the store's file for it."""
    from gpen_watch.catalog import registry

    models = make_tiny_models(tmp_path_factory.mktemp("real-models"))
    shutil.copyfile(
        REAL_DETECTOR, models.model_dir / registry.detector_spec("retinaface_mobile0.25").filename
    )
    return models


@pytest.fixture(scope="module")
def restorer(real_models: TinyModels, home: Path) -> Iterator[object]:
    from gpen_watch.restore.engines.restorer import Restorer

    with Restorer(tiny_restore_config(real_models), download=False) as r:
        yield r


@pytest.fixture(scope="module")
def detector(real_models: TinyModels) -> FaceDetector:
    """The project's detector at its default settings, loaded from the store as the engine does."""
    from gpen_watch.restore.engines import verify
    from gpen_watch.restore.nets.fold import prepare_detector

    cpu = torch.device("cpu")
    net = verify.load_detector("retinaface_mobile0.25", real_models.model_dir, device="cpu", download=False)
    return FaceDetector(prepare_detector(net, cpu), cpu)


@pytest.fixture(scope="module")
def solvay_bgr() -> np.ndarray:
    return load_image(SOLVAY).bgr8


@pytest.fixture(scope="module")
def reference(solvay_bgr: np.ndarray) -> list[Face]:
    """facexlib's own detect_faces with the same weights, at the photo's own size, threshold 0.9
    (facexlib is the reference, in the test extra: the tests that compare with it skip without it)."""
    pytest.importorskip("facexlib.detection.retinaface", reason="facexlib, the reference, is not installed")
    from facexlib.detection.retinaface import RetinaFace

    net = RetinaFace(network_name="mobile0.25", half=False, device=torch.device("cpu"))
    state = torch.load(REAL_DETECTOR, map_location="cpu", weights_only=True)
    net.load_state_dict(state, strict=True)
    with torch.no_grad():
        found = net.eval().detect_faces(
            solvay_bgr, conf_threshold=0.9, nms_threshold=0.4, use_origin_size=True
        )
    return [
        Face(row[:4].astype(np.float64), float(row[4]), row[5:15].reshape(5, 2).astype(np.float64))
        for row in found
    ]


@pytest.fixture(scope="module")
def ours(detector: FaceDetector, solvay_bgr: np.ndarray) -> list[Face]:
    """The project's detector on the photo as the engine decodes it, at the default settings."""
    return detector.detect([solvay_bgr])[0]


@pytest.fixture(scope="module")
def solvay_result(
    restorer: object, tmp_path_factory: pytest.TempPathFactory
) -> tuple[FileResult, np.ndarray]:
    out = tmp_path_factory.mktemp("solvay-out") / "solvay.png"
    (result,) = _restore(restorer, [(SOLVAY, out)])
    return result, load_image(out).bgr8


def _restore(restorer: object, pairs: list[tuple[Path, Path]]) -> list[FileResult]:
    """Results in the order of ``pairs``; every one must have succeeded."""
    results = {r.src: r for r in restorer.restore_files([FileJob(src, dst) for src, dst in pairs])}  # type: ignore[attr-defined]
    for src, _ in pairs:
        assert results[src].ok, results[src].error
    return [results[src] for src, _ in pairs]


def _eye_distance(face: Face) -> float:
    return float(np.linalg.norm(face.landmarks[0] - face.landmarks[1]))


def _centre(face: Face) -> np.ndarray:
    return (np.asarray(face.box[:2], np.float64) + np.asarray(face.box[2:], np.float64)) / 2


def _match(found: list[Face], wanted: list[Face]) -> list[tuple[Face, Face]]:
    """Pairs (found, wanted) by nearest box centre, one to one; fails on a missing or extra face."""
    assert len(found) == len(wanted), f"{len(found)} faces found, {len(wanted)} expected"
    pairs = []
    left = list(found)
    for w in wanted:
        best = min(left, key=lambda f: float(np.linalg.norm(_centre(f) - _centre(w))))
        left.remove(best)
        pairs.append((best, w))
    return pairs


def _assert_same_faces(found: list[Face], wanted: list[Face], fraction: float) -> None:
    for f, w in _match(found, wanted):
        eyes = _eye_distance(w)
        side = float(w.box[2] - w.box[0])
        assert np.abs(f.landmarks - w.landmarks).max() <= fraction * eyes, (f.landmarks, w.landmarks)
        assert np.abs(np.asarray(f.box) - w.box).max() <= fraction * side, (f.box, w.box)


def _changed(before: np.ndarray, after: np.ndarray, levels: int = 3) -> np.ndarray:
    """(H, W) bool: pixels the paste changed by more than ``levels`` in some channel."""
    diff = np.abs(before.astype(np.int16) - after.astype(np.int16))
    return np.asarray((diff > levels).any(axis=2))


def _assert_restored_at(faces: list[Face], before: np.ndarray, after: np.ndarray, levels: int = 3) -> None:
    """Each face's box is where the paste changed the photo, and the change is centred on it: the
    changed pixels of a window twice the box's size, centred on the box, have their centroid within
    a fifth of the box's side of its centre (a paste shifted by a face's width would put it on the
    window's edge; the neighbours' pastes reach into the window only at its corners)."""
    changed = _changed(before, after, levels)
    h, w = changed.shape
    for face in faces:
        side = float(face.box[2] - face.box[0])
        cx, cy = _centre(face)
        x0, x1 = max(0, round(cx - side)), min(w, round(cx + side))
        y0, y1 = max(0, round(cy - side)), min(h, round(cy + side))
        box = changed[
            max(0, round(face.box[1])) : round(face.box[3]), max(0, round(face.box[0])) : round(face.box[2])
        ]
        assert box.mean() > 0.5, f"face at ({cx:.0f}, {cy:.0f}) mostly unchanged"
        ys, xs = np.nonzero(changed[y0:y1, x0:x1])
        centroid = np.array([xs.mean() + x0, ys.mean() + y0])
        assert np.linalg.norm(centroid - (cx, cy)) <= side / 5, (centroid, (cx, cy), side)


# --- count ---------------------------------------------------------------------------------------


def test_the_engine_finds_and_restores_all_29_faces_at_default_settings(
    solvay_result: tuple[FileResult, np.ndarray], solvay_bgr: np.ndarray, reference: list[Face]
) -> None:
    result, out = solvay_result
    assert len(reference) == SOLVAY_FACES
    assert result.faces == SOLVAY_FACES, result.notes
    assert out.shape == solvay_bgr.shape
    _assert_restored_at(reference, solvay_bgr, out)


@pytest.mark.slow
def test_restore_command_finds_and_restores_all_29_faces(
    real_models: TinyModels, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`gpen-watch restore` with the real detector as the store's MobileNet file, default settings."""
    from gpen_watch import cli

    out = tmp_path / "out"
    argv = ["restore", str(SOLVAY), "-o", str(out), "--model", str(real_models.gpen)]
    argv += ["--detector", "retinaface_mobile0.25", "--model-dir", str(real_models.model_dir)]
    argv += ["--no-parse", "--device", "cpu", "--no-download", "--no-progress"]
    assert cli.main(argv) == 0
    summary = capsys.readouterr().out
    assert f"done 1 of 1 image: {SOLVAY_FACES} faces restored" in summary, summary
    restored = load_image(out / SOLVAY.name).bgr8
    assert restored.shape == load_image(SOLVAY).bgr8.shape


@pytest.mark.slow
def test_the_service_finds_and_restores_all_29_faces(real_models: TinyModels, tmp_path: Path) -> None:
    """`gpen-watch run` with its real engine: Solvay dropped into the inbox comes out with 29 faces."""
    from service_harness import ServiceProcess, finished, real_engine_args, write_atomic

    svc = ServiceProcess(tmp_path, *real_engine_args(real_models), restorer=None)
    try:
        write_atomic(svc.inbox / SOLVAY.name, SOLVAY.read_bytes())
        svc.start()
        s = svc.wait(
            lambda s: finished(s) >= 1 and queue_empty(s),
            300,
            "Solvay restored",
        )
        assert s["queue"]["done"] == 1, svc.logs()
        assert (s["restored_today"], s["faces_today"]) == (1, SOLVAY_FACES), svc.logs()
        assert load_image(svc.outbox / SOLVAY.name).bgr8.shape == (568, 1328, 3)
        assert svc.stop() == 0
    finally:
        svc.close()


# --- placement -----------------------------------------------------------------------------------


def _umeyama(src: np.ndarray, dst: np.ndarray, scale: float | None = None) -> tuple[np.ndarray, float]:
    """Upstream GPEN's alignment arithmetic: Umeyama's least-squares similarity src -> dst (scale
    estimated unless given), as a (2, 3) matrix, and its scale."""
    src, dst = np.asarray(src, np.float64), np.asarray(dst, np.float64)
    mu_s, mu_d = src.mean(axis=0), dst.mean(axis=0)
    s_c, d_c = src - mu_s, dst - mu_d
    cov = d_c.T @ s_c / len(src)
    u, sv, vt = np.linalg.svd(cov)
    signs = np.array([1.0, -1.0 if np.linalg.det(cov) < 0 else 1.0])
    rotation = u @ np.diag(signs) @ vt
    if scale is None:
        scale = float((sv * signs).sum() / s_c.var(axis=0).sum())
    t = mu_d - scale * rotation @ mu_s
    return np.hstack([scale * rotation, t[:, None]]), scale


def test_landmarks_match_facexlibs_detect_faces(ours: list[Face], reference: list[Face]) -> None:
    pairs = _match(ours, reference)
    worst = [float(np.abs(f.landmarks - w.landmarks).max()) for f, w in pairs]
    for (f, w), err in zip(pairs, worst):
        assert err <= _eye_distance(w) / 8, (f.landmarks, w.landmarks)
        assert abs(f.score - w.score) < 1e-3
    assert sum(err < 0.01 for err in worst) >= len(pairs) - 3, worst


def test_alignment_and_paste_back_follow_upstreams_arithmetic(
    ours: list[Face], solvay_bgr: np.ndarray, reference: list[Face]
) -> None:
    size = 512
    template = align.face_template(size).astype(np.float64)
    faces = list(ours)
    _, affines = align.align_faces(solvay_bgr, np.stack([f.landmarks for f in faces]), size)
    corners = np.array([[0.0, 0.0], [size, 0.0], [0.0, size], [size, size], [size / 2, size / 2]])
    for face, affine in zip(faces, affines):
        forward, scale = _umeyama(face.landmarks, template)
        inverse, _ = _umeyama(template, face.landmarks, scale=1.0 / scale)
        points = face.landmarks.astype(np.float64)
        assert (
            np.abs(align.transform_points(affine, points) - align.transform_points(forward, points)).max()
            < 1e-6
        )
        back = align.transform_points(align.invert_affine(affine), corners)
        assert np.abs(back - align.transform_points(inverse, corners)).max() < 1e-6
    # The crop's centre, pasted back, lies on the face: inside the box facexlib found for it.
    matched = {id(f): r for f, r in _match(faces, reference)}
    for face, affine in zip(faces, affines):
        w = matched[id(face)]
        cx, cy = align.transform_points(align.invert_affine(affine), np.array([size / 2, size / 2]))
        assert w.box[0] < cx < w.box[2] and w.box[1] < cy < w.box[3]


# --- EXIF orientation ----------------------------------------------------------------------------

# Orientation -> how the stored pixels are made from the upright ones (PIL transposes): a viewer
# applies the inverse, so every file below looks like the crop once displayed.
_STORED = {
    2: [Image.Transpose.FLIP_LEFT_RIGHT],
    3: [Image.Transpose.ROTATE_180],
    4: [Image.Transpose.FLIP_TOP_BOTTOM],
    5: [Image.Transpose.TRANSPOSE],
    6: [Image.Transpose.ROTATE_90],
    7: [Image.Transpose.TRANSVERSE],
    8: [Image.Transpose.ROTATE_270],
}


def _solvay_crop(box: tuple[int, int, int, int]) -> Image.Image:
    return Image.open(SOLVAY).convert("RGB").crop(box)


@pytest.mark.slow
def test_exif_orientations_give_the_same_faces_at_the_same_places_upright(
    restorer: object, tmp_path: Path
) -> None:
    """Every orientation 2-8 is read as displayed and written upright with orientation 1 (the
    result keeps the photo's EXIF, docs/formats.md)."""
    upright = _solvay_crop((40, 140, 440, 280))  # five faces of the middle and front rows' left
    pairs = []
    for orientation, steps in [(1, []), *_STORED.items()]:
        stored = upright
        for step in steps:
            stored = stored.transpose(step)
        exif = Image.Exif()
        exif[0x0112] = orientation
        src = tmp_path / f"o{orientation}.png"
        stored.save(src, exif=exif.tobytes())
        pairs.append((src, tmp_path / "out" / src.name))
    (tmp_path / "out").mkdir()
    results = _restore(restorer, pairs)
    first = np.asarray(Image.open(pairs[0][1]))
    assert results[0].faces >= 4
    before = np.asarray(upright)
    for (src, dst), res in zip(pairs, results):
        with Image.open(dst) as im:
            assert im.getexif().get(0x0112, 1) == 1, src.name
            assert im.size == upright.size, src.name
            shown = np.asarray(im.convert("RGB"))
        assert res.faces == results[0].faces, src.name
        # Same faces, same places: the pixels the paste changed are those it changed upright.
        ours, theirs = _changed(before, shown), _changed(before, first)
        assert (ours != theirs).mean() < 0.01, src.name


# --- a small face near the border ----------------------------------------------------------------


def _seam(before: np.ndarray, after: np.ndarray) -> int:
    """The seam of a paste: the largest change it made to a pixel that touches (4-neighbours) a
    pixel it left unchanged. A paste through a feathered or blurred mask fades to nothing at its
    edge, so this is a few levels; a hard-edged one shows the face's full difference from the photo
    there, tens of levels."""
    delta = np.abs(before.astype(np.int16) - after.astype(np.int16)).max(axis=2)
    untouched = delta == 0
    near = np.zeros_like(untouched)
    near[1:, :] |= untouched[:-1, :]
    near[:-1, :] |= untouched[1:, :]
    near[:, 1:] |= untouched[:, :-1]
    near[:, :-1] |= untouched[:, 1:]
    edge = near & ~untouched
    return int(delta[edge].max()) if edge.any() else 0


def test_small_face_10_px_from_the_border_is_restored_without_a_seam(
    restorer: object, reference: list[Face], tmp_path: Path
) -> None:
    left = min(reference, key=lambda f: float(f.box[0]))  # the front row's leftmost face
    x0 = round(float(left.box[0])) - 10
    y0 = max(0, round(float(left.box[1])) - 60)
    crop = _solvay_crop((x0, y0, x0 + 240, y0 + 160))
    src, dst = tmp_path / "edge.png", tmp_path / "edge-out.png"
    crop.save(src)
    (res,) = _restore(restorer, [(src, dst)])
    assert res.faces >= 1, res.notes
    before = np.asarray(crop)
    after = np.asarray(Image.open(dst).convert("RGB"))
    changed = _changed(before, after)
    # The face by the left edge was restored: its columns there changed.
    assert changed[:, 10:20].any()
    # The random generator changes a face by ~120 levels (median); a hard-edged paste would show
    # about that at its edge, the feathered one fades to ~10 (measured).
    delta = np.abs(before.astype(np.int16) - after.astype(np.int16)).max(axis=2)
    assert _seam(before, after) <= np.median(delta[changed]) / 6


# --- other forms of the same photo ---------------------------------------------------------------


@pytest.mark.slow
def test_grayscale_16_bit_and_cmyk_copies_show_the_same_faces(
    detector: FaceDetector, reference: list[Face], tmp_path: Path
) -> None:
    """Decoded as the engine decodes them, then detected at the default settings."""
    rgb = Image.open(SOLVAY).convert("RGB")
    gray, sixteen, cmyk = tmp_path / "gray.png", tmp_path / "deep.png", tmp_path / "cmyk.jpg"
    rgb.convert("L").save(gray)
    bgr16 = np.asarray(rgb)[:, :, ::-1].astype(np.uint16) * 257
    assert cv2.imwrite(str(sixteen), bgr16)
    rgb.convert("CMYK").save(cmyk, quality=95)
    for path, mode in ((gray, "L"), (sixteen, "RGB"), (cmyk, "CMYK")):
        image = load_image(path)
        assert image.mode == mode, path.name
        if path is sixteen:
            assert image.pixels.dtype == np.uint16
        _assert_same_faces(detector.detect([image.bgr8])[0], reference, fraction=0.25)


@pytest.mark.slow
def test_a_photo_over_4096_px_is_prescaled_and_restored_at_its_faces(
    restorer: object, reference: list[Face], tmp_path: Path
) -> None:
    """Upscaled to 4250 px: pre-scaled to 4096 (restore.max_side), then detected on a 1000 px copy
    (over 1500 px): the faces, found there, are pasted at their places in the 4096 px result."""
    big_w, big_h = 4250, round(568 * 4250 / 1328)
    rgb = Image.open(SOLVAY).convert("RGB").resize((big_w, big_h), Image.Resampling.BICUBIC)
    src, dst = tmp_path / "big.png", tmp_path / "big-out.png"
    rgb.save(src, compress_level=1)
    (res,) = _restore(restorer, [(src, dst)])
    after = load_image(dst).bgr8
    assert max(after.shape[:2]) == 4096, after.shape
    # Detected on a 1000 px copy, as upstream does: the fixture's README counts 28 there.
    assert res.faces >= SOLVAY_FACES - 1, res.notes
    scale = 4096 / 1328
    before = cv2.resize(np.asarray(rgb)[:, :, ::-1], after.shape[1::-1], interpolation=cv2.INTER_AREA)
    at_scale = [Face(f.box * scale, f.score, f.landmarks * scale) for f in reference]
    found = [
        f for f in at_scale if _changed(before, after, levels=12)[round(_centre(f)[1]), round(_centre(f)[0])]
    ]
    assert len(found) >= SOLVAY_FACES - 1
    _assert_restored_at(found, before, after, levels=12)
