"""The .rpm (packaging/rpm/), built with Debian's rpm tools from the same bundle as the .deb.

.ci/run builds it and names it in $GPEN_WATCH_RPM (and the .deb in $GPEN_WATCH_DEB). No Fedora
can be reached from here, so it is never installed on one. What is checked: the files it holds are
the .deb's (bar each format's licence file), Send to gpen-watch's among them, it requires only
glibc 2.31 or newer and offers none of the bundle's libraries to other packages, its scriptlets are
the .deb's maintainer scripts, and rpm itself installs it into a Debian 13 root (`rpm --root`,
dependencies not checked there: that root's rpm database knows no glibc), where the program and its
Send to entry run, and removes it without a trace.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
from collections.abc import Iterator

import pytest
from linux_roots import Root, make_root, missing_tools, remove_root

RPM = os.environ.get("GPEN_WATCH_RPM", "")
DEB = os.environ.get("GPEN_WATCH_DEB", "")
# "Send to gpen-watch" (packaging/linux-send-to/): the script, its per-user installer and Dolphin's
# service menu for every user (KDE 6 and KDE 5).
SEND_TO_FILES = (
    "/usr/bin/gpen-watch-send-to",
    "/usr/share/gpen-watch/send-to/gpen-watch-send-to",
    "/usr/share/gpen-watch/send-to/install.sh",
    "/usr/share/kio/servicemenus/gpen-watch-send-to.desktop",
    "/usr/share/kservices5/ServiceMenus/gpen-watch-send-to.desktop",
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (RPM and DEB), reason="no packages built: GPEN_WATCH_RPM, GPEN_WATCH_DEB (.ci/run)"
    ),
    pytest.mark.skipif(shutil.which("rpm") is None, reason="rpm not installed (Debian: rpm)"),
]


def rpm_query(*args: str) -> str:
    done = subprocess.run(["rpm", "-qp", *args, RPM], capture_output=True, text=True, check=True)
    return done.stdout


def test_the_rpm_holds_the_same_files_as_the_deb() -> None:
    rpm_files = {line for line in rpm_query("--list").splitlines() if line}
    modes = {line.split()[-1]: line.split()[0] for line in rpm_query("--list", "-v").splitlines()}
    folders = {f for f, mode in modes.items() if mode.startswith("d")}
    # The .deb's files and links, read from its data as a stream (about a gigabyte unpacked).
    with subprocess.Popen(["dpkg-deb", "--fsys-tarfile", DEB], stdout=subprocess.PIPE) as data:
        assert data.stdout is not None
        with tarfile.open(fileobj=data.stdout, mode="r|") as tar:
            deb_files = {"/" + m.name.removeprefix("./") for m in tar if m.isfile() or m.issym()}
    assert data.returncode == 0
    rpm_only = {"/usr/share/licenses/gpen-watch/LICENSE"}
    deb_only = {"/usr/share/doc/gpen-watch/copyright"}
    rpm_plain = {f for f in rpm_files if not (f.endswith("/") or f in rpm_only or f in folders)}
    assert deb_files - deb_only <= rpm_plain
    assert not {f for f in rpm_plain - (deb_files - deb_only) if not f.startswith("/opt/gpen-watch")} - {
        "/opt/gpen-watch"
    }
    assert {
        "/usr/bin/gpen-watch",
        "/opt/gpen-watch/gpen-watch",
        "/usr/share/applications/gpen-watch.desktop",
        *SEND_TO_FILES,
    } <= rpm_files
    for program in ("/opt/gpen-watch/gpen-watch", "/usr/bin/gpen-watch", "/usr/bin/gpen-watch-send-to"):
        assert modes[program].startswith("-rwxr-xr-x"), program
    assert modes["/usr/share/gpen-watch/send-to/gpen-watch-send-to"].startswith("-rwxr-xr-x")
    # The service menus' folders are the package's too (co-owned with KDE's): gone with it.
    for folder in ("/usr/share/kio/servicemenus", "/usr/share/kservices5/ServiceMenus"):
        assert modes[folder].startswith("d"), folder


def test_it_requires_only_the_c_library_and_offers_no_library_of_its_own() -> None:
    requires = [r.strip() for r in rpm_query("--requires").splitlines()]
    assert "glibc >= 2.31" in requires
    assert not [r for r in requires if ".so" in r], "rpm's automatic dependencies on the bundle's libraries"
    provides = [p.strip() for p in rpm_query("--provides").splitlines()]
    assert all(p.startswith("gpen-watch") for p in provides), provides


def test_its_scriptlets_are_the_debs_maintainer_scripts() -> None:
    scripts = rpm_query("--scripts")
    for scriptlet in ("preinstall", "postinstall", "preuninstall", "postuninstall"):
        assert f"{scriptlet} scriptlet (using /bin/sh)" in scripts, scripts[:400]
    assert "gpen-watch is installed" in scripts
    assert "photos are never deleted" in scripts
    assert "rpm -ql gpen-watch" in scripts and "dpkg-query" not in scripts


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Root]:
    why = missing_tools()
    if why:
        pytest.skip(why)
    made = make_root("trixie", tmp_path_factory.mktemp("rpm-root") / "root")
    try:
        yield made
    finally:
        remove_root(made)


def rpm_in(root: Root, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["rpm", "--root", str(root.path), *args], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_rpm_installs_it_into_a_root_where_it_runs_and_removes_it_without_a_trace(root: Root) -> None:
    rpm_in(root, "--initdb")
    installed = rpm_in(root, "-i", "--nodeps", RPM)
    assert "gpen-watch is installed" in installed.stdout
    files = [f for f in rpm_in(root, "-ql", "gpen-watch").stdout.splitlines() if f]
    assert all(os.path.lexists(root.host_path(f)) for f in files)
    # Its launcher names the fix for a damaged install on rpm's systems, not apt's.
    launcher = root.host_path("/usr/bin/gpen-watch").read_text(encoding="utf-8")
    assert "sudo dnf reinstall gpen-watch" in launcher and "apt" not in launcher
    version = root.run("gpen-watch", "--version", env={"HOME": "/root", "PATH": "/usr/bin:/bin"})
    assert re.fullmatch(r"gpen-watch \S+", version.stdout.strip()), version.stdout
    # Send to runs the package's gpen-watch: with no service running there, it says so (exit 3).
    sent = root.run(
        "gpen-watch-send-to",
        "/root/photo.jpg",
        env={"HOME": "/root", "PATH": "/usr/bin:/bin", "XDG_RUNTIME_DIR": "/tmp"},
        check=False,
    )
    assert sent.returncode == 3, sent.stdout + sent.stderr
    assert "gpen-watch is not running" in sent.stderr, sent.stderr
    removed = rpm_in(root, "-e", "gpen-watch")
    assert "gpen-watch is removed" in removed.stdout and "photos are never deleted" in removed.stdout
    # Folders it shares with others (the icon theme's) stay; none of its files may.
    assert [f for f in files if os.path.lexists(root.host_path(f)) and not root.host_path(f).is_dir()] == []
    assert not root.host_path("/opt/gpen-watch").exists()
    for folder in ("/usr/share/gpen-watch", "/usr/share/kio", "/usr/share/kservices5"):
        assert not root.host_path(folder).exists(), folder
