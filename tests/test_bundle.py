"""The one-folder Linux bundle as a user gets it: unpacked anywhere, run with no Python installed.

.ci/run builds it (`bash packaging/build.sh bundle`) and names it in $GPEN_WATCH_BUNDLE; elsewhere
these tests skip. The folder is unpacked into an empty one and run with a PATH that holds no
Python (an empty folder) and an environment of the test's user folders only: `--version`, a
restore with the tiny models, the same after the folder is moved (a bundle is used from wherever it
is put), and the service with its tray under Xvfb, whose icon must dock, whose dashboard must answer
and whose workers (the same executable, started by multiprocessing) must restore a dropped photo.
Every ELF file in it must need no glibc newer than the floor the packages state (Debian 11's 2.31;
packaging/glibc_check.py), and it must carry PyTorch's CPU build and OpenCV without its GUI. A
traceback from inside it (OpenCV made unloadable in a copy, as a root without OpenCV's libraries
did) must show under each frame's file and line that line of the bundle's own source, or none:
not a line of another file of the same name on sys.path, nor of a checkout in the current folder.
tests/test_linux_roots.py runs it in Debian 11, 12 and 13 roots.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import cv2
import numpy as np
import pytest
from conftest import REPO, TinyModels, restore_command
from installed_app import (
    drop_and_wait,
    open_signed_in,
    status_with_dashboard,
    wait_for_tray_icon,
    write_config,
    xserver,  # noqa: F401 - the fixture xserver_with_tray asks for
    xserver_with_tray,  # noqa: F401 - a fixture
)
from PIL import Image
from test_tray_xvfb import XServer, wait_for

from gpen_watch.service import control

BUNDLE = os.environ.get("GPEN_WATCH_BUNDLE", "")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not BUNDLE, reason="no bundle built: GPEN_WATCH_BUNDLE names one (.ci/run builds it)"),
]


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("bundle")
    with tarfile.open(BUNDLE) as tar:
        tar.extractall(where, filter="tar")
    program = where / "gpen-watch" / "gpen-watch"
    assert program.is_file()
    return program


def _env(tmp_path: Path, **more: str) -> dict[str, str]:
    """The test's user folders and a PATH with no Python on it."""
    empty = tmp_path / "no-python"
    empty.mkdir(exist_ok=True)
    keep = ("HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR")
    return {**{k: os.environ[k] for k in keep if k in os.environ}, "PATH": str(empty), **more}


def _restore(program: Path, models: TinyModels, tmp_path: Path, photo: Path, out: Path) -> None:
    cmd = [str(program), *restore_command(models, str(photo), "-o", str(out))[3:], "--no-parse"]
    env = _env(tmp_path, GPEN_WATCH_MODEL_DIR=str(models.model_dir))
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "restored" in run.stdout
    assert (out / photo.name).is_file()


def test_the_bundle_runs_and_restores_with_no_python_on_the_path(
    unpacked: Path, tiny_models: TinyModels, tmp_path: Path, astronaut_bgr: np.ndarray
) -> None:
    assert shutil.which("python3", path=_env(tmp_path)["PATH"]) is None
    version = subprocess.run([str(unpacked), "--version"], env=_env(tmp_path), capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.startswith("gpen-watch "), version
    photo = tmp_path / "astronaut.png"
    cv2.imwrite(str(photo), astronaut_bgr)
    _restore(unpacked, tiny_models, tmp_path, photo, tmp_path / "out")
    # Moved after a first run, as a user drags the folder elsewhere: it runs from there.
    moved = tmp_path / "elsewhere" / "gpen-watch"
    moved.parent.mkdir()
    shutil.copytree(unpacked.parent, moved, symlinks=True)
    _restore(moved / "gpen-watch", tiny_models, tmp_path, photo, tmp_path / "out-moved")


def test_the_bundle_runs_the_service_with_its_tray_and_dashboard(
    unpacked: Path,
    tiny_models: TinyModels,
    tmp_path: Path,
    astronaut_bgr: np.ndarray,
    xserver_with_tray: XServer,  # noqa: F811 - the fixture imported from installed_app
) -> None:
    inbox = write_config(tmp_path, tiny_models)
    env = _env(tmp_path, DISPLAY=xserver_with_tray.name)
    with open(tmp_path / "stderr.txt", "wb") as err:
        proc = subprocess.Popen([str(unpacked), "run"], env=env, stdout=subprocess.DEVNULL, stderr=err)
    try:
        wait_for_tray_icon(xserver_with_tray)
        status = wait_for(status_with_dashboard, "the service's dashboard", 60)
        url = subprocess.run(
            [str(unpacked), "dashboard", "--url"], env=env, capture_output=True, text=True, check=True
        ).stdout.strip()
        assert url.startswith(str(status["dashboard"]).rstrip("/"))
        assert "gpen-watch" in open_signed_in(url)
        drop_and_wait(inbox, tmp_path / "outbox", astronaut_bgr)
        control.request("stop")
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_no_file_of_the_bundle_needs_a_glibc_newer_than_the_stated_floor(unpacked: Path) -> None:
    check = REPO / "packaging" / "glibc_check.py"
    done = subprocess.run([sys.executable, str(check), str(unpacked.parent)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "floor 2.31" in done.stdout  # the floor docs/packaging.md states
    sys.stdout.write(done.stdout)


def test_the_bundle_carries_the_cpu_build_of_torch_and_opencv_without_its_gui(unpacked: Path) -> None:
    internal = unpacked.parent / "_internal"
    names = [p.name for p in internal.rglob("*")]
    libraries = [n for n in names if ".so" in n]
    assert not [n for n in libraries if n.startswith(("libcudart", "libcudnn", "libcublas", "libnccl"))]
    assert not {"nvidia", "triton"} & {p.name for p in internal.iterdir()}, "PyTorch's CUDA build"
    # OpenCV's GUI build brings Qt and its own folder of libraries (Pillow's libxcb is Pillow's own).
    gui = [n for n in libraries if n.startswith(("libQt", "libGL.", "libGLX"))]
    assert not gui and "opencv_python.libs" not in names, f"OpenCV's GUI build: {gui}"
    assert any(n.startswith("opencv_python_headless") for n in names)


def _frames(traceback_text: str) -> list[tuple[str, int, str | None]]:
    """Each frame of a printed traceback: its file, its line number and the source line shown."""
    lines = traceback_text.splitlines()
    frames = []
    for i, line in enumerate(lines):
        m = re.match(r'^  File "([^"]+)", line (\d+), in ', line)
        if m is None:
            continue
        after = lines[i + 1] if i + 1 < len(lines) else ""
        shown = after.strip() if after.startswith("    ") and not after.strip().startswith("^") else None
        frames.append((m[1], int(m[2]), shown))
    return frames


def test_a_traceback_shows_each_frames_own_source_line(unpacked: Path, tmp_path: Path) -> None:
    # A copy (hard links: no gigabyte copied) whose OpenCV cannot load, as in a root without the
    # libraries OpenCV needed: a restore fails while importing it, with a traceback.
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-al", str(unpacked.parent), str(copy)], check=True)
    internal = copy / "_internal"
    library = next((internal / "cv2").glob("cv2*.so"))
    library.unlink()  # the link only: the unpacked bundle keeps its file
    library.write_bytes(b"not a library")
    # The current folder holds other copies of the files the frames name, as a checkout would.
    here = tmp_path / "checkout"
    for name in ("gpen_watch/imaging/decode.py", "gpen_watch/imaging/load.py", "gpen_watch/cli/__init__.py"):
        (here / name).parent.mkdir(parents=True, exist_ok=True)
        (here / name).write_text("DECOY\n" * 400, encoding="utf-8")
    photo = here / "photo.png"
    Image.new("RGB", (64, 64)).save(photo)
    run = subprocess.run(
        [str(copy / "gpen-watch"), "restore", str(photo), "-o", str(tmp_path / "out"), "--no-download"],
        cwd=here,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode != 0 and "Traceback" in run.stderr, run.stdout + run.stderr
    assert "DECOY" not in run.stderr, run.stderr
    frames = _frames(run.stderr)
    # The frame that failed, at the line the checkout's source has for it.
    decode = (REPO / "gpen_watch" / "imaging" / "decode.py").read_text(encoding="utf-8").splitlines()
    expected = ("gpen_watch/imaging/decode.py", decode.index("import cv2") + 1, "import cv2")
    assert expected in frames, run.stderr
    for file, number, shown in frames:
        source = Path(file) if os.path.isabs(file) else internal / file
        own = (
            source.read_text(encoding="utf-8").splitlines()[number - 1].strip() if source.is_file() else None
        )
        assert shown == own, f"{file}, line {number} shows {shown!r}, not its own {own!r}:\n{run.stderr}"
        if file.startswith("gpen_watch/"):
            assert own, f"{file}: gpen-watch's sources are not in the bundle"
