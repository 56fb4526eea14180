"""The engine's face checks end to end (``restore.engines.face_checks``): the identity check after
each face batch and faces already sharp left as they are, through the real ``Restorer``.

The faces are real (the Solvay photo and the astronaut, found by the real RetinaFace weights in
../shared) and so are dlib's model files; the generator is the tiny random-weight GPEN of
conftest.py, whose output is noise, not a face: so with it every restored face must be flagged,
and that is what the first test says. A stand-in for the generator that gives each face back
unchanged, or gives two faces each other's crop (another person's face pasted in), shows the
check tells them apart. Without dlib's files the photo is restored and one sentence says why the
check did not run.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import torch
from conftest import TinyModels, isolated_env, make_tiny_models, tiny_restore_config
from dlib_models import PREDICTOR, REAL_DETECTOR, RECOGNITION, SOLVAY, SOLVAY_PEOPLE, needs_dlib_models

from gpen_watch.restore.api import FileJob, FileResult

pytestmark = [needs_dlib_models, pytest.mark.slow]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with isolated_env(tmp_path_factory.mktemp("checks-home")) as folder:
        yield folder


def _models(folder: Path, with_dlib: bool) -> TinyModels:
    from gpen_watch.catalog import registry

    models = make_tiny_models(folder)
    shutil.copyfile(
        REAL_DETECTOR, models.model_dir / registry.detector_spec("retinaface_mobile0.25").filename
    )
    if with_dlib:
        for path in (RECOGNITION, PREDICTOR):
            shutil.copyfile(path, models.model_dir / path.name)
    return models


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory, home: Path) -> TinyModels:
    return _models(tmp_path_factory.mktemp("checks-models"), with_dlib=True)


@pytest.fixture(scope="module")
def restorer(models: TinyModels) -> Iterator[Any]:
    from gpen_watch.restore.engines.restorer import Restorer

    with Restorer(tiny_restore_config(models, face_batch=32), download=False) as r:
        yield r


def _restore(restorer: Any, src: Path, out: Path, **job: Any) -> FileResult:
    (result,) = restorer.restore_files([FileJob(src, out, **job)])
    assert result.ok, result.error
    return result


class _Generator:
    """Stands in for the generator: each face back as it came (``order`` None), or the faces of a
    pass in the given order (face i gets face order[i]'s crop)."""

    def __init__(self, real: Any, order: list[int] | None = None) -> None:
        self.real = real
        self.order = order

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def __call__(self, faces: torch.Tensor, /, *args: Any, **kwargs: Any) -> torch.Tensor:
        out = faces.clone()
        return out if self.order is None else out[self.order]


@pytest.fixture
def generator(restorer: Any) -> Iterator[Any]:
    enhancer = restorer.enhancer
    real = enhancer.model
    yield lambda order=None: setattr(enhancer, "model", _Generator(real, order))
    enhancer.model = real


def test_random_weights_give_noise_and_every_face_is_flagged(restorer: Any, tmp_path: Path) -> None:
    result = _restore(restorer, SOLVAY, tmp_path / "solvay.png")
    restored = [c for c in result.checks if c.restored]
    assert result.faces == len(restored) == SOLVAY_PEOPLE
    # The tests' GPEN has random weights: what it gives back is noise, no one's face.
    assert all(c.flagged for c in restored), [c.distance for c in restored]
    assert all(len(c.descriptor) == 128 * 4 for c in restored)
    assert sorted(c.index for c in restored) == list(range(SOLVAY_PEOPLE))
    assert any("may not look like the same person" in note for note in result.notes)
    assert result.timings["identity"] > 0


def test_a_face_given_back_unchanged_is_not_flagged(restorer: Any, generator: Any, tmp_path: Path) -> None:
    generator()
    result = _restore(restorer, SOLVAY, tmp_path / "solvay.png")
    distances = [c.distance for c in result.checks]
    assert len(distances) == SOLVAY_PEOPLE
    assert max(d for d in distances if d is not None) < 1e-5
    assert not any(c.flagged for c in result.checks)
    assert not any("may not look like" in note for note in result.notes)


def test_another_persons_face_pasted_in_is_flagged(restorer: Any, generator: Any, tmp_path: Path) -> None:
    """Faces 0 and 1 of the pass swapped before paste-back: those two are flagged, no other."""
    order = list(range(SOLVAY_PEOPLE))
    order[0], order[1] = 1, 0
    generator(order)
    result = _restore(restorer, SOLVAY, tmp_path / "solvay.png")
    flagged = [c for c in result.checks if c.flagged]
    assert len(flagged) == 2, [(c.index, c.distance) for c in result.checks]
    unflagged = [c.distance for c in result.checks if not c.flagged]
    assert max(d for d in unflagged if d is not None) < 1e-5


@pytest.fixture(scope="module")
def astronaut_file(tmp_path_factory: pytest.TempPathFactory, astronaut_bgr: np.ndarray) -> Path:
    path = tmp_path_factory.mktemp("astronaut") / "astronaut.png"
    cv2.imwrite(str(path), astronaut_bgr)
    return path


def _sharp_job(restorer: Any, **changes: Any) -> dict[str, Any]:
    return {"restore": dataclasses.replace(restorer.cfg, skip_sharp=True, **changes)}


def test_a_sharp_face_is_left_as_it_was_and_said_so(
    restorer: Any, astronaut_file: Path, tmp_path: Path
) -> None:
    views = tmp_path / "views"
    result = _restore(restorer, astronaut_file, tmp_path / "out.png", views=views, **_sharp_job(restorer))
    assert result.faces == 0 and result.found == 1
    (check,) = result.checks
    assert not check.restored and check.detail is not None and check.detail >= restorer.cfg.sharp_above
    assert check.distance is None and len(check.descriptor) == 512  # described for grouping by person
    assert "restore" not in result.timings  # the generator never ran
    shown = json.loads((views / "faces.json").read_text())["faces"]
    assert shown[0]["restored"] is False
    assert shown[0]["reason"].startswith(f"left as it was: already sharp (detail {check.detail:.2f}")
    assert any("already sharp" in note for note in result.notes)


def test_a_blurred_copy_is_restored(restorer: Any, astronaut_bgr: np.ndarray, tmp_path: Path) -> None:
    src = tmp_path / "blurred.png"
    cv2.imwrite(str(src), cv2.GaussianBlur(astronaut_bgr, (0, 0), 1.5))
    result = _restore(restorer, src, tmp_path / "out.png", **_sharp_job(restorer))
    assert result.faces == 1
    (check,) = result.checks
    assert check.restored and check.detail is not None and check.detail < restorer.cfg.sharp_above


def test_a_redo_restores_a_sharp_face_it_picks_or_with_skip_sharp_off(
    restorer: Any, astronaut_file: Path, tmp_path: Path
) -> None:
    picked = _restore(restorer, astronaut_file, tmp_path / "a.png", face_ids=(0,), **_sharp_job(restorer))
    assert picked.faces == 1 and picked.checks[0].restored
    off = _restore(restorer, astronaut_file, tmp_path / "b.png", restore=dataclasses.replace(restorer.cfg))
    assert off.faces == 1 and off.checks[0].restored


def test_without_dlibs_files_the_photo_is_restored_and_one_sentence_says_why(
    tmp_path_factory: pytest.TempPathFactory, home: Path, tmp_path: Path
) -> None:
    from gpen_watch.restore.engines.restorer import Restorer

    bare = _models(tmp_path_factory.mktemp("no-dlib"), with_dlib=False)
    with Restorer(tiny_restore_config(bare, face_batch=32), download=False) as r:
        result = _restore(r, SOLVAY, tmp_path / "solvay.png")
    assert result.faces == SOLVAY_PEOPLE
    assert all(c.distance is None and not c.flagged for c in result.checks)
    said = [note for note in result.notes if "identity check" in note]
    assert len(said) == 1
    assert said[0].startswith(
        "the identity check did not run: dlib's dlib_face_recognition_resnet_model_v1.dat"
    )
    assert "models fetch dlib-face-recognition dlib-landmarks-5" in said[0]
    assert said[0].count(". ") == 0  # one sentence
