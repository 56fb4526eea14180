"""Whether a venv holds PyTorch's CPU build, the one gpen-watch's packages carry, or its CUDA build.

Run with the venv's own Python once torch is installed (the bundle's build, .ci/package_check):
``python torch_check.py --source "WHERE TORCH CAME FROM"``. It reads the installed distributions'
metadata, not pip's printed list: PyTorch's CUDA build shows as any ``nvidia-*``, ``cuda-*`` or
``triton`` distribution, or as a torch whose own requirements name one. Prints one line saying
which torch it is and where it came from; exits 1 with the fix when it is the CUDA build.
"""

from __future__ import annotations

import argparse
import re
import sys
from importlib import metadata

CUDA_PREFIXES = ("nvidia-", "cuda-")
CUDA_NAMES = frozenset({"triton", "pytorch-triton"})
# NVIDIA's names that are not CUDA: NVML's Python bindings, which gpen-watch itself requires (GPU
# status in the tray, a few hundred KB of pure Python).
NOT_CUDA = frozenset({"nvidia-ml-py"})
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def is_cuda_part(name: str) -> bool:
    name = normalized(name)
    return (name.startswith(CUDA_PREFIXES) or name in CUDA_NAMES) and name not in NOT_CUDA


def cuda_parts() -> list[str]:
    """The installed distributions that belong to a CUDA build, and those torch itself asks for."""
    found = {
        normalized(d.metadata["Name"]) for d in metadata.distributions() if is_cuda_part(d.metadata["Name"])
    }
    try:
        requires = metadata.requires("torch") or []
    except metadata.PackageNotFoundError:
        requires = []
    for requirement in requires:
        if "extra ==" in requirement:
            continue
        name = re.match(r"[A-Za-z0-9._-]+", requirement)
        if name and is_cuda_part(name.group()):
            found.add(f"{normalized(name.group())} (required by torch)")
    return sorted(found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default="pip's configured indexes", help="where torch was installed from")
    args = parser.parse_args(argv)
    try:
        version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        print(f"torch is not installed in {sys.prefix}", file=sys.stderr)
        return 1
    parts = cuda_parts()
    if parts:
        print(
            f"torch {version} from {args.source} is PyTorch's CUDA build: this environment holds "
            f"{', '.join(parts)}. gpen-watch's packages carry the CPU build (about 5 GB smaller). "
            f"Build again with PyTorch's CPU index (leave TORCH_INDEX unset, or set it to {CPU_INDEX}), "
            "or with TORCH_WHEEL naming a local torch-*+cpu-*.whl.",
            file=sys.stderr,
        )
        return 1
    print(f"torch {version}, the CPU build (no nvidia-*, cuda-* or triton), from {args.source}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
