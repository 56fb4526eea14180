#!/usr/bin/env bash
# bash packaging/build.sh TARGET: build one of gpen-watch's packages into dist/.
#   deb     dist/gpen-watch_<version>_amd64.deb (Debian 12; packaging/deb/README.md)
#   bundle  dist/gpen-watch-<version>-linux-x86_64.tar.gz (one folder, no Python needed;
#           packaging/bundle/README.md)
#   icons   build/icons/: every icon size and format, from assets/icon.svg
#   wheel   dist/gpen_watch-<version>-py3-none-any.whl
# The version is pyproject.toml's, for every target.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"

case "${1:-}" in
    deb) bash "$here/deb/build.sh" ;;
    bundle) bash "$here/bundle/build.sh" ;;
    icons) make_icons "$repo/build/icons" ;;
    wheel) make_wheel "$repo/dist" ;;
    *)
        echo "usage: bash packaging/build.sh deb|bundle|icons|wheel" >&2
        exit 2
        ;;
esac
