"""The Debian package as a user gets it: installed with apt, started from its menu entry, removed.

.ci/run builds it (`bash packaging/build.sh deb`) and names it in $GPEN_WATCH_DEB; the test
installs it on this machine (root and apt-get needed, so it runs in CI and skips elsewhere), then:
`/usr/bin/gpen-watch --version` and a restore with the tiny models; the menu entry's own `Exec=`
line started under Xvfb with trayer as the tray host, whose icon must dock, whose dashboard must
answer on loopback and whose service must restore a dropped photo; the same line again, which must
open the running service's dashboard instead of failing; then `apt-get remove`, after which no file
of the package may be left, and `purge`, which must say what user data it leaves.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, as gpen-watch's config uses it
    import tomli as tomllib

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
from test_tray_xvfb import XServer, wait_for

from gpen_watch.service import control

DEB = os.environ.get("GPEN_WATCH_DEB", "")
DESKTOP = Path("/usr/share/applications/gpen-watch.desktop")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not DEB, reason="no package built: GPEN_WATCH_DEB names one (.ci/run builds it)"),
    pytest.mark.skipif(
        shutil.which("apt-get") is None or os.geteuid() != 0,
        reason="installing a package needs apt-get as root",
    ),
]


def _apt(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(["apt-get", "-y", *args], env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def installed() -> Iterator[list[str]]:
    """The package installed; yields the files it owns (`dpkg -L`, folders left out)."""
    run = _apt("install", str(Path(DEB).resolve()))
    assert run.returncode == 0, run.stdout + run.stderr
    listed = subprocess.run(["dpkg", "-L", "gpen-watch"], capture_output=True, text=True, check=True)
    files = [p for p in listed.stdout.splitlines() if os.path.isfile(p) or os.path.islink(p)]
    yield files
    _apt("purge", "gpen-watch")


def test_the_installed_command_reports_the_projects_version(installed: list[str]) -> None:
    with open(REPO / "pyproject.toml", "rb") as f:
        version = tomllib.load(f)["project"]["version"]
    out = subprocess.run(["/usr/bin/gpen-watch", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"gpen-watch {version}"
    assert "/usr/bin/gpen-watch" in installed
    assert any(p.startswith("/usr/share/icons/hicolor/512x512/") for p in installed)
    assert any(p.endswith("/scalable/apps/gpen-watch.svg") for p in installed)


def test_the_installed_command_restores_a_photo(
    installed: list[str], tiny_models: TinyModels, tmp_path: Path, astronaut_bgr: np.ndarray
) -> None:
    photo = tmp_path / "in" / "astronaut.png"
    photo.parent.mkdir()
    cv2.imwrite(str(photo), astronaut_bgr)
    cmd = ["/usr/bin/gpen-watch", *restore_command(tiny_models, str(photo), "-o", str(tmp_path / "out"))[3:]]
    env = {**os.environ, "GPEN_WATCH_MODEL_DIR": str(tiny_models.model_dir)}
    run = subprocess.run([*cmd, "--no-parse"], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert (tmp_path / "out" / "astronaut.png").is_file()


def _exec_line() -> list[str]:
    for line in DESKTOP.read_text(encoding="utf-8").splitlines():
        if line.startswith("Exec="):
            return shlex.split(line.removeprefix("Exec="))
    raise AssertionError(f"{DESKTOP} has no Exec= line")


def test_the_menu_entry_starts_the_service_with_its_tray_and_dashboard(
    installed: list[str],
    tiny_models: TinyModels,
    tmp_path: Path,
    astronaut_bgr: np.ndarray,
    xserver_with_tray: XServer,  # noqa: F811 - the fixture imported from installed_app
) -> None:
    inbox = write_config(tmp_path, tiny_models)
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\necho "$1" >> {opened}\n', encoding="utf-8")
    browser.chmod(0o755)
    env = {**os.environ, "DISPLAY": xserver_with_tray.name, "BROWSER": str(browser)}
    env.pop("WAYLAND_DISPLAY", None)
    env["PATH"] = "/usr/bin:/bin"  # the package's command, not the checkout's venv
    exec_line = _exec_line()
    assert exec_line[0] == "gpen-watch"
    with open(tmp_path / "menu-stderr.txt", "wb") as err:
        proc = subprocess.Popen(exec_line, env=env, stdout=subprocess.DEVNULL, stderr=err)
    try:
        wait_for_tray_icon(xserver_with_tray)
        status = wait_for(status_with_dashboard, "the service's dashboard", 60)
        url = _dashboard_url()
        assert "gpen-watch" in open_signed_in(url)
        assert status["dashboard"].startswith("http://127.0.0.1:")
        drop_and_wait(inbox, tmp_path / "outbox", astronaut_bgr)
        # The package installed again over the running service: it says so, and the service
        # goes on (its photos and settings untouched).
        again_installed = _apt("install", "--reinstall", str(Path(DEB).resolve()))
        assert again_installed.returncode == 0, again_installed.stdout + again_installed.stderr
        assert "gpen-watch is running" in again_installed.stdout, again_installed.stdout
        assert status_with_dashboard() is not None
        # A second click on the menu entry: the service is running, so its dashboard opens.
        again = subprocess.run(exec_line, env=env, capture_output=True, text=True, timeout=60)
        assert again.returncode == 0, again.stdout + again.stderr
        assert opened.read_text(encoding="utf-8").startswith(status["dashboard"].rstrip("/"))
        control.request("stop")
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    sys.stdout.write((tmp_path / "menu-stderr.txt").read_text(errors="replace"))


def _dashboard_url() -> str:
    out = subprocess.run(
        ["/usr/bin/gpen-watch", "dashboard", "--url"], capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def test_a_damaged_program_folder_is_said_in_a_sentence_that_names_the_fix(installed: list[str]) -> None:
    internal = Path("/opt/gpen-watch/_internal")
    aside = internal.with_name("_internal.aside")
    internal.rename(aside)
    try:
        run = subprocess.run(["/usr/bin/gpen-watch", "status"], capture_output=True, text=True, timeout=60)
    finally:
        aside.rename(internal)
    assert run.returncode == 1
    assert "damaged or missing" in run.stderr
    assert "sudo apt install --reinstall gpen-watch" in run.stderr
    assert "Traceback" not in run.stderr


def test_removing_leaves_no_file_of_the_package_and_purge_says_what_stays(installed: list[str]) -> None:
    run = _apt("remove", "gpen-watch")
    assert run.returncode == 0, run.stdout + run.stderr
    left = [p for p in installed if os.path.lexists(p)]
    assert left == []
    assert not Path("/opt/gpen-watch").exists()
    # What to do about a login entry, without the gpen-watch command that went with the package.
    assert "~/.config/autostart/gpen-watch.desktop" in run.stdout
    assert "gpen-watch service uninstall" not in run.stdout
    purge = _apt("purge", "gpen-watch")
    assert purge.returncode == 0, purge.stdout + purge.stderr
    assert "~/Pictures/GPEN" in purge.stdout, purge.stdout
    assert "never deleted" in purge.stdout
    assert "$XDG_RUNTIME_DIR/gpen-watch" in purge.stdout
