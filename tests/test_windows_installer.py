"""The Windows installer (packaging/windows/gpen-watch.nsi) run under Wine, silently, as a user would.

The Windows program itself (PyInstaller on Windows) cannot be built here: a stand-in takes its place,
compiled by makensis too (tests/wine_standin.nsi). It records each call (the installer's `stop`,
`service install` and `service uninstall`) and does what gpen-watch's `service install` and
`service uninstall` do to the registry (the Run value; gpen_watch/platform/windows_login.py). The
real gpen-watch.exe is never run here.

Checked: the files installed per user under %LOCALAPPDATA%\\Programs\\gpen-watch, the Start-menu
entry and its target, Explorer's "Send to > gpen-watch" shortcut and the send-to.cmd it runs (run
with Wine's cmd as Explorer would, with a photo: it hands the photo to `gpen-watch submit`), the
uninstaller's registration, no start at login unless chosen (/LOGIN), the login entry when chosen,
and the uninstaller removing every file it installed, its Start-menu and Send to entries, its
registration and the login entry while the user's photos and settings stay. Explorer itself never
runs here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import REPO
from PIL import Image

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("wine") is None, reason="Wine not installed (Debian: wine, wine64)"),
    pytest.mark.skipif(shutil.which("makensis") is None, reason="makensis not installed (Debian: nsis)"),
]

NSI = REPO / "packaging" / "windows" / "gpen-watch.nsi"
STANDIN = Path(__file__).with_name("wine_standin.nsi")
RUN_KEY = r"Software\\Microsoft\\Windows\\CurrentVersion\\Run"
UNINSTALL_KEY = r"Software\\Microsoft\\Windows\\CurrentVersion\\Uninstall\\gpen-watch"


def makensis(*args: str) -> None:
    done = subprocess.run(["makensis", "-V2", *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def the_folder_pyinstaller_would_make(dist: Path, tmp_path: Path) -> None:
    """A folder shaped like packaging/bundle/gpen-watch.spec's on Windows, around the stand-in."""
    makensis(f"-DOUTFILE={dist / 'gpen-watch.exe'}", str(STANDIN))
    data = dist / "_internal" / "gpen_watch" / "data"
    data.mkdir(parents=True)
    with Image.open(REPO / "gpen_watch" / "data" / "icon.png") as icon:
        icon.save(data / "gpen-watch.ico", sizes=[(16, 16), (32, 32), (48, 48), (256, 256)])
    (dist / "_internal" / "torch" / "lib").mkdir(parents=True)
    (dist / "_internal" / "torch" / "lib" / "torch_cpu.dll").write_bytes(b"stand-in")
    (dist / "_internal" / "base_library.zip").write_bytes(b"stand-in")
    shutil.copy(REPO / "packaging" / "bundle" / "README-bundle.txt", dist / "README.txt")
    shutil.copy(REPO / "LICENSE", dist / "LICENSE")


class Wine:
    def __init__(self, prefix: Path) -> None:
        self.prefix = prefix
        self.env = {
            **{k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")},
            "WINEPREFIX": str(prefix),
            "WINEDEBUG": "-all",
            # No Mono or Gecko: their install prompts would wait for a click.
            "WINEDLLOVERRIDES": "mscoree,mshtml=",
        }

    def run(self, *args: str) -> None:
        done = subprocess.run(["wine", *args], env=self.env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        # The installers hand work to copies of themselves: wait until every Wine process is done
        # and the registry is written back to the prefix's files.
        subprocess.run(["wineserver", "-w"], env=self.env, timeout=300, check=True)

    @property
    def user(self) -> Path:
        return next(p for p in (self.prefix / "drive_c" / "users").iterdir() if p.name != "Public")

    def registry_values(self, key: str) -> dict[str, str] | None:
        """The values under HKCU\\key as user.reg holds them (None: no such key)."""
        text = (self.prefix / "user.reg").read_text(encoding="utf-8", errors="replace")
        match = re.search(rf"^\[{re.escape(key)}\][^\n]*\n(.*?)(?:\n\n|\Z)", text, flags=re.M | re.S | re.I)
        if match is None:
            return None
        return dict(re.findall(r'^"([^"]+)"="(.*)"$', match.group(1), flags=re.M))


def link_text(link: Path) -> str:
    """A shortcut's strings (its target and arguments), however the .lnk encodes them."""
    data = link.read_bytes()
    return data.decode("utf-16-le", errors="ignore") + data.decode("latin-1")


def windows_path(wine: Wine, path: Path) -> str:
    """A file under the prefix's C: drive as Windows names it."""
    return "C:\\" + str(path.relative_to(wine.prefix / "drive_c")).replace("/", "\\")


def test_the_installer_installs_per_user_and_the_uninstaller_leaves_only_the_users_files(
    tmp_path: Path,
) -> None:
    dist = tmp_path / "dist"
    dist.mkdir()
    the_folder_pyinstaller_would_make(dist, tmp_path)
    setup = tmp_path / "gpen-watch-setup.exe"
    makensis("-DVERSION=0.0.0", f"-DDIST={dist}", f"-DOUTFILE={setup}", str(NSI))

    wine = Wine(tmp_path / "prefix")
    wine.run("wineboot", "--init")
    user = wine.user
    installed = user / "AppData" / "Local" / "Programs" / "gpen-watch"
    menu = user / "AppData" / "Roaming" / "Microsoft" / "Windows" / "Start Menu" / "Programs" / "gpen-watch"
    send_to = user / "AppData" / "Roaming" / "Microsoft" / "Windows" / "SendTo" / "gpen-watch.lnk"
    calls = user / "standin-calls.log"

    def said() -> list[str]:
        return calls.read_text(encoding="utf-8").splitlines() if calls.exists() else []

    # The user's own files, beside the program's: photos and settings.
    photo = user / "Pictures" / "GPEN" / "outbox" / "family.jpg"
    settings = user / "AppData" / "Local" / "gpen-watch" / "config.toml"
    for mine in (photo, settings):
        mine.parent.mkdir(parents=True)
        mine.write_bytes(b"the user's")

    # Silent, as offered: start at login is not ticked.
    wine.run(str(setup), "/S")
    shipped = sorted(p.relative_to(dist) for p in dist.rglob("*") if p.is_file())
    got = sorted(p.relative_to(installed) for p in installed.rglob("*") if p.is_file())
    assert got == sorted([*shipped, Path("send-to.cmd"), Path("uninstall.exe")])
    link = menu / "gpen-watch.lnk"
    assert link.is_file()
    target = link_text(link)
    assert "gpen-watch.exe" in target and "run --open-if-running" in target
    # Explorer's Send to: a shortcut in the user's SendTo folder to send-to.cmd, which Explorer runs
    # with the files chosen; run here by Wine's cmd with one photo.
    assert send_to.is_file()
    assert "send-to.cmd" in link_text(send_to)
    wine.run("cmd", "/c", windows_path(wine, installed / "send-to.cmd"), windows_path(wine, photo))
    assert said()[-1] == f"submit {windows_path(wine, photo)}", said()
    registered = wine.registry_values(UNINSTALL_KEY)
    assert registered is not None and registered["DisplayVersion"] == "0.0.0"
    assert "uninstall.exe" in registered["UninstallString"]
    assert "gpen-watch" not in (wine.registry_values(RUN_KEY) or {})
    assert "service install" not in said()

    # Again over it, with start at login chosen: gpen-watch's own `service install` sets it.
    wine.run(str(setup), "/S", "/LOGIN")
    assert said()[-2:] == ["stop", "service install"], said()
    run_value = (wine.registry_values(RUN_KEY) or {}).get("gpen-watch", "")
    assert "gpen-watch.exe" in run_value and run_value.endswith(" run"), run_value

    wine.run(str(installed / "uninstall.exe"), "/S")
    assert said()[-2:] == ["stop", "service uninstall"], said()
    assert not installed.exists(), sorted(installed.rglob("*"))
    assert not menu.exists()
    assert not send_to.exists()
    assert wine.registry_values(UNINSTALL_KEY) is None
    assert "gpen-watch" not in (wine.registry_values(RUN_KEY) or {})
    assert photo.read_bytes() == b"the user's" and settings.read_bytes() == b"the user's"
