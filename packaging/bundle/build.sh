#!/usr/bin/env bash
# dist/gpen-watch-<version>-linux-x86_64.tar.gz: gpen-watch as one self-contained folder
# (PyInstaller onedir: the Python interpreter, PyTorch's CPU build and every module inside), which
# runs from any folder with no Python installed. README.md beside this file says more.
#
# Built inside a Debian 11 root (packaging/root.sh, as root: mmdebstrap and bubblewrap), with a
# CPython 3.11 built there from Debian's python3.11 source package (python.sh), so that no file of
# the bundle needs a glibc newer than Debian 11's 2.31 (checked at the end: glibc_check.py).
#
# Where PyTorch comes from (the build says which, and stops with the fix if it is the CUDA build):
#   default       TORCH (torch==2.13.0) from PyTorch's CPU index, https://download.pytorch.org/whl/cpu
#   TORCH_INDEX   another index (a mirror of the CPU index)
#   TORCH_WHEEL   a local wheel file, torch-<version>+cpu-cp311-...-linux_x86_64.whl (CI uses one)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common.sh"

torch_spec=${TORCH:-torch==2.13.0}
cpu_index=https://download.pytorch.org/whl/cpu
base=${BUNDLE_BASE:-bullseye}
ver=$(version)
machine=$(uname -m)
out=$repo/dist/gpen-watch-$ver-linux-$machine.tar.gz
work=$repo/build/bundle
root=$work/root
cache=${GPEN_WATCH_BUILD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpen-watch-build}
start=$SECONDS

[ "$(id -u)" = 0 ] || { say "the bundle is built in a Debian 11 root, which needs root: run it with sudo"; exit 1; }
for tool in mmdebstrap bwrap objdump; do
    command -v "$tool" >/dev/null || { say "$tool is missing: apt install mmdebstrap bubblewrap binutils"; exit 1; }
done

binds=(--bind "$cache/pip" /root/.cache/pip)
if [ -n "${TORCH_WHEEL:-}" ]; then
    [ -f "$TORCH_WHEEL" ] || { say "TORCH_WHEEL names $TORCH_WHEEL, which is not a file"; exit 1; }
    torch_name=$(basename "$TORCH_WHEEL")
    binds+=(--ro-bind "$(realpath "$TORCH_WHEEL")" "/build/torch/$torch_name")
    torch_args=("/build/torch/$torch_name")
    torch_from="the local wheel $TORCH_WHEEL"
else
    index=${TORCH_INDEX:-$cpu_index}
    torch_args=(--index-url "$index" "$torch_spec")
    torch_from=$index
fi

rm -rf "$work"
mkdir -p "$work" "$repo/dist" "$cache/pip"
say "bundle $ver for linux-$machine, built in Debian's $base; PyTorch: ${TORCH_WHEEL:-$torch_spec} from $torch_from"
wheel=$(make_wheel "$work/wheel")

say "the build root ($base, with a C compiler and the libraries CPython builds against)"
t=$SECONDS
bash "$repo/packaging/root.sh" "$base" "$root" build-essential pkg-config patch xz-utils ca-certificates \
    libssl-dev zlib1g-dev libbz2-dev liblzma-dev libffi-dev libsqlite3-dev uuid-dev >/dev/null
in_root() { bash "$repo/packaging/in-root.sh" "$root" "${binds[@]}" -- "$@"; }

# CPython, built once and kept (a month: then Debian's latest security fixes are taken in).
python_tar=$cache/python3.11-$base-$(dpkg --print-architecture).tar
if [ -z "$(find "$python_tar" -mtime -30 2>/dev/null)" ]; then
    say "CPython 3.11 from Debian's python3.11 source package, built in the root (minutes; kept in $cache)"
    mkdir -p "$root/build/out"
    cp "$here/python.sh" "$root/build/python.sh"
    in_root bash /build/python.sh /build/out/python.tar >/dev/null
    mv "$root/build/out/python.tar" "$python_tar"
fi
tar -C "$root" -xf "$python_tar"
say "  Python $(cat "$root/opt/python3.11/DEBIAN-SOURCE-VERSION") (Debian's source) ready in $((SECONDS - t)) s"

say "the build venv: PyTorch, the wheel, PyInstaller"
t=$SECONDS
mkdir -p "$root/build/in"
cp "$wheel" "$here/gpen-watch.spec" "$here/entry.py" "$repo/packaging/torch_check.py" "$root/build/in/"
in_root /opt/python3.11/bin/python3.11 -m venv /build/venv
in_root /build/venv/bin/python -m pip install -qq --no-compile --only-binary :all: "${torch_args[@]}" || {
    say "pip could not install PyTorch from $torch_from (above). Where that cannot be reached, set"
    say "TORCH_INDEX to a mirror of PyTorch's CPU index, or TORCH_WHEEL to a local wheel file"
    say "(torch-<version>+cpu-cp311-cp311-manylinux_2_28_x86_64.whl: the bundle's Python is 3.11)."
    exit 1
}
in_root /build/venv/bin/python /build/in/torch_check.py --source "$torch_from"
in_root /build/venv/bin/python -m pip install -qq --no-compile "/build/in/$(basename "$wheel")" 'pyinstaller>=6.10'
# The wheel's own requirements must not have brought a CUDA build in beside it.
in_root /build/venv/bin/python /build/in/torch_check.py --source "$torch_from" >/dev/null
say "  installed in $((SECONDS - t)) s"

say "PyInstaller (onedir)"
t=$SECONDS
in_root bash -c 'cd /build && venv/bin/pyinstaller --noconfirm --log-level ERROR --distpath /build/dist \
    --workpath /build/pyinstaller /build/in/gpen-watch.spec' >"$work/pyinstaller.log" 2>&1 \
    || { tail -40 "$work/pyinstaller.log"; exit 1; }
say "  frozen in $((SECONDS - t)) s"
folder=$root/build/dist/gpen-watch
if find "$folder" -maxdepth 3 -iname 'torchvision*' | grep -q .; then
    say "torchvision was bundled: gpen-watch needs none"
    exit 1
fi
install -m 0644 "$here/README-bundle.txt" "$folder/README.txt"
install -m 0644 "$repo/LICENSE" "$folder/LICENSE"
# It starts where it was built, with no Python on the PATH.
bash "$repo/packaging/in-root.sh" "$root" -- env PATH=/usr/bin:/bin /build/dist/gpen-watch/gpen-watch --version >/dev/null
python3 "$repo/packaging/glibc_check.py" "$folder"

say "tar.gz: $out"
t=$SECONDS
tar -C "$root/build/dist" --owner=0 --group=0 -cf - gpen-watch | gzip -1 >"$out"
say "  packed in $((SECONDS - t)) s"
say "ok in $((SECONDS - start)) s: $(du -m "$out" | cut -f1) MB, $(du -sm "$folder" | cut -f1) MB unpacked"
