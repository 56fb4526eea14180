#!/usr/bin/env bash
# What every packaging target shares: the version, a tools venv, the wheel, the icons.
# Sourced by packaging/build.sh and each target's script; sets $repo.
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
say() { echo "packaging: $*"; }

# The one version of every package: pyproject.toml's [project] version.
version() {
    python3 - "$repo/pyproject.toml" <<'PY'
import sys
import tomllib

with open(sys.argv[1], "rb") as f:
    print(tomllib.load(f)["project"]["version"])
PY
}

# A venv of build tools kept in build/tools (made once): build for the wheel, resvg and Pillow for
# the icons. Prints its python.
tools_python() {
    local tools=$repo/build/tools
    if [ ! -x "$tools/bin/resvg" ] || [ ! -x "$tools/bin/pyproject-build" ]; then
        python3 -m venv "$tools" >&2
        "$tools/bin/python" -m pip install -qq 'build>=1.2' 'resvg-cli>=0.44' 'pillow>=11.3' >&2
    fi
    echo "$tools/bin/python"
}

# make_wheel DIR: the wheel into DIR; prints its path.
make_wheel() {
    local out=$1 py
    py=$(tools_python)
    mkdir -p "$out"
    env -u PYTHONDONTWRITEBYTECODE "$py" -m build --wheel --outdir "$out" "$repo" >"$repo/build/wheel.log" 2>&1 \
        || { cat "$repo/build/wheel.log" >&2; return 1; }
    ls "$out"/gpen_watch-"$(version)"-py3-none-any.whl
}

# make_icons DIR: every icon size and format from assets/icon.svg (packaging/icons.py).
make_icons() {
    local py
    py=$(tools_python)
    PATH="$(dirname "$py"):$PATH" "$py" "$repo/packaging/icons.py" "$1" >&2
}

# linux_bundle: the bundle's tarball for this version (GPEN_WATCH_BUNDLE names one), built first
# when there is none; prints its path. The .deb and the .rpm are made from it.
linux_bundle() {
    local tarball=${GPEN_WATCH_BUNDLE:-$repo/dist/gpen-watch-$(version)-linux-$(uname -m).tar.gz}
    if [ ! -f "$tarball" ]; then
        say "no bundle at $tarball: building it first"
        bash "$repo/packaging/bundle/build.sh" >&2
    fi
    echo "$tarball"
}

# stage_linux TARBALL STAGE REINSTALL: what the .deb and the .rpm install, laid out under STAGE:
# the bundle's folder as /opt/gpen-watch, the /usr/bin/gpen-watch launcher (REINSTALL is the
# command its damaged-install sentence names), the menu entry, the hicolor icons, and "Send to
# gpen-watch" (packaging/linux-send-to/): its files in /usr/share/gpen-watch/send-to,
# /usr/bin/gpen-watch-send-to, and Dolphin's service menu for every user (KDE 6 and KDE 5).
stage_linux() {
    local tarball=$1 stage=$2 reinstall=$3 icons f
    mkdir -p "$stage/opt"
    tar -C "$stage/opt" -xzf "$tarball"
    [ -x "$stage/opt/gpen-watch/gpen-watch" ] || { say "$tarball holds no gpen-watch/gpen-watch"; return 1; }
    mkdir -p "$stage/usr/bin"
    sed "s|@REINSTALL@|$reinstall|" "$repo/packaging/deb/gpen-watch.sh" >"$stage/usr/bin/gpen-watch"
    chmod 0755 "$stage/usr/bin/gpen-watch"
    install -D -m 0644 "$repo/packaging/deb/gpen-watch.desktop" "$stage/usr/share/applications/gpen-watch.desktop"
    icons=$(dirname "$stage")/icons
    make_icons "$icons"
    (cd "$icons" && find hicolor -type f) | while read -r f; do
        install -D -m 0644 "$icons/$f" "$stage/usr/share/icons/$f"
    done
    local send_to=$repo/packaging/linux-send-to
    install -D -m 0755 "$send_to/gpen-watch-send-to" "$stage/usr/share/gpen-watch/send-to/gpen-watch-send-to"
    install -m 0755 "$send_to/install.sh" "$stage/usr/share/gpen-watch/send-to/install.sh"
    install -m 0644 "$send_to/gpen-watch-send-to.desktop" "$send_to/thunar-action.xml" "$stage/usr/share/gpen-watch/send-to/"
    install -D -m 0755 "$repo/packaging/deb/gpen-watch-send-to.sh" "$stage/usr/bin/gpen-watch-send-to"
    for f in kio/servicemenus kservices5/ServiceMenus; do
        install -D -m 0644 "$send_to/gpen-watch-send-to.desktop" "$stage/usr/share/$f/gpen-watch-send-to.desktop"
    done
}
