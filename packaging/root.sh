#!/usr/bin/env bash
# bash packaging/root.sh SUITE DIR [PACKAGE...]: a root file system of a Debian release (bullseye,
# bookworm, trixie) or an Ubuntu one (jammy, noble) at DIR, made with mmdebstrap (variant minbase,
# plus the packages named) from the release's own mirror, as root. Ubuntu's archive is signed with
# Ubuntu's keys: UBUNTU_KEYRING names the keyring (default: the one Debian 13's ubuntu-keyring
# package installs). The bundle is built in one (packaging/bundle/build.sh) and the
# packages are installed in others (tests/test_linux_roots.py).
#
# Making one takes 20-60 s; each is also kept as a tarball in $GPEN_WATCH_ROOT_CACHE (default
# ~/.cache/gpen-watch-build/roots) and unpacked from there (seconds) while it is younger than
# ROOT_MAX_AGE_DAYS (7: security updates come in with the next one). A runner that keeps that
# folder between runs starts from it; one that does not makes every root from nothing.
set -euo pipefail
suite=${1:?usage: packaging/root.sh SUITE DIR [PACKAGE...]}
dir=${2:?usage: packaging/root.sh SUITE DIR [PACKAGE...]}
shift 2
say() { echo "root: $*" >&2; }

[ "$(id -u)" = 0 ] || { say "making a root needs root (mmdebstrap --mode=root); run it with sudo"; exit 1; }
command -v mmdebstrap >/dev/null || { say "mmdebstrap is missing: apt install mmdebstrap"; exit 1; }

cache=${GPEN_WATCH_ROOT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpen-watch-build/roots}
max_age=${ROOT_MAX_AGE_DAYS:-7}
packages=$(printf '%s\n' "$@" | sort -u | tr '\n' ',' | sed 's/,$//')
key=$(printf '%s %s %s' "$suite" "$(dpkg --print-architecture)" "$packages" | sha256sum | cut -c1-16)
tarball=$cache/$suite-$key.tar
mkdir -p "$cache"

if [ -z "$(find "$tarball" -mtime -"$max_age" 2>/dev/null)" ]; then
    t=$SECONDS
    say "making $suite (minbase${packages:+ + $packages}) with mmdebstrap"
    include=()
    [ -n "$packages" ] && include=(--include="$packages")
    case $suite in
        focal | jammy | noble | oracular | plucky | questing)
            keyring=${UBUNTU_KEYRING:-/usr/share/keyrings/ubuntu-archive-keyring.gpg}
            [ -f "$keyring" ] || { say "no Ubuntu archive keyring at $keyring: set UBUNTU_KEYRING"; exit 1; }
            include+=(--keyring="$keyring")
            ;;
    esac
    # Written beside the cached one under a name of this process's and renamed: a run stopped
    # half-way leaves no broken tarball, and two test processes making the same root do not mix.
    mmdebstrap --quiet --variant=minbase --mode=root --format=tar "${include[@]}" "$suite" "$tarball.$$.part" >&2 \
        || { rm -f "$tarball.$$.part"; exit 1; }
    mv "$tarball.$$.part" "$tarball"
    say "  $suite made in $((SECONDS - t)) s ($(du -m "$tarball" | cut -f1) MB, cached as $tarball)"
fi
rm -rf "$dir"
mkdir -p "$dir"
tar -C "$dir" -xf "$tarball"
echo "$dir"
