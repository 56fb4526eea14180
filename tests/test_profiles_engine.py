"""One restorer serving photos of several inbox profiles: each photo restored with its job's
settings, one model set per distinct generator loaded once and kept warm, faces for different
generators never in one batch, and the least recently used set unloaded under a small budget."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import cv2
import numpy as np
import pytest
from conftest import (
    TINY_GPEN,
    TinyModels,
    assert_same_up_to_rounding,
    same_up_to_rounding,
    tiny_restore_config,
)
from test_restorer import KnownFaces

from gpen_watch.restore.api import FileJob
from gpen_watch.restore.engines.modelsets import ModelKey
from gpen_watch.restore.engines.restorer import Restorer
from gpen_watch.restore.stages.enhance import FaceEnhancer


@pytest.fixture(scope="module")
def other_gpen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A second random-weight generator of the same layout as the tiny one, another seed."""
    import torch

    from gpen_watch.restore.nets.gpen_model import GPENConfig, build_gpen

    torch.manual_seed(1)
    path = tmp_path_factory.mktemp("other") / "tiny-gpen-64-b.pth"
    torch.save(build_gpen(GPENConfig(**TINY_GPEN)).state_dict(), path)
    return path


@pytest.fixture()
def photo(tmp_path: Path, astronaut_bgr: np.ndarray) -> Path:
    path = tmp_path / "in" / "astronaut.png"
    path.parent.mkdir()
    cv2.imwrite(str(path), astronaut_bgr)
    return path


def _restore_alone(
    models: TinyModels, landmarks: dict, src: Path, dst: Path, **changes: object
) -> np.ndarray:
    """What a restorer whose own settings are ``changes`` writes for ``src``."""
    with Restorer(tiny_restore_config(models, **changes), threads=2, detector=KnownFaces(landmarks)) as r:
        (res,) = list(r.restore_files([FileJob(src, dst)]))
    assert res.ok, res.error
    return cv2.imread(str(dst), cv2.IMREAD_UNCHANGED)


def test_each_photo_is_restored_with_its_own_jobs_settings(
    tiny_models: TinyModels, landmarks: dict, photo: Path, other_gpen: Path, tmp_path: Path
) -> None:
    own = tiny_restore_config(tiny_models)
    jobs = [
        FileJob(photo, tmp_path / "global.png"),
        FileJob(photo, tmp_path / "none.png", restore=dataclasses.replace(own, strength=0.0)),
        FileJob(photo, tmp_path / "other.png", restore=dataclasses.replace(own, model=str(other_gpen))),
        FileJob(photo, tmp_path / "half.png", restore=dataclasses.replace(own, strength=0.5)),
        # A profile cannot change what the worker holds for everyone: its device stays the worker's.
        FileJob(photo, tmp_path / "device.png", restore=dataclasses.replace(own, device="cuda:7")),
    ]
    with Restorer(own, threads=2, detector=KnownFaces(landmarks)) as r:
        results = {res.dst.name: res for res in r.restore_files(jobs) if res.dst is not None}
        loads = dict(r.models.loads)
    assert sorted(results) == ["device.png", "global.png", "half.png", "none.png", "other.png"]
    assert all(res.ok for res in results.values())
    # One model set per generator, each loaded once.
    assert loads == {ModelKey.of(own): 1, ModelKey.of(dataclasses.replace(own, model=str(other_gpen))): 1}

    def read(name: str) -> np.ndarray:
        return cv2.imread(str(tmp_path / name), cv2.IMREAD_UNCHANGED)

    original = cv2.imread(str(photo), cv2.IMREAD_UNCHANGED)
    assert np.array_equal(read("none.png"), original)
    assert "1 face found, 0 restored (restore.strength = 0)" in results["none.png"].notes
    alone = tmp_path / "alone"
    alone.mkdir()
    # What a restorer with those settings as its own writes. Up to rounding, not bit for bit: here
    # the faces of several photos share a generator batch, alone each is a batch of one, and the
    # kernels for those shapes may sum in other orders (conftest.same_up_to_rounding).
    assert_same_up_to_rounding(
        read("global.png"), _restore_alone(tiny_models, landmarks, photo, alone / "a.png")
    )
    assert_same_up_to_rounding(read("device.png"), read("global.png"))
    other = _restore_alone(tiny_models, landmarks, photo, alone / "b.png", model=str(other_gpen))
    assert_same_up_to_rounding(read("other.png"), other)
    assert not same_up_to_rounding(other, read("global.png"))
    half = _restore_alone(tiny_models, landmarks, photo, alone / "h.png", strength=0.5)
    assert_same_up_to_rounding(read("half.png"), half)


def test_faces_for_different_generators_are_never_batched_together(
    tiny_models: TinyModels,
    landmarks: dict,
    photo: Path,
    other_gpen: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    own = tiny_restore_config(tiny_models, face_batch=8)
    other = dataclasses.replace(own, model=str(other_gpen))
    calls: list[tuple[int, int]] = []  # (id of the enhancer, faces in the pass)
    real = FaceEnhancer.enhance

    def spy(self: FaceEnhancer, crops: np.ndarray, strengths: np.ndarray | None = None):
        calls.append((id(self), len(crops)))
        return real(self, crops, strengths)

    monkeypatch.setattr(FaceEnhancer, "enhance", spy)
    # Interleaved, and strengths differing within one generator's photos.
    jobs = [
        FileJob(photo, tmp_path / "a1.png"),
        FileJob(photo, tmp_path / "b1.png", restore=other),
        FileJob(photo, tmp_path / "a2.png", restore=dataclasses.replace(own, strength=0.5)),
        FileJob(photo, tmp_path / "b2.png", restore=dataclasses.replace(other, strength=0.25)),
    ]
    with Restorer(own, threads=2, detector=KnownFaces(landmarks)) as r:
        results = list(r.restore_files(jobs))
        sets = {
            ModelKey.of(own): r.models.peek(ModelKey.of(own)),
            ModelKey.of(other): r.models.peek(ModelKey.of(other)),
        }
    assert all(res.ok for res in results)
    ids = {id(s.enhancer): key for key, s in sets.items() if s is not None}
    # Two passes, one per generator, each with both of its photos' faces (the batch had room for 8).
    assert sorted((ids[i].model, n) for i, n in calls) == sorted([(own.model, 2), (other.model, 2)])


def test_the_least_recently_used_model_set_is_unloaded_when_the_budget_is_small(
    tiny_models: TinyModels,
    landmarks: dict,
    photo: Path,
    other_gpen: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def run(memory_mb: int) -> tuple[dict[ModelKey, int], list[list[ModelKey]]]:
        own = tiny_restore_config(tiny_models, memory_mb=memory_mb)
        other = dataclasses.replace(own, model=str(other_gpen))
        held = []
        with Restorer(own, threads=2, detector=KnownFaces(landmarks)) as r:
            for i, profile in enumerate([other, None, other]):
                (res,) = list(
                    r.restore_files([FileJob(photo, tmp_path / f"{memory_mb}-{i}.png", restore=profile)])
                )
                assert res.ok, res.error
                held.append(r.models.loaded)
            return dict(r.models.loads), held

    a = ModelKey.of(tiny_restore_config(tiny_models))
    b = dataclasses.replace(a, model=str(other_gpen))
    caplog.set_level(logging.INFO, logger="gpen_watch.restore.engines.modelsets")
    # 256 MB is less than the process takes with its first set in: one set at a time.
    loads, held = run(256)
    assert held == [[b], [a], [b]]
    assert loads == {a: 2, b: 2}
    unloaded = [r.getMessage() for r in caplog.records if r.getMessage().startswith("unloaded")]
    assert len(unloaded) == 3
    assert unloaded[0].startswith(
        "unloaded model set tiny-gpen-64.pth, feathered mask (least recently used) to make room for "
        "tiny-gpen-64-b.pth, feathered mask"
    )
    assert "restore.memory_mb" in unloaded[0]
    caplog.clear()
    # With room for both, each is loaded once and both stay warm.
    loads, held = run(16384)
    assert held == [[a, b], [b, a], [a, b]]
    assert loads == {a: 1, b: 1}
    assert not [r for r in caplog.records if r.getMessage().startswith("unloaded")]


def test_a_remote_workers_job_carries_its_profile(
    tiny_models: TinyModels, photo: Path, tmp_path: Path
) -> None:
    """A cluster worker gets the photo's bytes instead of its path (dispatch.payload): the
    profile travels with them, so the remote restorer uses the photo's inbox settings too."""
    from gpen_watch.dispatch.payload import Scratch, pack

    profile = dataclasses.replace(tiny_restore_config(tiny_models), strength=0.0)
    photo_job = pack(FileJob(photo, tmp_path / ".a.tmp", "png", 90, restore=profile))
    scratch = Scratch(tmp_path / "scratch")
    try:
        remote = scratch.job(7, photo_job)
        assert (remote.format, remote.jpeg_quality, remote.restore) == ("png", 90, profile)
    finally:
        scratch.close()


def test_photos_of_two_profiles_in_one_run_under_a_small_budget_reload_only_on_a_switch(
    tiny_models: TinyModels, landmarks: dict, photo: Path, other_gpen: Path, tmp_path: Path
) -> None:
    """One live run over photos of both generators, one photo in hand at a time (the budget has
    no room for more): a set is loaded again only when the next photo needs the other generator,
    never between the steps of one photo."""
    own = tiny_restore_config(tiny_models, memory_mb=256)
    other = dataclasses.replace(own, model=str(other_gpen))
    order = [other, other, None, None, other]
    jobs = [FileJob(photo, tmp_path / f"{i}.png", restore=p) for i, p in enumerate(order)]
    with Restorer(own, threads=2, detector=KnownFaces(landmarks)) as r:
        results = list(r.restore_files(jobs))
        loads = dict(r.models.loads)
    assert len(results) == 5 and all(res.ok for res in results)
    assert loads == {ModelKey.of(own): 2, ModelKey.of(other): 2}
    alone_b = _restore_alone(tiny_models, landmarks, photo, tmp_path / "b.png", model=str(other_gpen))
    for i, profile in enumerate(order):
        out = cv2.imread(str(tmp_path / f"{i}.png"), cv2.IMREAD_UNCHANGED)
        assert same_up_to_rounding(out, alone_b) == (profile is not None), i


@pytest.fixture(scope="module")
def big_gpen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-weight 1024 px generator, narrow enough that its weights take next to nothing: what
    it costs a CPU restorer is its passes' working memory."""
    import torch

    from gpen_watch.restore.nets.gpen_model import GPENConfig, build_gpen

    torch.manual_seed(2)
    path = tmp_path_factory.mktemp("big") / "tiny-gpen-1024.pth"
    torch.save(build_gpen(GPENConfig(**{**TINY_GPEN, "size": 1024})).state_dict(), path)
    return path


def test_a_larger_generators_working_memory_counts_when_deciding_what_stays_loaded(
    tiny_models: TinyModels,
    landmarks: dict,
    photo: Path,
    big_gpen: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Beside the global 64 px set, a 1024 px profile's weights fit the budget many times over, but
    eight faces through it on a CPU take ~17 GB more than the global set's passes (the per-face
    estimates, restore.runtime.memory): under a budget its weights fit but that does not, the idle global
    set is unloaded first; with room for both, both stay."""
    from gpen_watch.restore.runtime import memory

    def run(memory_mb: int) -> list[list[ModelKey]]:
        own = tiny_restore_config(tiny_models, memory_mb=memory_mb)
        big = dataclasses.replace(own, model=str(big_gpen))
        held = []
        with Restorer(own, threads=2, detector=KnownFaces(landmarks)) as r:
            assert r.models.cap_mb > 2 * r.models.total_mb + 1000  # the weights alone would fit
            for i, profile in enumerate([big, None]):
                (res,) = list(
                    r.restore_files([FileJob(photo, tmp_path / f"{memory_mb}-{i}.png", restore=profile)])
                )
                assert res.ok, res.error
                held.append(r.models.loaded)
        return held

    a = ModelKey.of(tiny_restore_config(tiny_models))
    b = dataclasses.replace(a, model=str(big_gpen))
    extra = memory.activation_mb(1024, 8, True, False) - memory.activation_mb(64, 8, True, False)
    assert 16384 < extra < 65536 - 4096
    caplog.set_level(logging.INFO, logger="gpen_watch.restore.engines.modelsets")
    assert run(16384) == [[b], [a]]
    unloaded = [r.getMessage() for r in caplog.records if r.getMessage().startswith("unloaded")]
    assert unloaded[0].startswith(
        "unloaded model set tiny-gpen-64.pth, feathered mask (least recently used) to make room for "
        "tiny-gpen-1024.pth, feathered mask"
    )
    caplog.clear()
    assert run(65536) == [[a, b], [b, a]]
    assert not [r for r in caplog.records if r.getMessage().startswith("unloaded")]
