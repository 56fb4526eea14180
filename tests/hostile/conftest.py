"""Fixtures of the hostile suite: services that are always killed at the end, isolated user folders
for module-scoped scenarios (one service run shared by many small tests)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .harness import Service

if sys.platform == "win32":  # pragma: no cover
    collect_ignore_glob = ["test_*.py"]  # POSIX signals, FIFOs, sockets and mounts throughout


@contextlib.contextmanager
def isolated_env(folder: Path) -> Iterator[Path]:
    """The autouse isolated_user_dirs of tests/conftest.py, for fixtures wider than one test."""
    with pytest.MonkeyPatch.context() as mp:
        for var, sub in [("XDG_CONFIG_HOME", "config"), ("XDG_CACHE_HOME", "cache"), ("XDG_STATE_HOME", "state"),
                         ("XDG_DATA_HOME", "data"), ("XDG_RUNTIME_DIR", "run")]:
            (folder / sub).mkdir(parents=True, exist_ok=True)
            mp.setenv(var, str(folder / sub))
        (folder / "run").chmod(0o700)
        mp.setenv("HOME", str(folder))
        mp.delenv("GPEN_WATCH_MODEL_DIR", raising=False)
        yield folder


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Callable[..., Service]]:
    made: list[Service] = []

    def make(*extra: str, **kw: Any) -> Service:
        svc = Service(tmp_path / f"svc{len(made)}", *extra, **kw)
        made.append(svc)
        return svc

    yield make
    for svc in made:
        svc.close()
