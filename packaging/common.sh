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
