#!/usr/bin/env bash
# dist/gpen-watch_<version>_amd64.deb: gpen-watch in a private venv at /opt/gpen-watch/venv, made
# with this system's /usr/bin/python3 (so the package is for this distribution release), on
# PyTorch's CPU build; /usr/bin/gpen-watch, a menu entry and the hicolor icons. README.md beside
# this file says what it gives and why it is built this way rather than with dh-virtualenv.
#
# TORCH (default torch==2.13.0) is what pip installs first, with TORCH_INDEX as --index-url when
# set (https://download.pytorch.org/whl/cpu where PyPI's torch would be the CUDA build).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common.sh"

name=gpen-watch
final=/opt/gpen-watch/venv
python=${DEB_PYTHON:-/usr/bin/python3}
torch_spec=${TORCH:-torch==2.13.0}
ver=$(version)
arch=$(dpkg --print-architecture)
out=$repo/dist/${name}_${ver}_${arch}.deb
work=$repo/build/deb
stage=$work/root
venv=$stage$final
start=$SECONDS

command -v dpkg-deb >/dev/null || { say "dpkg-deb is missing: apt install dpkg-dev"; exit 1; }
"$python" -c 'import ensurepip, venv' 2>/dev/null \
    || { say "$python has no venv module: apt install python3-venv"; exit 1; }
py_minor=$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')

rm -rf "$work"
mkdir -p "$stage" "$repo/dist"
say "deb $ver for $arch: the wheel and the icons"
wheel=$(make_wheel "$work/wheel")
make_icons "$work/icons"

say "the venv at $final (built under $stage), Python $py_minor, $torch_spec"
t=$SECONDS
"$python" -m venv "$venv"
index=()
[ -n "${TORCH_INDEX:-}" ] && index=(--index-url "$TORCH_INDEX")
"$venv/bin/python" -m pip install -qq --no-compile "${index[@]}" "$torch_spec"
"$venv/bin/python" -m pip install -qq --no-compile "$wheel"
if "$venv/bin/python" -m pip list 2>/dev/null | grep -iE '^(torchvision|nvidia-|cuda-|triton) '; then
    say "the venv holds the packages above: gpen-watch needs none of them"
    exit 1
fi
say "  installed in $((SECONDS - t)) s"

# A venv is made for one path: its scripts' #! lines and pyvenv.cfg name the folder it was made
# in. It was made at its final path under $stage, so removing that prefix gives the installed one.
grep -rlIZ --exclude-dir=__pycache__ -- "$stage" "$venv" | xargs -0 -r sed -i "s#$stage##g"
if grep -rlI --exclude-dir=__pycache__ -- "$stage" "$venv" | head -3 | grep .; then
    say "files above still name the build folder"
    exit 1
fi
# Byte-compiled here, with the installed paths in the code objects: a user cannot write there,
# and every start would otherwise compile torch's modules again.
t=$SECONDS
# A few of torch's own test helpers are written for a newer Python and do not compile: they are
# never imported. gpen-watch's own modules must all compile.
"$venv/bin/python" -m compileall -q -j 0 -s "$stage" -p / "$venv/lib" >"$work/compileall.log" 2>&1 || true
"$venv/bin/python" -m compileall -q -s "$stage" -p / "$venv/lib/python$py_minor/site-packages/gpen_watch" \
    || { say "gpen-watch's modules do not compile"; exit 1; }
say "  byte-compiled in $((SECONDS - t)) s"

# The command, the menu entry, the icons, the licence.
install -D -m 0755 "$here/gpen-watch.sh" "$stage/usr/bin/gpen-watch"
install -D -m 0644 "$here/gpen-watch.desktop" "$stage/usr/share/applications/gpen-watch.desktop"
(cd "$work/icons" && find hicolor -type f) | while read -r f; do
    install -D -m 0644 "$work/icons/$f" "$stage/usr/share/icons/$f"
done
install -D -m 0644 "$repo/LICENSE" "$stage/usr/share/doc/$name/copyright"

mkdir -p "$stage/DEBIAN"
size_kib=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
sed -e "s/@VERSION@/$ver/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size_kib/" \
    -e "s/@PYTHON@/python$py_minor/" "$here/control.in" >"$stage/DEBIAN/control"
for script in preinst postinst prerm postrm; do
    install -m 0755 "$here/$script" "$stage/DEBIAN/$script"
done
(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | xargs -0 md5sum) >"$stage/DEBIAN/md5sums"

say "dpkg-deb (zstd): $out"
t=$SECONDS
rm -f "$out"
dpkg-deb --root-owner-group -Zzstd -z9 --build "$stage" "$out" >/dev/null
say "  packed in $((SECONDS - t)) s"
say "ok in $((SECONDS - start)) s: $(du -m "$out" | cut -f1) MB, $((size_kib / 1024)) MB installed"
