"""The Linux packages in real roots of Debian 11, 12 and 13, as a user of each release gets them.

.ci/run builds the bundle (in a Debian 11 root) and the .deb from it, and names them in
$GPEN_WATCH_BUNDLE and $GPEN_WATCH_DEB. For each release a minimal root is made from the release's
own mirror (tests/linux_roots.py: no Python in it), and in it:

- the bundle alone, unpacked into a folder: `--version` and a restore, with no Python anywhere;
- the .deb, installed with apt: `gpen-watch --version`; a restore of the Solvay photo with the real
  RetinaFace-MobileNet0.25 weights (all 29 faces); the service started headless, a photo dropped
  into its inbox and restored, another sent by `gpen-watch-send-to` (the command Dolphin's menu
  from the package runs) and restored beside itself, the service stopped; `apt-get remove`, after which no file of the
  package is left, and `purge`;
- on Debian 13 (and Ubuntu 24.04), whose PyGObject is built for its Python 3.13 (3.12), not the
  bundle's 3.11: the bundle's service under an X server with a tray host, whose icon docks through
  pystray's xorg backend.

GPEN_WATCH_ROOT_SUITES=jammy,noble (with UBUNTU_KEYRING naming Ubuntu's archive keyring, as Debian
13's ubuntu-keyring package installs it) runs the same in Ubuntu 22.04 and 24.04 roots, by hand: CI
runs the Debian releases.

Slow (about a minute and a half a release, most of it unpacking); roots are cached between runs
(packaging/root.sh). Skipped where roots cannot be made (not root, no mmdebstrap or bwrap).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, as gpen-watch's config uses it
    import tomli as tomllib

import cv2
import numpy as np
import pytest
from conftest import REPO, make_tiny_models
from installed_app import wait_for_tray_icon, xserver, xserver_with_tray  # noqa: F401 - fixtures
from linux_roots import UBUNTU, Root, make_root, missing_tools, remove_root, suites
from test_tray_xvfb import XServer, wait_for

DEB = os.environ.get("GPEN_WATCH_DEB", "")
BUNDLE = os.environ.get("GPEN_WATCH_BUNDLE", "")
SHARED = REPO.parent / "shared"
SOLVAY = SHARED / "data" / "Solvay_conference_1927.png"
REAL_DETECTOR = SHARED / "fixtures" / "retinaface_mobilenet0.25_real.pth"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (DEB and BUNDLE),
        reason="no packages built: GPEN_WATCH_DEB and GPEN_WATCH_BUNDLE (.ci/run builds them)",
    ),
    pytest.mark.skipif(missing_tools() is not None, reason=str(missing_tools())),
]

# Where things lie inside each root.
ALONE = "/opt/alone/gpen-watch/gpen-watch"  # the bundle as a user unpacks it, not the package
HOME = "/root"
USER_ENV = {
    "HOME": HOME,
    "XDG_RUNTIME_DIR": f"{HOME}/.run",
    "PATH": "/usr/bin:/bin",
}
RESTORE_ARGS = (
    "--detector",
    "retinaface_mobile0.25",
    "--no-parse",
    "--device",
    "cpu",
    "--no-download",
    "--no-progress",
)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory, astronaut_bgr_module: np.ndarray) -> Path:
    """Models and photos, bound read-only into every root at /inputs."""
    folder = tmp_path_factory.mktemp("inputs")
    make_tiny_models(folder / "models")
    (folder / "photos").mkdir()
    cv2.imwrite(str(folder / "photos" / "astronaut.png"), astronaut_bgr_module)
    if SOLVAY.is_file() and REAL_DETECTOR.is_file():
        (folder / "solvay").mkdir()
        shutil.copy(SOLVAY, folder / "solvay")
        (folder / "solvay-models").mkdir()
        shutil.copy(REAL_DETECTOR, folder / "solvay-models" / "detection_mobilenet0.25_Final.pth")
    return folder


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundle's tarball unpacked: the folder that holds gpen-watch/."""
    where = tmp_path_factory.mktemp("bundle")
    with tarfile.open(BUNDLE) as tar:
        tar.extractall(where, filter="tar")
    return where


@pytest.fixture(scope="module")
def astronaut_bgr_module() -> np.ndarray:
    from skimage import data

    return cv2.cvtColor(data.astronaut(), cv2.COLOR_RGB2BGR)


@pytest.fixture(scope="module", params=suites(), ids=[suite for suite, _ in suites()])
def root(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, inputs: Path, unpacked: Path
) -> Iterator[Root]:
    suite, _name = request.param
    x11 = Path("/tmp/.X11-unix")  # the X servers' sockets, bound in for the tray's test
    if not x11.is_dir():
        x11.mkdir()
        x11.chmod(0o1777)
    binds = (
        ("--ro-bind", str(Path(DEB).resolve()), "/pkgs/gpen-watch.deb"),
        # Unpacked once for every release (a gigabyte), read-only, where a user might have put it.
        ("--ro-bind", str(unpacked), "/opt/alone"),
        ("--ro-bind", str(inputs), "/inputs"),
        ("--bind", str(x11), str(x11)),
    )
    # Ubuntu's minbase has no apt (Debian's has): asked for by name there.
    extra = ("apt",) if suite in dict(UBUNTU) else ()
    made = make_root(suite, tmp_path_factory.mktemp(f"root-{suite}") / "root", *extra, binds=binds)
    (made.host_path(USER_ENV["XDG_RUNTIME_DIR"])).mkdir(mode=0o700, parents=True)
    try:
        yield made
    finally:
        remove_root(made)


def _version() -> str:
    with open(REPO / "pyproject.toml", "rb") as f:
        version: str = tomllib.load(f)["project"]["version"]
    return version


def _has_no_python(root: Root) -> None:
    found = root.run("sh", "-c", "command -v python3 python", env=USER_ENV, check=False)
    assert found.returncode != 0, f"{root.suite}'s root has a Python: {found.stdout}"


def test_the_bundle_alone_runs_and_restores_with_no_python_in_the_root(root: Root) -> None:
    _has_no_python(root)
    version = root.run(ALONE, "--version", env=USER_ENV)
    assert version.stdout.strip() == f"gpen-watch {_version()}"
    done = root.run(
        ALONE, "restore", "/inputs/photos", "-o", "/root/alone-out", "--model", "/inputs/models/tiny-gpen-64.pth",
        *RESTORE_ARGS, env={**USER_ENV, "GPEN_WATCH_MODEL_DIR": "/inputs/models"}, timeout=300,
    )  # fmt: skip
    assert re.search(r"done 1 of 1 image: [1-9]\d* faces? restored", done.stdout), done.stdout + done.stderr
    assert root.host_path("/root/alone-out/astronaut.png").is_file()


def _write_config(root: Root) -> tuple[Path, Path]:
    """The user's settings in the root: the tiny models, an inbox and an outbox in the home folder."""
    folder = root.host_path(f"{HOME}/.config/gpen-watch")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.toml").write_text(
        f"""[watch]
inboxes = ["{HOME}/inbox"]
outbox = "{HOME}/outbox"
settle_seconds = 0.2

[restore]
model = "/inputs/models/tiny-gpen-64.pth"
model_dir = "/inputs/models"
detector = "retinaface_mobile0.25"
use_parse = false

[workers]
devices = ["cpu"]

[dashboard]
port = 0
""",
        encoding="utf-8",
    )
    inbox = root.host_path(f"{HOME}/inbox")
    inbox.mkdir(exist_ok=True)
    return inbox, root.host_path(f"{HOME}/outbox")


def _drop(inbox: Path, outbox: Path, inputs: Path) -> None:
    part = inbox / "astronaut.png.part"
    shutil.copy(inputs / "photos" / "astronaut.png", part)
    part.rename(inbox / "astronaut.png")
    wait_for(lambda: (outbox / "astronaut.png").is_file(), "the dropped photo restored", 180)


def _stop(root: Root, proc: subprocess.Popen[bytes], env: dict[str, str]) -> None:
    try:
        root.run("gpen-watch" if env is USER_ENV else ALONE, "stop", env=env, timeout=60)
        assert proc.wait(90) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_the_deb_installs_restores_runs_the_service_and_removes_without_a_trace(
    root: Root, inputs: Path
) -> None:
    t = time.monotonic()
    install = root.run(
        "apt-get", "install", "-y", "--no-install-recommends", "/pkgs/gpen-watch.deb", timeout=900
    )
    sys.stdout.write(f"{root.suite}: apt-get install took {time.monotonic() - t:.0f} s\n")
    assert "gpen-watch is installed" in install.stdout
    listed = root.run("dpkg", "-L", "gpen-watch").stdout.splitlines()
    files = [p for p in listed if root.host_path(p).is_file() or root.host_path(p).is_symlink()]
    assert "/usr/bin/gpen-watch" in files and "/usr/share/applications/gpen-watch.desktop" in files
    _has_no_python(root)

    version = root.run("gpen-watch", "--version", env=USER_ENV)
    assert version.stdout.strip() == f"gpen-watch {_version()}"

    if (inputs / "solvay").is_dir():
        done = root.run(
            "gpen-watch", "restore", "/inputs/solvay", "-o", "/root/solvay-out",
            "--model", "/inputs/models/tiny-gpen-64.pth", *RESTORE_ARGS,
            env={**USER_ENV, "GPEN_WATCH_MODEL_DIR": "/inputs/solvay-models"}, timeout=600,
        )  # fmt: skip
        assert "done 1 of 1 image: 29 faces restored" in done.stdout, done.stdout + done.stderr
        assert root.host_path("/root/solvay-out/Solvay_conference_1927.png").is_file()

    inbox, outbox = _write_config(root)
    proc = subprocess.Popen(root.command("gpen-watch", "run", env=USER_ENV), stdout=subprocess.DEVNULL)
    try:
        _drop(inbox, outbox, inputs)
        # Send to gpen-watch, as Dolphin's service menu (every user's, from the package) runs it
        # with a photo chosen: sent to the service, restored, and written beside the photo.
        sent = root.host_path(f"{HOME}/sent")
        sent.mkdir()
        shutil.copy(inputs / "photos" / "astronaut.png", sent)
        menu = root.host_path("/usr/share/kio/servicemenus/gpen-watch-send-to.desktop").read_text()
        assert "\nExec=gpen-watch-send-to %F\n" in menu
        done = root.run("gpen-watch-send-to", f"{HOME}/sent/astronaut.png", env=USER_ENV, timeout=300)
        assert (sent / "astronaut.restored.png").is_file(), done.stdout + done.stderr
    finally:
        _stop(root, proc, USER_ENV)

    removed = root.run("apt-get", "remove", "-y", "gpen-watch")
    assert "gpen-watch is removed" in removed.stdout, removed.stdout
    left = [p for p in files if os.path.lexists(root.host_path(p))]
    assert left == [], f"left behind in {root.suite}: {left[:10]}"
    assert not root.host_path("/opt/gpen-watch").exists()
    for folder in ("/usr/share/gpen-watch", "/usr/share/kio", "/usr/share/kservices5"):
        assert not root.host_path(folder).exists(), f"{folder} left behind in {root.suite}"
    purged = root.run("apt-get", "purge", "-y", "gpen-watch")
    assert "photos are never deleted" in purged.stdout, purged.stdout
    assert root.host_path(f"{HOME}/outbox/astronaut.png").is_file()  # the user's photos stay


def test_the_bundle_uses_the_xorg_tray_where_the_systems_pygobject_is_for_another_python(
    root: Root,
    inputs: Path,
    tmp_path: Path,
    xserver_with_tray: XServer,  # noqa: F811 - the fixture imported from installed_app
) -> None:
    if root.suite not in ("trixie", "noble"):
        pytest.skip(
            "checked on Debian 13 and Ubuntu 24.04, whose PyGObject is built for Python 3.13 and 3.12"
        )
    # The desktop's PyGObject and GTK, as the release's desktop has them, for its own Python.
    root.run("apt-get", "update", "-qq", timeout=300)
    root.run(
        "apt-get", "install", "-y", "-qq", "--no-install-recommends", "python3-gi", "gir1.2-gtk-3.0",
        "gir1.2-ayatanaappindicator3-0.1", timeout=900,
    )  # fmt: skip
    system_gi = list(root.host_path("/usr/lib/python3/dist-packages/gi").glob("_gi.cpython-*.so"))
    assert system_gi and not any("cpython-311" in p.name for p in system_gi), system_gi
    _write_config(root)
    env = {**USER_ENV, "DISPLAY": xserver_with_tray.name}
    log = root.host_path(f"{HOME}/.local/state/gpen-watch/log/gpen-watch.log")
    proc = subprocess.Popen(root.command(ALONE, "run", env=env), stdout=subprocess.DEVNULL)
    try:
        wait_for_tray_icon(xserver_with_tray)
        wait_for(
            lambda: log.is_file() and "tray icon shown" in log.read_text(errors="replace"),
            "the log's tray line",
            60,
        )
    finally:
        _stop(root, proc, env)
    text = log.read_text(errors="replace")
    assert "tray icon shown (pystray xorg backend" in text, text[-3000:]
    assert "appindicator backend" not in text and "gtk backend" not in text, text[-3000:]
