#!/usr/bin/env bash
# Run inside the Debian 11 build root (packaging/bundle/build.sh): CPython 3.11 built there into
# /opt/python3.11, so that it and every module it builds need no glibc newer than Debian 11's.
#
# The source is Debian's own python3.11 source package from Debian 12 (bookworm and its security
# updates), fetched with apt-get source from the same mirror as the root: CPython's release tarball
# as Debian ships it, signed through Debian's archive keys, with the upstream fixes Debian carries
# (its CVE backports, each taken from CPython's own 3.11 branch). Debian's own packaging patches
# (its install layout, multiarch names, the system-only ensurepip lock) are left out: they make a
# Python for /usr on Debian 12, not one in a folder of its own. Built with CPython's configure and
# make, shared (PyInstaller bundles libpython3.11.so), without the test suite or PGO.
# Writes OUT (an argument) as a tarball of /opt/python3.11 and prints the source version.
set -euo pipefail
out=${1:?usage: python.sh OUT.tar}
logs=$(dirname "$out")  # the build's logs, beside the tarball
prefix=/opt/python3.11
say() { echo "python: $*" >&2; }

# Debian's packaging patches of python3.11 in Debian 12: everything in its series up to
# destshared-location.diff. Every other patch in the series is an upstream fix and is applied.
packaging_patches=" deb-setup.diff deb-locations.diff distutils-install-layout.diff locale-module.diff
 distutils-link.diff distutils-sysconfig.diff sysconfig-debian-schemes.diff tkinter-import.diff
 gdbm-import.diff link-opt.diff setup-modules.diff profiled-build.diff langpack-gettext.diff
 disable-sem-check.diff lib-argparse.diff ctypes-arm.diff multiarch.diff lib2to3-no-pickled-grammar.diff
 ext-no-libpython-link.diff test-no-random-order.diff multiarch-extname.diff tempfile-minimal.diff
 disable-some-tests.diff ensurepip-disabled.diff mangle-fstack-protector.diff reproducible-buildinfo.diff
 pydoc-use-pager.diff local-doc-references.diff doc-build-texinfo.diff argparse-no-shutil.diff
 sysconfigdata-name.diff hurd_kfreebsd_thread_native_id.diff sphinx3.diff destshared-location.diff "

# Debian 12's sources, from the mirrors this root already uses.
main=$(awk '$1 == "deb" && $3 !~ /-(security|updates)$/ {print $2; exit}' /etc/apt/sources.list)
security=$(awk '$1 == "deb" && $3 ~ /-security$/ {print $2; exit}' /etc/apt/sources.list)
{
    echo "deb-src $main bookworm main"
    [ -n "$security" ] && echo "deb-src $security bookworm-security main"
} >/etc/apt/sources.list.d/python-source.list
apt-get update -qq >/dev/null
mkdir -p /tmp/python-src
cd /tmp/python-src
# The newest version first; a mirror that does not hold it yet (a fresh security update) gives the
# one before.
got=
for v in $(apt-cache showsrc python3.11 | awk '/^Version:/ {print $2}' | sort -urV); do
    if apt-get source -qq --download-only "python3.11=$v" >/dev/null 2>&1; then
        got=$v
        break
    fi
    say "python3.11 $v is listed but could not be fetched; trying the one before"
done
[ -n "$got" ] || { say "no python3.11 source package could be fetched from $main"; exit 1; }
upstream=${got%%-*}
say "Debian's python3.11 $got (CPython $upstream)"

tar -xf python3.11_"$upstream".orig.tar.*
tar -xf python3.11_"$got".debian.tar.*
applied=0
cd "Python-$upstream"
for p in $(grep -v '^#' ../debian/patches/series); do
    case $packaging_patches in *" $p "*) continue ;; esac
    patch -p1 -s --forward <"../debian/patches/$p" || { say "Debian's patch $p does not apply"; exit 1; }
    applied=$((applied + 1))
done
say "$applied upstream fixes applied (Debian's packaging patches left out)"
# Debian builds pyexpat into the interpreter, where the fixes' use of CPython's internal headers
# needs nothing more; built as a module here it must say it is one of CPython's own, as pyexpat.c
# of CPython's later 3.11 releases does.
if grep -q 'pycore_ceval.h' Modules/pyexpat.c && ! grep -q 'Py_BUILD_CORE_MODULE' Modules/pyexpat.c; then
    sed -i '1i #ifndef Py_BUILD_CORE_BUILTIN\n#  define Py_BUILD_CORE_MODULE 1\n#endif' Modules/pyexpat.c
fi

t=$SECONDS
./configure -q --prefix="$prefix" --enable-shared --with-ensurepip=install \
    LDFLAGS="-Wl,-rpath,$prefix/lib" >"$logs/python-configure.log" 2>&1 \
    || { tail -30 "$logs/python-configure.log" >&2; exit 1; }
make -s -j"$(nproc)" >"$logs/python-make.log" 2>&1 || { tail -40 "$logs/python-make.log" >&2; exit 1; }
make -s install >"$logs/python-install.log" 2>&1 || { tail -40 "$logs/python-install.log" >&2; exit 1; }
say "built in $((SECONDS - t)) s"
# Modules a frozen gpen-watch imports: a missing development package leaves them out silently.
"$prefix/bin/python3.11" -c 'import ssl, sqlite3, lzma, bz2, zlib, ctypes, uuid, _decimal, hashlib; print(ssl.OPENSSL_VERSION)' >&2
rm -rf "$prefix/lib/python3.11/test" "$prefix"/lib/python3.11/config-3.11-*/libpython3.11.a
# Without the debugging symbols (-g): a third of libpython's size, which the bundle carries.
find "$prefix" -type f \( -name '*.so' -o -name '*.so.*' -o -path "$prefix/bin/python3.11" \) \
    -exec strip --strip-unneeded {} +
echo "$got" >"$prefix/DEBIAN-SOURCE-VERSION"
tar -C / -cf "$out" "${prefix#/}"
echo "$got"
