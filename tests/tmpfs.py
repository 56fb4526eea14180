"""A small real tmpfs mounted on a test folder: genuinely full or read-only file systems.

Needs root and a kernel that lets the test mount (CI's container does); ``can_mount()`` says whether
this machine does, and tests fall back to a simulation or skip otherwise. Imported as ``tmpfs``
under pytest and as ``tests.tmpfs`` from the hostile suite's ``python -m`` runs.
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path


@functools.lru_cache(maxsize=1)
def can_mount() -> bool:
    if os.name != "posix" or os.geteuid() != 0:
        return False
    probe = Path(f"/tmp/gw-mount-probe-{os.getpid()}")
    probe.mkdir(exist_ok=True)
    try:
        ok = (
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)], capture_output=True
            ).returncode
            == 0
        )
        if ok:
            subprocess.run(["umount", str(probe)], check=True)
        return ok
    except OSError:
        return False
    finally:
        probe.rmdir()


@contextlib.contextmanager
def mounted(where: Path, size: str = "4m") -> Iterator[Path]:
    """Mount a ``size`` tmpfs on ``where`` (created if missing) for the block; unmounted after."""
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(where)], capture_output=True)
        subprocess.run(["umount", "-l", str(where)], check=True)


def read_only(where: Path, on: bool) -> None:
    """Remount the tmpfs on ``where`` read-only (or writable again)."""
    subprocess.run(["mount", "-o", f"remount,{'ro' if on else 'rw'}", str(where)], check=True)
