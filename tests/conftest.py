"""Shared fixtures: real photos, tiny real-architecture models with random weights, isolated user dirs.

Model weights cannot be downloaded here, so tests build the real architectures (GPEN at a small
size, RetinaFace and ParseNet), save random weights the way the real files are stored,
and load them through the same model store users go through.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).resolve().parents[1]


def module_command(args: str, env: dict[str, str] | None = None) -> str:
    """`gpen-watch ARGS` as a ``python -m gpen_watch`` subprocess of these tests (a service, a
    command) names it in its hints under ``env`` (gpen_watch.platform.program)."""
    import shutil

    from gpen_watch.platform import program

    path = (os.environ if env is None else env).get("PATH")
    main = str(REPO / "gpen_watch" / "__main__.py")
    name = program.program_for(main, sys.executable, frozen=False, which=lambda n: shutil.which(n, path=path))
    return f"{name} {args}"


def heavy_modules_after(code: str, heavy: tuple[str, ...]) -> list[str]:
    """Which of the ``heavy`` modules (torch, cv2, ray...) a fresh interpreter has imported once it
    has run ``code``: how a test holds a light process to staying light."""
    probe = f"{code}\nimport sys\nprint(sorted(m for m in {heavy!r} if m in sys.modules))\n"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env)
    return list(ast.literal_eval(out.stdout.strip()))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--runslow", action="store_true", help="also run the slow and stress tests")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The README's command runs neither slow nor stress tests (docs/testing.md); CI runs them after
    it, the slow ones first (--runslow -m slow), then the soak loops (--runslow -m stress)."""
    if config.getoption("--runslow"):
        return
    skip = pytest.mark.skip(reason="slow test: run with --runslow (docs/testing.md)")
    for item in items:
        if "slow" in item.keywords or "stress" in item.keywords:
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


# --- comparing results of float32 networks -----------------------------------------------------

# Float32 results of one network on one input, computed by other kernels, differ by a few units in
# the last place: oneDNN picks its convolution kernels by CPU (AVX-512, AVX2, arm64), shape (tile,
# batch) and thread count, and each sums in its own order. Measured here between batch sizes and
# thread counts: 2e-6 at most on outputs in [-1, 1] (16 ulps of 1.0), most values alike.
FLOAT32_KERNEL_SPREAD = 2e-6
# A result pixel is resampled from about 10 of a network's output pixels (a 64 px face crop warped
# onto a larger face, a tile upscaled), so one flipped output level can reach about 10 of them.
RESAMPLED_SPREAD = 10


def rounding_flips(got: np.ndarray, want: np.ndarray) -> tuple[int, float]:
    """The largest difference (in levels) and the fraction of values that differ."""
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
    return int(diff.max(initial=0)), float((diff > 0).mean()) if diff.size else 0.0


def same_up_to_rounding(got: np.ndarray, want: np.ndarray) -> bool:
    """Whether two integer results of the same float32 network on the same input agree as well as
    kernels of another CPU, shape or thread count let them (not bit for bit).

    Rounding to levels, a float difference under one level moves a value across a rounding
    boundary only when it lies that close to one, and then by one level; the resampling and
    blending after the network average such values, which keeps the difference within one level.
    A flip needs the value within FLOAT32_KERNEL_SPREAD * peak of a boundary: about 5e-4 of uint8
    values, spread to RESAMPLED_SPREAD result pixels. For uint16 (65535 levels) the same bound is
    over 1, so only the one-level bound holds there.
    """
    assert want.dtype in (np.uint8, np.uint16), want.dtype
    biggest, fraction = rounding_flips(got, want)
    peak = np.iinfo(want.dtype).max
    return biggest <= 1 and fraction <= FLOAT32_KERNEL_SPREAD * peak * RESAMPLED_SPREAD


def assert_same_up_to_rounding(got: np.ndarray, want: np.ndarray) -> None:
    """same_up_to_rounding, saying by how much they differ when they do not."""
    biggest, fraction = rounding_flips(got, want)
    assert same_up_to_rounding(got, want), f"differ by up to {biggest} levels on {fraction:.3%} of values"


# Where two faces' paste masks overlap, the face whose mask is strictly larger takes the pixel
# (``paste``, as upstream). Two runs of the same detector weights (another engine, another
# implementation) give landmarks within 1e-4 px of each other, which moves the masks by as little,
# and on a pixel where the two masks are that close to equal it hands the pixel to the other face:
# a jump of any size, on pixels that no tolerance in levels can cover. Measured: 8 values of the tiny models' 921,600 (under 1e-5) on an Intel Xeon, none
# on an AMD EPYC. Any real fault (a face misplaced, a wrong network) differs on far more.
OVERLAP_FLIPS = 1e-4


def same_photo_but_overlaps(got: np.ndarray, want: np.ndarray, what: str, levels: int = 1) -> None:
    """Within ``levels`` on every value but the few that overlapping faces' masks hand over."""
    biggest, fraction = rounding_flips(got, want)
    far = float((np.abs(got.astype(np.int64) - want.astype(np.int64)) > levels).mean())
    # Figures for docs/models.md and the report (pytest -s shows them).
    print(
        f"\n{what}: largest difference {biggest} level(s), {fraction:.4%} of values differ, "
        f"{far:.5%} by more than {levels}"
    )
    assert far <= OVERLAP_FLIPS, (
        f"{what}: {far:.4%} of values differ by more than {levels} level(s) (up to {biggest})"
    )


# --- tiny models --------------------------------------------------------------------------------


@dataclass(frozen=True)
class TinyModels:
    model_dir: Path  # detector and parser files under their registry names
    gpen: Path  # a small GPEN checkpoint, loaded by path (architecture inferred from the keys)


TINY_GPEN = {"size": 64, "style_dim": 64, "n_mlp": 2, "channel_multiplier": 1, "narrow": 0.0625}


def make_tiny_models(folder: Path, with_parser: bool = False) -> TinyModels:
    import torch

    from gpen_watch.catalog import registry
    from gpen_watch.restore.nets.gpen_model import GPENConfig, build_gpen
    from gpen_watch.restore.nets.parsenet import ParseNet
    from gpen_watch.restore.nets.retinaface import build_retinaface

    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    gpen_path = folder / "tiny-gpen-64.pth"
    torch.save(build_gpen(GPENConfig(**TINY_GPEN)).state_dict(), gpen_path)
    det = build_retinaface("mobile0.25")
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
    # The released detector files carry DataParallel's "module." prefix; store it the same way.
    torch.save({f"module.{k}": v for k, v in det.state_dict().items()}, folder / spec.filename)
    if with_parser:
        parser = ParseNet()
        torch.save(parser.state_dict(), folder / registry.parser_spec().filename)
    return TinyModels(folder, gpen_path)


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> TinyModels:
    return make_tiny_models(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="session")
def tiny_onnx_gpen(tiny_models: TinyModels, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The tiny GPEN as an ONNX Runtime face model on the CPU provider, exported once a session
    (about 15 s on 2 cores) into a cache folder of its own (the tiny models' folder is shared)."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    from gpen_watch.restore.engines.onnx_face_model import load_onnx_gpen

    return load_onnx_gpen(tiny_models.gpen, "cpu", cache_dir=tmp_path_factory.mktemp("onnx_cache"))


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
