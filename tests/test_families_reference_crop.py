"""GFPGAN and CodeFormer against facexlib's pipeline on one face of the Solvay photo, in the
README's command: the fast twin of test_families_solvay's whole-photo comparison (slow), with the
same reference (facexlib's FaceRestoreHelper around the same network and weights, given the same
landmarks), the same random weights in the released layouts, found by the model store, and the
same PSNR bound on the face box; the torch engine, one face, so each family costs two passes of
its network (ours and the reference's).

The face is the Solvay photo's at (701, 191)-(745, 248), one of the 24 whose affine facexlib's
LMEDS estimate leaves the same as gpen-watch's least squares, cut out with its neighbours' edges
around it; restore.faces = center restores it alone. Skipped where ../shared is not beside the
repository or facexlib cannot be imported."""

from __future__ import annotations

import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from facexlib_reference import reference_restore
from release_models import write_release_checkpoint
from test_families_solvay import BOUNDS, DETECTOR, RUNS, _box, _faces, _psnr
from test_real_faces import REAL_DETECTOR, SOLVAY

from gpen_watch.catalog import registry
from gpen_watch.catalog.face_frames import FFHQ_FRAME
from gpen_watch.imaging.load import load_image
from gpen_watch.restore.stages import align

pytestmark = pytest.mark.skipif(
    not (SOLVAY.is_file() and REAL_DETECTOR.is_file()),
    reason="../shared (the Solvay photo and the real RetinaFace weights) is not beside the repository",
)

# Rows and columns of the Solvay photo around the face; its box's centre is the crop's.
CROP = (slice(140, 300), slice(643, 803))


@pytest.fixture(scope="module")
def face_photo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("solvay-face") / "solvay-face.png"
    assert cv2.imwrite(str(path), load_image(SOLVAY).bgr8[CROP])
    return path


@pytest.mark.parametrize("model", list(RUNS))
def test_one_face_is_restored_as_facexlibs_pipeline_restores_it(
    model: str, face_photo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpen_watch import cli
    from gpen_watch.restore.runtime.face_model import family_impl

    model_dir = tmp_path / "models"
    model_dir.mkdir()
    shutil.copyfile(REAL_DETECTOR, model_dir / registry.detector_spec(DETECTOR).filename)
    # CodeFormer's code head zeroed, as in the whole-photo test: random codes flip between any two
    # pipelines that differ by a rounding.
    weights = write_release_checkpoint(model, model_dir, one_code=model == "CodeFormer")

    out = tmp_path / "out"
    argv = ["restore", str(face_photo), "-o", str(out), "--model", model, "--detector", DETECTOR]
    argv += ["--model-dir", str(model_dir), "--no-parse", "--device", "cpu", "--no-download"]
    argv += ["--no-progress", "--set", "restore.engine=torch", "--set", "restore.faces=center"]
    if RUNS[model] is not None:
        argv += ["--set", f"restore.fidelity={RUNS[model]}"]
    capsys.readouterr()
    assert cli.main(argv) == 0
    summary = capsys.readouterr().out
    assert "done 1 of 1 image: 1 face restored" in summary, summary
    ours = load_image(out / face_photo.name).bgr8

    photo = load_image(face_photo).bgr8
    centre = np.array(photo.shape[1::-1]) / 2
    [face] = [
        f for f in _faces(model_dir, photo) if (f.box[:2] <= centre).all() and (centre <= f.box[2:]).all()
    ]
    landmarks = face.landmarks[None].astype(np.float32)
    net = family_impl(registry.face_family(model)).network(model, weights)
    fidelity = RUNS[model]

    def network(x: torch.Tensor) -> torch.Tensor:
        y: torch.Tensor = net(x) if fidelity is None else net(x, torch.full((len(x),), fidelity))
        return y

    reference, helper = reference_restore(photo, landmarks, network)

    # The same affine as facexlib's, so the crops differ only by their resampling.
    _, affines = align.align_faces(photo, landmarks, 512, FFHQ_FRAME)
    corners = np.array([[0.0, 0.0], [511.0, 0.0], [0.0, 511.0], [511.0, 511.0]])
    moved = align.transform_points(align.invert_affine(affines[0]), corners) - align.transform_points(
        align.invert_affine(helper.affine_matrices[0]), corners
    )
    assert np.abs(moved).max() < 0.01, moved

    psnr = _psnr(ours[_box(face)], reference[_box(face)])
    print(f"\n{model}: PSNR over the face box against facexlib's pipeline: {psnr:.1f} dB")
    # The whole-photo test's bound on the median face: this face is a typical one.
    assert psnr >= BOUNDS[model][0], psnr
    # Outside the face's square the photo is the one given (the neighbours left as they were).
    untouched = np.ones(photo.shape[:2], bool)
    inverse = align.invert_affine(affines[0])
    square = align.transform_points(inverse, corners)
    x1, y1 = np.floor(square.min(0)).astype(int) - 2
    x2, y2 = np.ceil(square.max(0)).astype(int) + 2
    untouched[max(y1, 0) : y2, max(x1, 0) : x2] = False
    assert np.array_equal(ours[untouched], photo[untouched])
