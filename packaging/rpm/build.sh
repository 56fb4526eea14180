#!/usr/bin/env bash
# dist/gpen-watch-<version>-1.x86_64.rpm: the same tree as the .deb (the one-folder bundle as
# /opt/gpen-watch, /usr/bin/gpen-watch, the menu entry, the icons and Send to gpen-watch), for
# Fedora, RHEL 9 and openSUSE, built with rpmbuild (Debian's rpm package). Its scriptlets run the
# .deb's maintainer scripts with the arguments dpkg would pass, so both packages say the same things.
# The bundle is dist/'s for this version (GPEN_WATCH_BUNDLE names another), built first if missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common.sh"

ver=$(version)
arch=$(uname -m)
work=$repo/build/rpm
stage=$work/root
out=$repo/dist/gpen-watch-$ver-1.$arch.rpm
start=$SECONDS

command -v rpmbuild >/dev/null || { say "rpmbuild is missing: apt install rpm"; exit 1; }
bundle=$(linux_bundle)
rm -rf "$work"
mkdir -p "$work" "$repo/dist"
say "rpm $ver for $arch, from $bundle"
stage_linux "$bundle" "$stage" "sudo dnf reinstall gpen-watch"
install -D -m 0644 "$repo/LICENSE" "$stage/usr/share/licenses/gpen-watch/LICENSE"

# scriptlet NAME 'SET ARGS' SCRIPT: the .deb's maintainer script as an rpm scriptlet. rpm gives a
# count of installed copies ($1); dpkg gives words: SET ARGS turns one into the other.
scriptlet() {
    echo "%$1"
    echo "$2"
    # Which files the package owns, asked of rpm rather than dpkg; in a subshell, as each script
    # ends with exit.
    echo "("
    sed -e 's/dpkg-query -L gpen-watch/rpm -ql gpen-watch/' "$repo/packaging/deb/$3"
    echo ")"
    echo
}
spec=$work/gpen-watch.spec
{
    sed -e "s/@VERSION@/$ver/" -e "s/@ARCH@/$arch/" -e "s|@STAGE@|$stage|" "$here/gpen-watch.spec.in"
    echo
    scriptlet pre 'if [ "$1" -ge 2 ]; then set -- upgrade; else set -- install; fi' preinst
    scriptlet post 'if [ "$1" -eq 1 ]; then set -- configure ""; else set -- configure previous; fi' postinst
    scriptlet preun 'if [ "$1" -eq 0 ]; then set -- remove; else set -- upgrade; fi' prerm
    # Removed, not upgraded: what dpkg's remove and purge say (rpm has no purge).
    echo '%postun'
    echo 'if [ "$1" -eq 0 ]; then'
    for step in remove purge; do
        echo "("
        echo "set -- $step"
        cat "$repo/packaging/deb/postrm"
        echo ")"
    done
    echo 'fi'
} >"$spec"

say "rpmbuild (zstd)"
t=$SECONDS
rpmbuild -bb --quiet --define "_topdir $work/rpmbuild" --define "_rpmdir $work/out" \
    --define "_build_name_fmt %%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm" "$spec" >"$work/rpmbuild.log" 2>&1 \
    || { tail -30 "$work/rpmbuild.log"; exit 1; }
mv "$work/out/gpen-watch-$ver-1.$arch.rpm" "$out"
say "  packed in $((SECONDS - t)) s"
say "ok in $((SECONDS - start)) s: $(du -m "$out" | cut -f1) MB, $(du -sm "$stage" | cut -f1) MB installed"
