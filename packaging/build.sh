#!/usr/bin/env bash
# bash packaging/build.sh TARGET: build one of gpen-watch's packages into dist/.
#   bundle  dist/gpen-watch-<version>-linux-x86_64.tar.gz (one folder, no Python needed, built in
#           a Debian 11 root: glibc 2.31 or newer; packaging/bundle/README.md)
#   deb     dist/gpen-watch_<version>_amd64.deb, from the bundle (Debian 11-13, Ubuntu 22.04-24.04;
#           packaging/deb/README.md)
#   rpm     dist/gpen-watch-<version>-1.x86_64.rpm, from the bundle (Fedora, RHEL 9, openSUSE;
#           packaging/rpm/README.md)
#   icons   build/icons/: every icon size and format, from assets/icon.svg
#   wheel   dist/gpen_watch-<version>-py3-none-any.whl
# The version is pyproject.toml's, for every target.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"

case "${1:-}" in
    deb) bash "$here/deb/build.sh" ;;
    bundle) bash "$here/bundle/build.sh" ;;
    rpm) bash "$here/rpm/build.sh" ;;
    icons) make_icons "$repo/build/icons" ;;
    wheel) make_wheel "$repo/dist" ;;
    *)
        echo "usage: bash packaging/build.sh bundle|deb|rpm|icons|wheel" >&2
        exit 2
        ;;
esac
