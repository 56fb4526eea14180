"""Render gpen-watch's icon set from its one source, assets/icon.svg.

    python packaging/icons.py OUT        # OUT/hicolor/<N>x<N>/apps/gpen-watch.png, scalable/,
                                         # OUT/gpen-watch.ico, OUT/gpen-watch.icns, OUT/gpen-watch-<N>.png
    python packaging/icons.py --package  # gpen_watch/data/icon.png, what the running program reads

Needs ``resvg`` (PyPI's resvg-cli: a prebuilt renderer, so every machine draws the same pixels)
and Pillow; packaging/build.sh puts both into a tools venv of its own. The package's icon.png
carries the SVG's SHA-256 in a PNG text chunk, so tests/test_assets.py can tell when the two are
out of step without rendering anything.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image, PngImagePlugin

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "assets" / "icon.svg"
PACKAGE_ICON = REPO / "gpen_watch" / "data" / "icon.png"
NAME = "gpen-watch"
# The sizes the freedesktop hicolor theme has folders for, 16 px (menus) to 512 px (software centres).
HICOLOR = (16, 22, 24, 32, 48, 64, 128, 256, 512)
ICO = (16, 24, 32, 48, 64, 128, 256)
ICNS = (16, 32, 64, 128, 256, 512, 1024)
PACKAGE_SIZE = 256
# The PNG text chunk that names the SVG an icon.png was made from.
SOURCE_KEY = "gpen-watch:source-sha256"


def source_digest(svg: Path = SOURCE) -> str:
    return hashlib.sha256(svg.read_bytes()).hexdigest()


def render(size: int, out: Path, svg: Path = SOURCE) -> Path:
    """``svg`` drawn at ``size`` x ``size`` into ``out`` (a PNG)."""
    resvg = shutil.which("resvg") or str(Path(sys.executable).with_name("resvg"))
    subprocess.run([resvg, "-w", str(size), "-h", str(size), str(svg), str(out)], check=True)
    return out


def package_icon(out: Path = PACKAGE_ICON) -> Path:
    """The program's icon.png, with the source's digest in it."""
    with tempfile.TemporaryDirectory() as tmp:
        drawn = render(PACKAGE_SIZE, Path(tmp) / "icon.png")
        with Image.open(drawn) as im:
            info = PngImagePlugin.PngInfo()
            info.add_text(SOURCE_KEY, source_digest())
            im.convert("RGBA").save(out, pnginfo=info, optimize=True)
    return out


def icon_set(out: Path) -> list[Path]:
    """Every size and format the packages install, under ``out``."""
    made: list[Path] = []
    sizes: dict[int, Path] = {}
    for size in sorted(set(HICOLOR) | set(ICO) | set(ICNS)):
        png = render(size, out / f"{NAME}-{size}.png")
        sizes[size] = png
        made.append(png)
    for size in HICOLOR:
        folder = out / "hicolor" / f"{size}x{size}" / "apps"
        folder.mkdir(parents=True, exist_ok=True)
        made.append(Path(shutil.copyfile(sizes[size], folder / f"{NAME}.png")))
    scalable = out / "hicolor" / "scalable" / "apps"
    scalable.mkdir(parents=True, exist_ok=True)
    made.append(Path(shutil.copyfile(SOURCE, scalable / f"{NAME}.svg")))
    with Image.open(sizes[max(ICO)]) as big:
        big.save(out / f"{NAME}.ico", sizes=[(s, s) for s in ICO])
    made.append(out / f"{NAME}.ico")
    with Image.open(sizes[max(ICNS)]) as big:
        big.save(out / f"{NAME}.icns")
    made.append(out / f"{NAME}.icns")
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, help="folder for the icon set")
    parser.add_argument("--package", action="store_true", help="write gpen_watch/data/icon.png")
    args = parser.parse_args(argv)
    if not args.package and args.out is None:
        parser.error("give a folder for the icon set, or --package")
    if args.package:
        print(f"icons: {package_icon()}")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        made = icon_set(args.out)
        print(f"icons: {len(made)} files in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
