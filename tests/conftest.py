"""Shared fixtures: real photos, tiny real-architecture models with random weights, isolated user dirs.

Model weights cannot be downloaded here, so tests build the real architectures (GPEN at a small
size, facexlib's RetinaFace and ParseNet), save random weights the way the real files are stored,
and load them through the same model store users go through.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

DATA = Path(__file__).parent / "data"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--runslow", action="store_true", help="also run long stress tests")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--runslow"):
        return
    skip = pytest.mark.skip(reason="slow stress test: run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def point_user_dirs(mp: pytest.MonkeyPatch, home: Path) -> Path:
    """Point every platformdirs location (and HOME) at folders under home, made if missing."""
    for var, sub in [
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_CACHE_HOME", "cache"),
        ("XDG_STATE_HOME", "state"),
        ("XDG_DATA_HOME", "data"),
        ("XDG_RUNTIME_DIR", "run"),
    ]:
        (home / sub).mkdir(parents=True, exist_ok=True)
        mp.setenv(var, str(home / sub))
    (home / "run").chmod(0o700)
    mp.setenv("HOME", str(home))
    mp.delenv("GPEN_WATCH_MODEL_DIR", raising=False)
    return home


@pytest.fixture(autouse=True)
def isolated_user_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point every platformdirs location at a temp folder: tests never touch the real user's files."""
    return point_user_dirs(monkeypatch, tmp_path_factory.mktemp("home"))


@contextlib.contextmanager
def isolated_env(folder: Path) -> Iterator[Path]:
    """isolated_user_dirs on a given folder, for fixtures wider than one test and for runs outside
    pytest (tests/hostile/stress.py); the environment is restored on leaving."""
    with pytest.MonkeyPatch.context() as mp:
        yield point_user_dirs(mp, folder)


# --- photos -------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def landmarks() -> dict:
    return json.loads((DATA / "face_landmarks.json").read_text())


@pytest.fixture(scope="session")
def astronaut_bgr() -> np.ndarray:
    from skimage import data

    return np.ascontiguousarray(data.astronaut()[:, :, ::-1])


@pytest.fixture(scope="session")
def grace_hopper_path() -> Path:
    import matplotlib.cbook

    return Path(matplotlib.cbook.get_sample_data("grace_hopper.jpg", asfileobj=False))


# --- tiny models --------------------------------------------------------------------------------


@dataclass(frozen=True)
class TinyModels:
    model_dir: Path  # detector and parser files under their registry names
    gpen: Path  # a small GPEN checkpoint, loaded by path (architecture inferred from the keys)


TINY_GPEN = {"size": 64, "style_dim": 64, "n_mlp": 2, "channel_multiplier": 1, "narrow": 0.0625}


def make_tiny_models(folder: Path, with_parser: bool = False) -> TinyModels:
    import torch
    from facexlib.detection.retinaface import RetinaFace

    from gpen_watch.modelstore import registry
    from gpen_watch.restore.gpen_model import GPENConfig, build_gpen

    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    gpen_path = folder / "tiny-gpen-64.pth"
    torch.save(build_gpen(GPENConfig(**TINY_GPEN)).state_dict(), gpen_path)
    det = RetinaFace(network_name="mobile0.25", half=False, device=torch.device("cpu"))
    # Random weights score every anchor about 0.5 and put all five landmarks on one pixel. A sharp
    # class head and a loud landmark head make the untrained detector report a few (meaningless)
    # faces of a plausible size per photo, so every stage of the pipeline runs.
    with torch.no_grad():
        for head in det.ClassHead:
            head.conv1x1.weight.mul_(20000)
            head.conv1x1.bias.zero_()
        for head in det.LandmarkHead:
            head.conv1x1.weight.mul_(100000)
    spec = registry.detector_spec("retinaface_mobile0.25")
    # facexlib's released files carry DataParallel's "module." prefix; store it the same way.
    torch.save({f"module.{k}": v for k, v in det.state_dict().items()}, folder / spec.filename)
    if with_parser:
        from facexlib.parsing.parsenet import ParseNet

        parser = ParseNet(in_size=512, out_size=512, parsing_ch=19)
        torch.save(parser.state_dict(), folder / registry.parser_spec().filename)
    return TinyModels(folder, gpen_path)


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> TinyModels:
    return make_tiny_models(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="session")
def tiny_models_with_parser(tmp_path_factory: pytest.TempPathFactory) -> TinyModels:
    return make_tiny_models(tmp_path_factory.mktemp("models_parse"), with_parser=True)


def tiny_restore_config(models: TinyModels, **changes: object):
    """A RestoreConfig that runs the tiny models on CPU with no network."""
    from gpen_watch.config import RestoreConfig

    cfg = RestoreConfig(
        model=str(models.gpen),
        detector="retinaface_mobile0.25",
        use_parse=False,
        model_dir=models.model_dir,
        device="cpu",
        face_batch=8,
    )
    for k, v in changes.items():
        setattr(cfg, k, v)
    return cfg


def restore_command(models: TinyModels, *args: str) -> list[str]:
    """`gpen-watch restore ARGS` on the tiny models, on the CPU, never downloading."""
    return [
        sys.executable,
        "-m",
        "gpen_watch",
        "restore",
        *args,
        "--model",
        str(models.gpen),
        "--detector",
        "retinaface_mobile0.25",
        "--device",
        "cpu",
        "--no-download",
        "--no-progress",
    ]


def cli_env(models: TinyModels) -> dict[str, str]:
    env = dict(os.environ)
    env["GPEN_WATCH_MODEL_DIR"] = str(models.model_dir)
    return env
