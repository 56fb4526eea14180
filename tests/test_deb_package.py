"""The Debian package as a user gets it: installed with apt, started from its menu entry, removed.

.ci/run builds it (`bash packaging/build.sh deb`) and names it in $GPEN_WATCH_DEB; the test
installs it on this machine (root and apt-get needed, so it runs in CI and skips elsewhere), then:
`/usr/bin/gpen-watch --version` and a restore with the tiny models; the menu entry's own `Exec=`
line started under Xvfb with trayer as the tray host, whose icon must dock, whose dashboard must
answer on loopback and whose service must restore a dropped photo; the same line again, which must
open the running service's dashboard instead of failing; "Send to gpen-watch" (Dolphin's service
menu for every user, run as KIO runs it, and a user's Nautilus script added by
`gpen-watch-send-to --install-user`, run as Nautilus runs it) sending photos through the package's
`gpen-watch submit` to a running service; then `apt-get remove`, after which no file of the package
may be left, and `purge`, which must say what user data it leaves.
"""

from __future__ import annotations

import os
import re
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
from dashboard_client import served_dashboard
from installed_app import (
    drop_and_wait,
    open_signed_in,
    status_with_dashboard,
    wait_for_tray_icon,
    write_config,
    xserver,  # noqa: F401 - the fixture xserver_with_tray asks for
    xserver_with_tray,  # noqa: F401 - a fixture
)
from test_send_to import assert_restored_beside, photos
from test_tray_xvfb import XServer, wait_for

from gpen_watch.service import control

DEB = os.environ.get("GPEN_WATCH_DEB", "")
DESKTOP = Path("/usr/share/applications/gpen-watch.desktop")
SEND_TO = Path("/usr/share/gpen-watch/send-to")
SERVICE_MENUS = (
    Path("/usr/share/kio/servicemenus/gpen-watch-send-to.desktop"),  # KDE 6
    Path("/usr/share/kservices5/ServiceMenus/gpen-watch-send-to.desktop"),  # KDE 5
)

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


@pytest.fixture
def desktop(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A running service (the stand-in restorer) and the environment a file manager's child gets:
    the user's folders, the system's PATH (the package's commands, not the checkout's) and a
    notify-send that writes each notice to a file."""
    (tmp_path / "service").mkdir()
    with served_dashboard(tmp_path / "service") as dash:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        notify = bin_dir / "notify-send"
        notify.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >>"{tmp_path / "notices.txt"}"\n')
        notify.chmod(0o755)
        home = tmp_path / "home"
        home.mkdir()
        env = dict(dash.svc.env)
        env.update(
            PATH=f"{bin_dir}:/usr/bin:/bin",
            HOME=str(home),
            XDG_DATA_HOME=str(home / ".local" / "share"),
            XDG_CONFIG_HOME=str(home / ".config"),
        )
        env.pop("GPEN_WATCH", None)
        yield env


def test_send_to_is_installed_for_every_user_and_sends_photos_through_the_package(
    installed: list[str], tmp_path: Path, desktop: dict[str, str]
) -> None:
    for path in ("/usr/bin/gpen-watch-send-to", *map(str, SERVICE_MENUS)):
        assert path in installed, path
    for name in ("gpen-watch-send-to", "install.sh", "gpen-watch-send-to.desktop", "thunar-action.xml"):
        assert str(SEND_TO / name) in installed, name
    assert shutil.which("gpen-watch-send-to", path=desktop["PATH"]) == "/usr/bin/gpen-watch-send-to"
    # Dolphin's menu, every user's: KIO puts the selected paths where %F is, one argument each.
    for menu in SERVICE_MENUS:
        exec_line = re.search(r"^Exec=(.*)$", menu.read_text(encoding="utf-8"), re.M)
        assert exec_line is not None and exec_line[1] == "gpen-watch-send-to %F"
    chosen = photos(tmp_path / "shoot", "a.jpg", "b.png")
    argv = [
        a
        for part in shlex.split("gpen-watch-send-to %F")
        for a in (map(str, chosen) if part == "%F" else [part])
    ]
    run = subprocess.run(argv, env=desktop, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert_restored_beside(chosen)
    assert "gpen-watch: restored restored 2 of 2 photos" in (tmp_path / "notices.txt").read_text()

    # Nautilus's script and Thunar's action are each user's: added by the user, no root needed.
    added = subprocess.run(
        ["gpen-watch-send-to", "--install-user"], env=desktop, capture_output=True, text=True, timeout=30
    )
    assert added.returncode == 0, added.stderr
    data, config = Path(desktop["XDG_DATA_HOME"]), Path(desktop["XDG_CONFIG_HOME"])
    script = data / "nautilus" / "scripts" / "Send to gpen-watch"
    assert os.access(script, os.X_OK)
    assert "gpen-watch-send-to</unique-id>" in (config / "Thunar" / "uca.xml").read_text()
    assert not (data / "kio").exists(), "Dolphin's menu is every user's already: no copy of a user's own"
    # Nautilus runs a script in the folder shown, the selected names as its arguments.
    folder = tmp_path / "Holiday 2026"
    picked = photos(folder, "beach.jpg")
    env = {**desktop, "NAUTILUS_SCRIPT_SELECTED_FILE_PATHS": f"{picked[0]}\n"}
    run = subprocess.run(
        [str(script), picked[0].name], cwd=folder, env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert_restored_beside(picked)
    removed = subprocess.run(
        ["gpen-watch-send-to", "--uninstall-user"], env=desktop, capture_output=True, text=True, timeout=30
    )
    assert removed.returncode == 0, removed.stderr
    assert not os.path.lexists(script)
    assert "gpen-watch" not in (config / "Thunar" / "uca.xml").read_text()


def test_removing_leaves_no_file_of_the_package_and_purge_says_what_stays(installed: list[str]) -> None:
    run = _apt("remove", "gpen-watch")
    assert run.returncode == 0, run.stdout + run.stderr
    left = [p for p in installed if os.path.lexists(p)]
    assert left == []
    assert not Path("/opt/gpen-watch").exists()
    assert not SEND_TO.parent.exists()
    # A user's own Send to entries are theirs to remove: said, with where they are.
    assert "~/.local/share/nautilus/scripts" in run.stdout
    # What to do about a login entry, without the gpen-watch command that went with the package.
    assert "~/.config/autostart/gpen-watch.desktop" in run.stdout
    assert "gpen-watch service uninstall" not in run.stdout
    purge = _apt("purge", "gpen-watch")
    assert purge.returncode == 0, purge.stdout + purge.stderr
    assert "~/Pictures/GPEN" in purge.stdout, purge.stdout
    assert "never deleted" in purge.stdout
    assert "$XDG_RUNTIME_DIR/gpen-watch" in purge.stdout
    assert "~/.local/share/gpen-watch/send-to" in purge.stdout
