"""assets/ (the sources) and packaging/ (the recipes) hold together without building anything.

The program's icon (package data) must be the one drawn from assets/icon.svg: packaging/icons.py
writes the SVG's SHA-256 into it. Every file a recipe names must exist, and no recipe may carry a
version of its own: pyproject.toml's is the only one.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, as gpen-watch's config uses it
    import tomli as tomllib

from conftest import REPO
from PIL import Image

PACKAGING = REPO / "packaging"
SOURCE_KEY = "gpen-watch:source-sha256"  # as packaging/icons.py writes it


def test_the_programs_icon_is_drawn_from_the_svg_source() -> None:
    digest = hashlib.sha256((REPO / "assets" / "icon.svg").read_bytes()).hexdigest()
    with Image.open(REPO / "gpen_watch" / "data" / "icon.png") as icon:
        assert icon.size == (256, 256)
        made_from = icon.text.get(SOURCE_KEY)  # type: ignore[attr-defined]
    assert made_from == digest, (
        "gpen_watch/data/icon.png is not drawn from assets/icon.svg as it is now: run "
        "`bash packaging/build.sh icons` or `python packaging/icons.py --package` (with resvg)"
    )


def test_packaging_is_no_python_package_that_would_shadow_the_packaging_library() -> None:
    assert not (PACKAGING / "__init__.py").exists()
    import packaging.version  # the PyPA library pip and setuptools use, not this folder

    assert not Path(packaging.version.__file__).resolve().is_relative_to(PACKAGING)


def test_every_file_the_deb_recipe_installs_exists() -> None:
    script = (PACKAGING / "deb" / "build.sh").read_text(encoding="utf-8")
    named = set(re.findall(r'"\$here/([\w.-]+)"', script))
    # What the .deb and the .rpm share, laid out by common.sh's stage_linux.
    common = (PACKAGING / "common.sh").read_text(encoding="utf-8")
    named |= set(re.findall(r'"\$repo/packaging/deb/([\w.-]+)"', common))
    named |= {"preinst", "postinst", "prerm", "postrm"}
    assert {"gpen-watch.sh", "gpen-watch.desktop", "control.in"} <= named
    for name in named:
        assert (PACKAGING / "deb" / name).is_file(), name
    for name in ("preinst", "postinst", "prerm", "postrm", "gpen-watch.sh"):
        assert (PACKAGING / "deb" / name).stat().st_mode & 0o111, f"{name} is not executable"
    assert (PACKAGING / "deb" / "README.md").is_file()
    assert (PACKAGING / "README.md").is_file()


def test_every_file_the_rpm_recipe_names_exists() -> None:
    script = (PACKAGING / "rpm" / "build.sh").read_text(encoding="utf-8")
    named = set(re.findall(r'"\$here/([\w.-]+)"', script))
    assert "gpen-watch.spec.in" in named
    for name in named:
        assert (PACKAGING / "rpm" / name).is_file(), name
    # Its scriptlets are the .deb's maintainer scripts.
    for name in set(re.findall(r"'[^']*' (\w+)$", script, flags=re.M)) | {"postrm"}:
        assert (PACKAGING / "deb" / name).is_file(), name
    assert (PACKAGING / "rpm" / "README.md").is_file()


def test_every_file_the_bundle_recipe_names_exists() -> None:
    script = (PACKAGING / "bundle" / "build.sh").read_text(encoding="utf-8")
    named = set(re.findall(r'"\$here/([\w.-]+)"', script))
    assert {"gpen-watch.spec", "README-bundle.txt"} <= named
    spec = (PACKAGING / "bundle" / "gpen-watch.spec").read_text(encoding="utf-8")
    named |= set(re.findall(r'os\.path\.join\(here, "([\w.-]+)"\)', spec))
    assert "entry.py" in named
    for name in named:
        assert (PACKAGING / "bundle" / name).is_file(), name
    assert (PACKAGING / "bundle" / "README.md").is_file()
    # Never bundled: the tests' reference networks and what they bring.
    assert '"torchvision"' in spec and '"facexlib"' in spec


def test_the_version_comes_from_pyproject_only() -> None:
    with open(REPO / "pyproject.toml", "rb") as f:
        version = tomllib.load(f)["project"]["version"]
    for path in PACKAGING.rglob("*"):
        if path.is_file() and path.suffix not in (".png", ".ico", ".icns"):
            text = path.read_text(encoding="utf-8")
            assert not re.search(rf"(?<![\d.]){re.escape(version)}(?![\d.])", text), f"{path} names {version}"
    out = subprocess.run(
        ["bash", "-c", f'. "{PACKAGING}/common.sh" && version'], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == version


def test_the_menu_entry_starts_the_service_and_names_the_installed_icon() -> None:
    entry = (PACKAGING / "deb" / "gpen-watch.desktop").read_text(encoding="utf-8")
    assert "\nExec=gpen-watch run --open-if-running\n" in entry
    assert "\nIcon=gpen-watch\n" in entry
    assert "NoDisplay" not in entry  # it is a menu entry, unlike the login entry
    if shutil.which("desktop-file-validate"):
        run = subprocess.run(
            ["desktop-file-validate", str(PACKAGING / "deb" / "gpen-watch.desktop")],
            capture_output=True,
            text=True,
            check=False,
        )
        assert run.returncode == 0, run.stdout + run.stderr


def test_the_windows_and_macos_recipes_name_only_files_that_exist() -> None:
    """Never run here (their READMEs say so): checked for what can be checked on Linux."""
    windows = PACKAGING / "windows"
    for name in ("README.md", "build.ps1", "gpen-watch.nsi"):
        assert (windows / name).is_file(), name
    script = (windows / "build.ps1").read_text(encoding="utf-8")
    # What it reads from the checkout (dist\ and build\ are what it writes).
    named_files = [
        n for n in re.findall(r"\$repo\\([\w\\.-]+)", script) if not n.startswith(("dist", "build"))
    ]
    assert len(named_files) >= 4, named_files
    for named in named_files:
        assert (REPO / named.replace("\\", "/")).exists(), named
    macos = PACKAGING / "macos"
    for name in ("README.md", "build.sh"):
        assert (macos / name).is_file(), name
    assert "../bundle/gpen-watch.spec" in (macos / "build.sh").read_text(encoding="utf-8")
    spec = (PACKAGING / "bundle" / "gpen-watch.spec").read_text(encoding="utf-8")
    assert '"LSUIElement": True' in spec


def test_the_nsis_installer_script_compiles(tmp_path: Path) -> None:
    """makensis (Debian's nsis) compiles the Windows installer around a stand-in for the
    PyInstaller folder, which can only be built on Windows."""
    if shutil.which("makensis") is None:
        import pytest

        pytest.skip("makensis not installed (Debian: nsis; .ci/run installs it)")
    dist = tmp_path / "dist"
    data = dist / "_internal" / "gpen_watch" / "data"
    data.mkdir(parents=True)
    with Image.open(REPO / "gpen_watch" / "data" / "icon.png") as icon:
        icon.save(data / "gpen-watch.ico", sizes=[(16, 16), (32, 32), (48, 48), (256, 256)])
    (dist / "gpen-watch.exe").write_bytes(b"stand-in")
    out = tmp_path / "gpen-watch-setup.exe"
    run = subprocess.run(
        [
            "makensis",
            "-V2",
            "-DVERSION=0.0.0",
            f"-DDIST={dist}",
            f"-DOUTFILE={out}",
            str(PACKAGING / "windows" / "gpen-watch.nsi"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert out.read_bytes()[:2] == b"MZ"  # a Windows program
