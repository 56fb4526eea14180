"""At run time gpen-watch imports neither torchvision nor facexlib.

Its detector, parser and their decoding are its own modules, so a CPU-only PyTorch is enough
(docs/architecture.md, "Why the networks are the project's own"). Here every process of a run, the
CLI, the service and each worker it starts, gets an import hook (a ``sitecustomize`` module first
on PYTHONPATH) that refuses both packages and writes down every attempt; the photo must still come
out, and nothing may have tried.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import cv2
import numpy as np
import pytest
from conftest import TinyModels, cli_env, restore_command
from service_harness import TESTS_DIR, ServiceProcess, finished, real_engine_args, services_fixture

REFUSED = ("torchvision", "facexlib")

_HOOK = """
import importlib.abc
import os
import sys

_LOG = os.environ["GPEN_WATCH_TEST_IMPORT_LOG"]


def _note(line):
    with open(_LOG, "a", encoding="utf-8") as f:
        f.write(line + "\\n")


class _Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {refused!r}:
            _note(f"tried {{name}} in {{os.getpid()}}")
            raise ImportError(f"{{name}} is refused by the test's import hook")
        return None


sys.meta_path.insert(0, _Refuse())
_note(f"armed {{os.getpid()}}")
"""


@pytest.fixture
def hooked(tmp_path: Path) -> Iterator[tuple[dict[str, str], Path]]:
    """Environment entries that put the refusing hook into every Python process started with them,
    and the file each process writes to (one "armed PID" line at start, one line per attempt)."""
    folder = tmp_path / "hook"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(_HOOK.format(refused=REFUSED), encoding="utf-8")
    log = tmp_path / "imports.log"
    log.touch()
    path = os.pathsep.join(filter(None, [str(folder), str(TESTS_DIR), os.environ.get("PYTHONPATH")]))
    yield {"PYTHONPATH": path, "GPEN_WATCH_TEST_IMPORT_LOG": str(log)}, log


def _attempts(log: Path) -> tuple[list[str], set[str]]:
    lines = log.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.startswith("tried")], {
        line.split()[1] for line in lines if line.startswith("armed")
    }


def _photo(folder: Path, astronaut_bgr: np.ndarray) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "astronaut.png"
    cv2.imwrite(str(path), astronaut_bgr)
    return path


def test_the_hook_refuses_what_it_should(hooked: tuple[dict[str, str], Path], tmp_path: Path) -> None:
    """The hook is armed by the environment alone, and refuses an import: the tests below mean
    something."""
    env, log = hooked
    code = "import facexlib"
    run = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True, check=False
    )
    assert run.returncode != 0
    assert "refused by the test's import hook" in run.stderr
    tried, armed = _attempts(log)
    assert tried and len(armed) == 1


@pytest.mark.slow
def test_restore_runs_without_torchvision_or_facexlib(
    tiny_models_with_parser: TinyModels,
    hooked: tuple[dict[str, str], Path],
    tmp_path: Path,
    astronaut_bgr: np.ndarray,
) -> None:
    env, log = hooked
    photo = _photo(tmp_path / "in", astronaut_bgr)
    out = tmp_path / "out"
    cmd = restore_command(tiny_models_with_parser, str(photo), "-o", str(out))  # parsing is on by default
    run = subprocess.run(
        cmd, env={**cli_env(tiny_models_with_parser), **env}, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "faces restored" in run.stdout or "face restored" in run.stdout, run.stdout
    assert (out / "astronaut.png").is_file()
    tried, armed = _attempts(log)
    assert tried == []
    assert armed


services = services_fixture(ServiceProcess)


@pytest.mark.slow
def test_service_and_its_workers_run_without_torchvision_or_facexlib(
    services: Callable[..., ServiceProcess],
    tiny_models_with_parser: TinyModels,
    hooked: tuple[dict[str, str], Path],
    astronaut_bgr: np.ndarray,
) -> None:
    env, log = hooked
    args = [*real_engine_args(tiny_models_with_parser), "--set", "restore.use_parse=true"]
    svc = services(*args, restorer=None, env=env).start()
    _photo(svc.inbox, astronaut_bgr)
    status = svc.wait(lambda s: finished(s) >= 1, 180, "the photo restored")
    assert status["queue"]["done"] == 1, svc.logs()
    assert (svc.outbox / "astronaut.png").is_file()
    assert svc.stop() == 0
    tried, armed = _attempts(log)
    assert tried == [], svc.logs()
    # The service and at least one restorer worker, each its own process with the hook armed.
    assert len(armed) >= 2, armed
