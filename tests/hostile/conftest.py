"""Fixtures of the hostile suite: services that are always killed at the end, isolated user folders
for module-scoped scenarios (one service run shared by many small tests)."""

from __future__ import annotations

import sys

from .harness import Service, services_fixture

if __package__ == "tests.hostile":  # python -m tests.hostile.stress, from the repository root
    from ..conftest import isolated_env
else:  # pytest puts tests/ on sys.path and imports tests/conftest.py as `conftest`
    from conftest import isolated_env

__all__ = ["isolated_env", "services"]

if sys.platform == "win32":  # pragma: no cover
    collect_ignore_glob = ["test_*.py"]  # POSIX signals, FIFOs, sockets and mounts throughout

services = services_fixture(Service, own_folders=True)
