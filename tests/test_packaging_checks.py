"""The checks the package builds make on what they are about to ship (fast: no package is built).

packaging/torch_check.py: PyTorch's CUDA build is told from its CPU build by the installed
distributions' metadata (any nvidia-*, cuda-* or triton distribution, or a torch that requires one),
and the build stops with the fix. packaging/glibc_check.py: the newest glibc symbol version any ELF
file in a folder needs, against the floor the Linux packages state.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

TORCH_CHECK = REPO / "packaging" / "torch_check.py"
GLIBC_CHECK = REPO / "packaging" / "glibc_check.py"


def fake_distribution(site: Path, name: str, version: str, *requires: str) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {name}",
        f"Version: {version}",
        *(f"Requires-Dist: {r}" for r in requires),
    ]
    (info / "METADATA").write_text("\n".join(lines) + "\n", encoding="utf-8")


def torch_check(site: Path) -> subprocess.CompletedProcess[str]:
    # -S: no site-packages of this venv; only the fake distributions under `site` are installed.
    return subprocess.run(
        [sys.executable, "-S", str(TORCH_CHECK), "--source", "the test's index"],
        env={"PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_cpu_build_passes_and_says_where_it_came_from(tmp_path: Path) -> None:
    fake_distribution(
        tmp_path, "torch", "2.13.0+cpu", "filelock", "sympy>=1.13.3", "opt-einsum>=3.3; extra == 'opt-einsum'"
    )
    fake_distribution(tmp_path, "filelock", "3.16.1")
    fake_distribution(tmp_path, "nvidia-ml-py", "13.580.82")  # gpen-watch's own: NVML's bindings, no CUDA
    done = torch_check(tmp_path)
    assert done.returncode == 0, done.stderr
    assert (
        done.stdout.strip()
        == "torch 2.13.0+cpu, the CPU build (no nvidia-*, cuda-* or triton), from the test's index"
    )


def test_the_cuda_build_fails_naming_its_parts_and_the_fix(tmp_path: Path) -> None:
    # As PyPI's torch for Linux installs: the NVIDIA libraries and triton beside it.
    fake_distribution(
        tmp_path,
        "torch",
        "2.13.0",
        "nvidia-cublas-cu12==12.8.4.1; platform_system == 'Linux'",
        "triton==3.5.0",
    )
    fake_distribution(tmp_path, "nvidia-cublas-cu12", "12.8.4.1")
    fake_distribution(tmp_path, "nvidia_cudnn_cu12", "9.10.2.21")  # named with underscores in its metadata
    fake_distribution(tmp_path, "triton", "3.5.0")
    done = torch_check(tmp_path)
    assert done.returncode == 1
    said = done.stderr
    assert "torch 2.13.0 from the test's index is PyTorch's CUDA build" in said
    for part in ("nvidia-cublas-cu12", "nvidia-cudnn-cu12", "triton"):
        assert part in said
    assert "https://download.pytorch.org/whl/cpu" in said and "TORCH_WHEEL" in said


def test_a_torch_that_requires_cuda_libraries_is_caught_even_before_they_are_installed(
    tmp_path: Path,
) -> None:
    fake_distribution(tmp_path, "torch", "2.13.0", "nvidia-nccl-cu12==2.27.3; platform_system == 'Linux'")
    done = torch_check(tmp_path)
    assert done.returncode == 1
    assert "nvidia-nccl-cu12 (required by torch)" in done.stderr


@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump not installed (Debian: binutils)")
def test_the_glibc_check_names_each_file_above_the_floor_and_passes_at_or_below_it(tmp_path: Path) -> None:
    lib = tmp_path / "_internal" / "libc-user.so"
    lib.parent.mkdir()
    shutil.copy(Path(sys.executable).resolve(), tmp_path / "program")  # an ELF that needs glibc
    shutil.copy(Path(sys.executable).resolve(), lib)
    (tmp_path / "notes.txt").write_text("not an ELF file", encoding="utf-8")
    low = subprocess.run(
        [sys.executable, str(GLIBC_CHECK), str(tmp_path), "--floor", "2.2.5"], capture_output=True, text=True
    )
    assert low.returncode == 1
    assert "needs glibc" in low.stderr and "program" in low.stderr and "_internal/libc-user.so" in low.stderr
    assert "2 files need a glibc newer than 2.2.5" in low.stderr
    high = subprocess.run(
        [sys.executable, str(GLIBC_CHECK), str(tmp_path), "--floor", "99.0"], capture_output=True, text=True
    )
    assert high.returncode == 0, high.stderr
    assert high.stdout.startswith("2 ELF files; the newest glibc any needs is 2.")
