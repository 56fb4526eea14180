"""Ray, imported only when cluster mode is on, with a clear error where it is not installed.

The service process imports this module lazily; ``gpen_watch.dispatch`` and the rest of the parent
never import ray (tests/test_layout.py checks).
"""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path
from typing import Any

from gpen_watch.base.errors import ClusterError

INSTALL_HINT = "install it with `pip install 'gpen-watch[cluster]'` (Ray 2.60)"


def ray() -> Any:
    """The ray module (typed Any: its stubs are partial, and strict mypy would chase them)."""
    try:
        return importlib.import_module("ray")
    except ImportError as exc:
        raise ClusterError(
            f"cluster mode needs Ray, which is not installed ({exc}); {INSTALL_HINT}"
        ) from None


def ray_cli() -> str:
    """The path of Ray's own command line (`ray start`, `ray stop`, `ray status`)."""
    beside = Path(sys.executable).parent / "ray"  # the venv gpen-watch runs from, activated or not
    found = str(beside) if beside.is_file() else shutil.which("ray")
    if found is None:
        raise ClusterError(f"the `ray` command is not on PATH; {INSTALL_HINT}")
    return found


def ray_failure(command: str, output: str, code: int | None, token_path: Path) -> str:
    """Why `ray COMMAND` failed, from what it printed: the refused token said plainly (with
    what to do), else its last three non-empty lines, else its exit code."""
    from gpen_watch.cluster.token import refused_token

    if "InvalidAuthToken" in output:
        return refused_token(token_path)
    lines = [line for line in output.splitlines() if line.strip()]
    return f"`ray {command}` failed: {'; '.join(lines[-3:]) or f'exit code {code}'}"
