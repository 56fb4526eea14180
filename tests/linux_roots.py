"""Real root file systems of the Linux releases the packages are for, and commands run inside them.

A root is made by packaging/root.sh (mmdebstrap, minbase, from the release's own mirror; cached as a
tarball between runs) and entered with packaging/in-root.sh (bubblewrap, as root: no mounts left
behind). Both need root, mmdebstrap and bwrap; :func:`missing_tools` says what is missing, for a
skip. The tests of the packages in these roots are tests/test_linux_roots.py and
tests/test_rpm_package.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from conftest import REPO

ROOT_SH = REPO / "packaging" / "root.sh"
IN_ROOT_SH = REPO / "packaging" / "in-root.sh"

# (suite, the name a user knows it by). CI tries the Debian releases; GPEN_WATCH_ROOT_SUITES (a
# comma-separated list of suites, such as jammy,noble) tries others by hand.
DEBIAN = (("bullseye", "Debian 11"), ("bookworm", "Debian 12"), ("trixie", "Debian 13"))
UBUNTU = (("jammy", "Ubuntu 22.04"), ("noble", "Ubuntu 24.04"))


def suites() -> tuple[tuple[str, str], ...]:
    chosen = [s for s in os.environ.get("GPEN_WATCH_ROOT_SUITES", "").split(",") if s]
    if not chosen:
        return DEBIAN
    names = dict(DEBIAN + UBUNTU)
    return tuple((suite, names.get(suite, suite)) for suite in chosen)


def missing_tools() -> str | None:
    """Why roots cannot be made here, or None."""
    if os.geteuid() != 0:
        return "making a root needs root"
    missing = [t for t in ("mmdebstrap", "bwrap") if shutil.which(t) is None]
    if missing:
        return f"{' and '.join(missing)} not installed (Debian: mmdebstrap, bubblewrap)"
    return None


@dataclass(frozen=True)
class Root:
    suite: str
    path: Path
    binds: tuple[tuple[str, str, str], ...] = ()  # (--bind or --ro-bind, here, there)

    def command(self, *args: str, env: dict[str, str] | None = None) -> list[str]:
        """The command line that runs ``args`` inside the root (``env`` set there)."""
        binds = [part for bind in self.binds for part in bind]
        setenv = [f"{k}={v}" for k, v in (env or {}).items()]
        return ["bash", str(IN_ROOT_SH), str(self.path), *binds, "--", "env", *setenv, *args]

    def run(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 600, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            self.command(*args, env=env), capture_output=True, text=True, timeout=timeout, check=False
        )
        if check:
            assert done.returncode == 0, f"{' '.join(args)} in {self.suite}:\n{done.stdout}\n{done.stderr}"
        return done

    def host_path(self, inside: str) -> Path:
        """Where a path of the root lies on this machine."""
        return self.path / inside.lstrip("/")


def make_root(suite: str, where: Path, *packages: str, binds: tuple[tuple[str, str, str], ...] = ()) -> Root:
    """A fresh root of ``suite`` at ``where`` (minbase plus ``packages``)."""
    done = subprocess.run(
        ["bash", str(ROOT_SH), suite, str(where), *packages], capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return Root(suite, where, binds)


def remove_root(root: Root) -> None:
    # A root holds files owned by its own users (apt's _apt): only root removes them, as the tests run.
    shutil.rmtree(root.path, ignore_errors=True)
