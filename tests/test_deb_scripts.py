"""The Debian package's maintainer scripts (packaging/deb/preinst, prerm, postrm), run without a
package: each under /bin/sh in a sandbox where /opt/gpen-watch is a folder of the test's, and
`pgrep` and `dpkg-query` are stand-ins on PATH, so what they say and do is checked in a second.
tests/test_deb_package.py runs them for real, through apt, on a built package (slow).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

DEB = REPO / "packaging" / "deb"
INSTALLED = "/opt/gpen-watch"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Debian's maintainer scripts")


def run_script(name: str, tmp_path: Path, *args: str, running: str = "", owned: tuple[str, ...] = ()) -> str:
    """Run packaging/deb/NAME with ``args`` as dpkg would, /opt/gpen-watch moved into ``tmp_path``;
    ``running``: the process ids the stand-in pgrep finds; ``owned``: what dpkg-query lists as the
    package's files. Returns what it printed (it must exit 0: a failing script stops apt)."""
    root = tmp_path / "opt-gpen-watch"
    script = tmp_path / name
    script.write_text(
        (DEB / name).read_text(encoding="utf-8").replace(INSTALLED, str(root)), encoding="utf-8"
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "pgrep").write_text(
        '#!/bin/sh\necho "$*" >>"$PGREP_ASKED"\n[ -n "$PIDS" ] && printf "%s\\n" $PIDS\n'
    )
    (bin_dir / "dpkg-query").write_text('#!/bin/sh\nprintf "%s\\n" $OWNED\n')
    for tool in ("pgrep", "dpkg-query"):
        (bin_dir / tool).chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "PIDS": running,
        "OWNED": " ".join(owned),
        "PGREP_ASKED": str(tmp_path / "pgrep.asked"),
        # Root's, as apt runs the scripts: nothing of it may end up in the words for each user.
        "XDG_RUNTIME_DIR": "/run/user/0",
        "HOME": "/root",
    }
    done = subprocess.run(
        ["/bin/sh", str(script), *args], capture_output=True, text=True, env=env, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr
    return done.stdout


def test_remove_with_the_service_running_names_the_trays_quit_and_kill_not_the_command_it_removes(
    tmp_path: Path,
) -> None:
    said = run_script("prerm", tmp_path, "remove", running="4242 4250")
    assert "gpen-watch is still running (process 4242 4250)" in said
    assert "Quit in its tray icon's menu" in said
    assert "kill 4242 4250" in said
    # The gpen-watch command goes with the package: no advice may rest on it.
    assert "gpen-watch stop" not in said
    assert "No photo is lost" in said
    # It looked for the processes of the program at its installed path.
    asked = (tmp_path / "pgrep.asked").read_text()
    assert f"^{tmp_path / 'opt-gpen-watch'}/" in asked
    assert run_script("prerm", tmp_path, "remove") == ""  # nothing running: nothing to say
    assert run_script("prerm", tmp_path, "upgrade", running="4242") == ""  # an upgrade keeps it


def test_remove_takes_the_byte_code_python_wrote_and_keeps_the_packages_own(tmp_path: Path) -> None:
    cache = tmp_path / "opt-gpen-watch" / "venv" / "lib" / "site" / "__pycache__"
    cache.mkdir(parents=True)
    ours, stray = cache / "a.cpython-311.pyc", cache / "b.cpython-311.pyc"
    ours.write_bytes(b"x")
    stray.write_bytes(b"y")
    empty = tmp_path / "opt-gpen-watch" / "venv" / "lib" / "other" / "__pycache__"
    empty.mkdir(parents=True)
    run_script("prerm", tmp_path, "remove", owned=(str(ours),))
    assert ours.exists()
    assert not stray.exists()
    assert not empty.exists()


def test_remove_says_how_to_take_a_login_entry_away_without_the_removed_command(tmp_path: Path) -> None:
    said = run_script("postrm", tmp_path, "remove")
    assert "~/.config/autostart/gpen-watch.desktop" in said
    assert "systemctl --user disable gpen-watch.service" in said
    assert "~/.config/systemd/user/gpen-watch.service" in said
    assert not re.search(r"gpen-watch (service|stop)", said), said


def test_purge_names_every_place_a_users_data_stays_the_control_socket_too(tmp_path: Path) -> None:
    said = run_script("postrm", tmp_path, "purge")
    for place in (
        "~/Pictures/GPEN",
        "~/.config/gpen-watch",
        "~/.cache/gpen-watch",
        "~/.local/state/gpen-watch",
        "$XDG_RUNTIME_DIR/gpen-watch",  # as written: each user's own, not root's
        "~/.config/autostart/gpen-watch",
    ):
        assert place in said, place
    assert "/run/user/0" not in said
    assert "never deleted" in said


def test_an_upgrade_over_a_running_service_names_the_trays_quit(tmp_path: Path) -> None:
    said = run_script("preinst", tmp_path, "upgrade", "0.0.9", running="4242")
    assert "gpen-watch is running (process 4242)" in said
    assert "Quit in its tray icon's menu" in said
    assert run_script("preinst", tmp_path, "install") == ""


def test_every_message_line_fits_a_terminal(tmp_path: Path) -> None:
    """apt's output is read in a terminal: no line of the scripts' words runs past 100 columns."""
    said = run_script("prerm", tmp_path, "remove", running="4242")
    said += run_script("postrm", tmp_path, "remove") + run_script("postrm", tmp_path, "purge")
    said += run_script("preinst", tmp_path, "upgrade", "0.0.9", running="4242")
    said += run_script("postinst", tmp_path, "configure")
    long = [line for line in said.splitlines() if len(line) > 100]
    assert long == []


@pytest.mark.skipif(shutil.which("dash") is None and not os.path.exists("/bin/sh"), reason="no POSIX shell")
def test_the_scripts_are_posix_shell(tmp_path: Path) -> None:
    """dpkg runs them with /bin/sh (dash on Debian): each parses there."""
    shell = shutil.which("dash") or "/bin/sh"
    for name in ("preinst", "postinst", "prerm", "postrm", "gpen-watch.sh"):
        done = subprocess.run([shell, "-n", str(DEB / name)], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, f"{name}: {done.stderr}"
