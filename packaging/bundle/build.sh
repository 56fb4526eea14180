#!/usr/bin/env bash
# dist/gpen-watch-<version>-linux-x86_64.tar.gz: gpen-watch as one self-contained folder
# (PyInstaller onedir: the Python interpreter, PyTorch's CPU build and every module inside), which
# runs from any folder with no Python installed. README.md beside this file says more.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common.sh"

python=${BUNDLE_PYTHON:-python3}
torch_spec=${TORCH:-torch==2.13.0}
ver=$(version)
machine=$(uname -m)
out=$repo/dist/gpen-watch-$ver-linux-$machine.tar.gz
work=$repo/build/bundle
start=$SECONDS

rm -rf "$work"
mkdir -p "$work" "$repo/dist"
say "bundle $ver for linux-$machine: the wheel"
wheel=$(make_wheel "$work/wheel")
say "the build venv: $torch_spec, the wheel, PyInstaller"
"$python" -m venv "$work/venv"
index=()
[ -n "${TORCH_INDEX:-}" ] && index=(--index-url "$TORCH_INDEX")
"$work/venv/bin/python" -m pip install -qq "${index[@]}" "$torch_spec"
"$work/venv/bin/python" -m pip install -qq "$wheel" 'pyinstaller>=6.10'

say "PyInstaller (onedir)"
t=$SECONDS
(cd "$work" && "$work/venv/bin/pyinstaller" --noconfirm --log-level ERROR --distpath "$work/dist" \
    --workpath "$work/pyinstaller" "$here/gpen-watch.spec") >"$work/pyinstaller.log" 2>&1 \
    || { tail -40 "$work/pyinstaller.log"; exit 1; }
say "  frozen in $((SECONDS - t)) s"
folder=$work/dist/gpen-watch
if find "$folder" -maxdepth 3 -iname 'torchvision*' | grep -q .; then
    say "torchvision was bundled: gpen-watch needs none"
    exit 1
fi
install -m 0644 "$here/README-bundle.txt" "$folder/README.txt"
install -m 0644 "$repo/LICENSE" "$folder/LICENSE"
"$folder/gpen-watch" --version >/dev/null

say "tar.gz: $out"
t=$SECONDS
tar -C "$work/dist" -cf - gpen-watch | gzip -1 >"$out"
say "  packed in $((SECONDS - t)) s"
say "ok in $((SECONDS - start)) s: $(du -m "$out" | cut -f1) MB, $(du -sm "$folder" | cut -f1) MB unpacked"
