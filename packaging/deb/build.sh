#!/usr/bin/env bash
# dist/gpen-watch_<version>_amd64.deb: the one-folder Linux bundle (packaging/bundle/, built in a
# Debian 11 root: glibc 2.31) as /opt/gpen-watch, /usr/bin/gpen-watch, a menu entry, the hicolor
# icons and Send to gpen-watch (packaging/linux-send-to/). It needs nothing of the system's Python,
# so one package installs on Debian 11, 12 and 13 and on the Ubuntu releases of their age.
# README.md beside this file says more.
# The bundle is dist/'s for this version (GPEN_WATCH_BUNDLE names another), built first if missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common.sh"

name=gpen-watch
ver=$(version)
arch=$(dpkg --print-architecture)
out=$repo/dist/${name}_${ver}_${arch}.deb
work=$repo/build/deb
stage=$work/root
start=$SECONDS

command -v dpkg-deb >/dev/null || { say "dpkg-deb is missing: apt install dpkg-dev"; exit 1; }
bundle=$(linux_bundle)
rm -rf "$work"
mkdir -p "$work" "$repo/dist"
say "deb $ver for $arch, from $bundle"
stage_linux "$bundle" "$stage" "sudo apt install --reinstall gpen-watch"
install -D -m 0644 "$repo/LICENSE" "$stage/usr/share/doc/$name/copyright"

mkdir -p "$stage/DEBIAN"
size_kib=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
sed -e "s/@VERSION@/$ver/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size_kib/" "$here/control.in" >"$stage/DEBIAN/control"
for script in preinst postinst prerm postrm; do
    install -m 0755 "$here/$script" "$stage/DEBIAN/$script"
done
(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | xargs -0 md5sum) >"$stage/DEBIAN/md5sums"

say "dpkg-deb (gzip): $out"
t=$SECONDS
rm -f "$out"
# gzip, not zstd: Debian 11's dpkg cannot unpack zstd (Debian's dpkg reads it from Debian 12 on);
# not xz either: over ten minutes for the bundle's 950 MB on two cores, where gzip takes one.
dpkg-deb --root-owner-group -Zgzip -z6 --build "$stage" "$out" >/dev/null
say "  packed in $((SECONDS - t)) s"
say "ok in $((SECONDS - start)) s: $(du -m "$out" | cut -f1) MB, $((size_kib / 1024)) MB installed"
