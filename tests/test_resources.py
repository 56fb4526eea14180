"""gpen-watch's data files (tray icon, login templates) are package data found through
importlib.resources, wherever the package itself is: a folder, or a zip with no file names at all."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from importlib.resources import files
from pathlib import Path

from PIL import Image

import gpen_watch
from gpen_watch.platform import linux_login, resources
from gpen_watch.platform.login_common import NODE, SERVICE, LoginOptions, render
from gpen_watch.tray import icon

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

PACKAGE = Path(gpen_watch.__file__).parent
REPO = PACKAGE.parent


def test_the_icon_is_read_from_the_package_through_importlib_resources() -> None:
    node = files("gpen_watch").joinpath("data").joinpath("icon.png")
    assert node.is_file()
    assert resources.find(*resources.ICON) == node
    with node.open("rb") as fp, Image.open(fp) as im:
        assert im.size == (256, 256)
        expected = im.convert("RGBA").resize((icon.SIZE, icon.SIZE), Image.Resampling.LANCZOS)
    # The tray draws the shipped face, not the plain stand-in it falls back to when the file is missing.
    assert icon.load_base().tobytes() == expected.tobytes()


def test_every_login_template_is_there() -> None:
    for entry in (SERVICE, NODE):
        for name in (
            f"linux/{entry.name}.desktop",
            f"linux/{entry.name}.service",
            f"macos/{entry.name}.plist",
        ):
            assert resources.find("login", *name.split("/")) is not None, name
    assert "Exec=/x" in render("linux/gpen-watch.desktop", exec="/x", icon="i")


def test_a_missing_data_file_is_named_with_where_it_was_looked_for() -> None:
    try:
        resources.require("login", "linux", "nothing.service")
    except FileNotFoundError as exc:
        assert "login/linux/nothing.service not found in " in str(exc)
        assert str(PACKAGE / "data") in str(exc)
    else:
        raise AssertionError("no error for a missing data file")


def test_the_desktop_entry_names_the_icon_file_inside_the_package() -> None:
    text = linux_login.desktop_entry(LoginOptions(python="/usr/bin/python3"))
    assert f"Icon={PACKAGE / 'data' / 'icon.png'}\n" in text


def test_every_data_file_is_package_data_in_the_wheel() -> None:
    # What pyproject's package-data globs take into the wheel must be every file under data/: a
    # new template left out would be missing only for users who install the package.
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["gpen_watch"]
    shipped = {p for pattern in patterns for p in PACKAGE.glob(pattern) if p.is_file()}
    data = {p for p in (PACKAGE / "data").rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert data
    assert data <= shipped
    assert "data-files" not in config["tool"]["setuptools"]  # nothing under <prefix>/share any more


PROBE = """
import hashlib, json, sys
import gpen_watch
from gpen_watch.platform import linux_login, resources
from gpen_watch.platform.login_common import LoginOptions
from gpen_watch.tray import icon
print(json.dumps({
    "file": gpen_watch.__file__,
    "icon": hashlib.sha256(icon.load_base().tobytes()).hexdigest(),
    "path_on_disk": resources.path_on_disk(*resources.ICON) is not None,
    "desktop": linux_login.desktop_entry(LoginOptions(python="/usr/bin/python3")),
}))
"""


def test_a_package_in_a_zip_finds_its_icon_and_templates(tmp_path: Path) -> None:
    # A zip has no checkout beside it and no <prefix>/share: only importlib.resources reaches
    # files inside it. The copy under zip/ is imported, not this checkout (asserted below).
    archive = tmp_path / "gpen_watch.zip"
    tree = tmp_path / "copy"
    shutil.copytree(PACKAGE, tree / "gpen_watch", ignore=shutil.ignore_patterns("__pycache__"))
    with zipfile.ZipFile(archive, "w") as z:
        for p in sorted(tree.rglob("*")):
            z.write(p, p.relative_to(tree).as_posix())
    shutil.rmtree(tree)
    proc = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(archive), "HOME": str(tmp_path)},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["file"].startswith(str(archive) + "/"), got["file"]
    assert got["icon"] == hashlib.sha256(icon.load_base().tobytes()).hexdigest()
    # No file name outlives the zip: the desktop entry falls back to a themed icon name.
    assert not got["path_on_disk"]
    assert "Icon=applications-graphics\n" in got["desktop"]
    assert "Exec=/usr/bin/python3 -m gpen_watch run\n" in got["desktop"]
