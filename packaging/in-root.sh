#!/usr/bin/env bash
# bash packaging/in-root.sh DIR [--bind SRC DEST]... [--ro-bind SRC DEST]... -- COMMAND...: run
# COMMAND as root inside the root file system at DIR (packaging/root.sh), with bubblewrap: its own
# /proc, /dev and /tmp, this machine's network and name server, a clean environment, and nothing
# else of this machine but the folders bound in. Every mount goes away with the command: nothing to unmount.
#
# pip inside the root trusts what pip here trusts: where PIP_CERT (or pip's configured cert) names a
# CA bundle, it is bound in at the same path and PIP_CERT set to it.
set -euo pipefail
dir=${1:?usage: packaging/in-root.sh DIR [--bind SRC DEST]... -- COMMAND...}
shift
command -v bwrap >/dev/null || { echo "in-root: bwrap is missing: apt install bubblewrap" >&2; exit 1; }
binds=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
    case $1 in
        --bind | --ro-bind) binds+=("$1" "$2" "$3"); shift 3 ;;
        *) echo "in-root: unknown option $1" >&2; exit 2 ;;
    esac
done
[ "${1:-}" = -- ] && shift

cert=${PIP_CERT:-$(python3 -m pip config get global.cert 2>/dev/null || true)}
# A clean environment: this machine's (its user folders, venv, pip configuration) means nothing there.
env=(--clearenv --setenv HOME /root --setenv PATH /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
    --setenv LANG C.UTF-8 --setenv DEBIAN_FRONTEND noninteractive)
# What reaching the network may need: a proxy, a package index mirror.
for name in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY PIP_INDEX_URL PIP_EXTRA_INDEX_URL; do
    [ -n "${!name:-}" ] && env+=(--setenv "$name" "${!name}")
done
if [ -n "$cert" ] && [ -f "$cert" ]; then
    mkdir -p "$dir$(dirname "$cert")"
    [ -e "$dir$cert" ] || touch "$dir$cert"
    binds+=(--ro-bind "$cert" "$cert")
    env+=(--setenv PIP_CERT "$cert")
fi
[ -e "$dir/etc/resolv.conf" ] || touch "$dir/etc/resolv.conf"
exec bwrap --bind "$dir" / --proc /proc --dev /dev --perms 1777 --tmpfs /tmp --tmpfs /run \
    --ro-bind /etc/resolv.conf /etc/resolv.conf --die-with-parent "${binds[@]}" "${env[@]}" -- "$@"
