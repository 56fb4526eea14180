"""PyTorch for a clone's venv: the build this machine can use, said in one sentence before installing.

Run with the venv's Python, before `pip install -e .` (the README's first command does):
``.venv/bin/python packaging/install_torch.py``. On Linux, PyPI's torch is the CUDA build (about
6 GB with NVIDIA's libraries); without an NVIDIA GPU it is dead weight, so there the CPU build
comes from PyTorch's CPU index (about 1.3 GB). On Windows and macOS PyPI's torch is already the
right one. ``--gpu yes|no`` overrides the guess; ``--dry-run`` only says what it would do. A torch
already in the venv is kept.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

CPU_INDEX = "https://download.pytorch.org/whl/cpu"


@dataclass(frozen=True)
class Plan:
    pip_args: tuple[str, ...]
    sentence: str


def has_nvidia_gpu() -> bool:
    """An NVIDIA driver is loaded (its /proc entry), or nvidia-smi lists a GPU."""
    if Path("/proc/driver/nvidia/version").exists():
        return True
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return listed.returncode == 0 and "GPU" in listed.stdout


def plan(platform: str, gpu: bool) -> Plan:
    if not platform.startswith("linux"):
        return Plan(
            ("torch",),
            "Installing PyTorch from PyPI (about 1 GB; it runs on the CPU, or Apple's GPU on a Mac).",
        )
    if gpu:
        return Plan(
            ("torch",),
            "An NVIDIA GPU is here: installing PyTorch's CUDA build from PyPI (about 6 GB with NVIDIA's "
            "libraries); for the CPU build instead (1.3 GB), run this again with --gpu no.",
        )
    return Plan(
        ("torch", "--index-url", CPU_INDEX),
        "No NVIDIA GPU found: installing PyTorch's CPU build (about 1.3 GB, not PyPI's 6 GB CUDA build); "
        "with an NVIDIA GPU whose driver is not loaded yet, run this again with --gpu yes.",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", choices=("auto", "yes", "no"), default="auto", help="an NVIDIA GPU is here")
    parser.add_argument("--dry-run", action="store_true", help="say what would be installed, install nothing")
    args = parser.parse_args(argv)
    if sys.prefix == sys.base_prefix and not args.dry_run:
        print("Run this with the venv's Python (.venv/bin/python), not the system's.", file=sys.stderr)
        return 2
    try:
        have = metadata.version("torch")
    except metadata.PackageNotFoundError:
        have = ""
    if have and args.gpu == "auto":
        print(f"PyTorch {have} is already in {sys.prefix}: kept.")
        return 0
    gpu = has_nvidia_gpu() if args.gpu == "auto" else args.gpu == "yes"
    chosen = plan(sys.platform, gpu)
    print(chosen.sentence, flush=True)
    command = [sys.executable, "-m", "pip", "install", *chosen.pip_args]
    if args.dry_run:
        print(" ".join(command))
        return 0
    return subprocess.run(command, env=os.environ, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
