#!/usr/bin/env bash
# gpen-watch.app in a disk image, on macOS (README.md beside this file). Never run by this
# project's CI, which runs on Linux.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common.sh"
[ "$(uname -s)" = Darwin ] || { say "the macOS app is built on macOS"; exit 1; }

ver=$(version)
arch=$(uname -m)
work=$repo/build/macos
out=$repo/dist/gpen-watch-$ver-macos-$arch.dmg
rm -rf "$work"
mkdir -p "$work" "$repo/dist"
wheel=$(make_wheel "$work/wheel")
make_icons "$work/icons"
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -qq torch "$wheel" 'pyinstaller>=6.10'
(cd "$work" && GPEN_WATCH_VERSION=$ver GPEN_WATCH_ICON="$work/icons/gpen-watch.icns" \
    "$work/venv/bin/pyinstaller" --noconfirm --distpath "$work/dist" --workpath "$work/pyinstaller" \
    "$here/../bundle/gpen-watch.spec")
hdiutil create -volname "gpen-watch $ver" -srcfolder "$work/dist/gpen-watch.app" -ov -format UDZO "$out"
say "ok: $out"
