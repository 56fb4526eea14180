"""Faces that cannot be in the photo are dropped with a note, and no warp builds an unbounded filter.

A broken or mismatched detector checkpoint reports faces millions of pixels across; `restore` once
built a 2.5-million-tap resampling filter for them and held 16 GB for minutes without progress.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import cv2
import numpy as np
import pytest
from conftest import TinyModels, cli_env, make_tiny_models, restore_command
from PIL import Image

from gpen_watch.restore.stages import align


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    err = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float(10 * np.log10(255.0**2 / err))


def _shrink_affine(scale: float) -> np.ndarray:
    # Pixel centres as cv2.resize and Pillow place them: out = (in + 0.5) * scale - 0.5.
    return np.array([[scale, 0.0, 0.5 * scale - 0.5], [0.0, scale, 0.5 * scale - 0.5]])


def test_prefilter_stays_small_at_any_shrink(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every filter the warp runs has at most 49 taps, even for a face a million pixels across."""
    taps: list[int] = []
    real = cv2.sepFilter2D

    def counted(src: np.ndarray, ddepth: int, kx: np.ndarray, ky: np.ndarray, **kw: object) -> np.ndarray:
        taps.append(max(len(kx), len(ky)))
        # Refuse before running a huge kernel: on the old code this call alone ran for minutes.
        assert taps[-1] <= 49, f"a {taps[-1]}-tap filter"
        return real(src, ddepth, kx, ky, **kw)

    monkeypatch.setattr(cv2, "sepFilter2D", counted)
    image = np.random.default_rng(0).integers(0, 255, (1500, 2000, 3), dtype=np.uint8)
    template = align.face_template(512)
    for spread in (10.0, 1e3, 1e6):
        crops, _ = align.align_faces(image, (template * spread)[None], 512)
        assert crops.shape == (1, 512, 512, 3)
    assert taps, "the shrinking path was not taken"
    with pytest.raises(ValueError):
        align.lanczos_lowpass_kernel(1e-4)


def test_strong_shrink_is_still_anti_aliased(astronaut_bgr: np.ndarray) -> None:
    """Below 1/8 the INTER_AREA pre-shrink keeps the result as close to Pillow's LANCZOS as the
    unbounded Lanczos filter was (58/54/48 dB at 1/16, 1/32, 1/64), far above a box filter alone."""
    big = cv2.resize(astronaut_bgr, (4096, 4096), interpolation=cv2.INTER_CUBIC)
    pil = Image.fromarray(np.ascontiguousarray(big[:, :, ::-1]))
    for out, floor in ((256, 55.0), (128, 51.0), (64, 45.0)):
        ref = np.asarray(pil.resize((out, out), Image.Resampling.LANCZOS))[:, :, ::-1]
        ours = align.warp_affine_resampled(big, _shrink_affine(out / 4096), (out, out))
        area = cv2.resize(big, (out, out), interpolation=cv2.INTER_AREA)
        assert _psnr(ours, ref) > floor
        assert _psnr(ours, ref) > _psnr(area, ref) + 8


def test_one_pixel_source_does_not_hang() -> None:
    # OpenCV's warp never returns for a one-pixel source with reflected borders.
    out = align.warp_affine_resampled(np.full((1, 1, 3), 7, np.uint8), np.eye(2, 3) * 4, (16, 16))
    assert (out == 7).all()


def test_face_problem_names_what_is_impossible(landmarks: dict) -> None:
    hw = (600, 800)
    real = align.face_template(512) * 0.5 + 100
    box = np.array([80, 80, 300, 320], np.float32)
    assert align.face_problem(box, real, hw) is None
    assert align.face_problem(None, real, hw) is None
    # Cut by the frame but mostly inside: still a face.
    assert align.face_problem(box - 120, real - 120, hw) is None
    far = align.face_problem(None, align.face_template(512) * 1e4, hw)
    assert far is not None
    assert "px apart in a 800x600 photo" in far
    assert "not finite" in (align.face_problem(None, real * np.nan, hw) or "")
    assert "box" in (align.face_problem(np.array([0, 0, 1e7, 1e7]), real, hw) or "")
    assert "outside" in (align.face_problem(box + 5000, real, hw) or "")
    assert "outside" in (align.face_problem(None, real + 5000, hw) or "")
    coincident = np.repeat(real[:1], 5, axis=0)
    assert "no alignment" in (align.face_problem(None, coincident, hw) or "")


def _broken_detector_models(folder: Path) -> TinyModels:
    """The tiny models with a detector whose landmark head is 10^4 times louder still: its faces
    span ~400,000 px on a 512 px photo, as a mismatched checkpoint's do."""
    import torch

    from gpen_watch.catalog import registry
    from gpen_watch.restore.nets.retinaface import build_retinaface

    models = make_tiny_models(folder)
    spec = registry.detector_spec("retinaface_mobile0.25")
    state = torch.load(models.model_dir / spec.filename, weights_only=True)
    det = build_retinaface("mobile0.25")
    det.load_state_dict({k.removeprefix("module."): v for k, v in state.items()})
    with torch.no_grad():
        for head in det.LandmarkHead:
            head.conv1x1.weight.mul_(10_000)
    torch.save({f"module.{k}": v for k, v in det.state_dict().items()}, models.model_dir / spec.filename)
    return models


@pytest.mark.slow
def test_restore_with_a_broken_detector_finishes_with_a_note(
    tmp_path: Path, astronaut_bgr: np.ndarray
) -> None:
    models = _broken_detector_models(tmp_path / "models")
    photo = tmp_path / "in" / "astronaut.png"
    photo.parent.mkdir()
    cv2.imwrite(str(photo), astronaut_bgr)
    cmd = [*restore_command(models, str(photo), "-o", str(tmp_path / "out")), "--no-parse"]
    # The old code was still filtering after 10 minutes; the timeout only keeps a regression finite.
    proc = subprocess.run(cmd, capture_output=True, text=True, env=cli_env(models), timeout=240)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "done 1 of 1 image: no face restored (1 image without a face)" in proc.stdout
    lines = (proc.stdout + proc.stderr).splitlines()
    note = [line for line in lines if "cannot be a face in this photo" in line]
    assert len(note) == 1, proc.stdout + proc.stderr
    assert "note: astronaut.png: ignored" in note[0]
    assert "px apart in a 512x512 photo" in note[0]
    assert "detector checkpoint" in note[0]
    # Nothing pasted from the impossible faces: the photo passes through unchanged.
    out = cv2.imread(str(tmp_path / "out" / "astronaut.png"))
    assert out is not None
    assert np.array_equal(out, astronaut_bgr)
