"""Start at login: files generated into the temp HOME for each OS, parsed back, checked where possible.

conftest points HOME and XDG_* at a temp folder for every test, so nothing here touches the real
user's autostart, systemd, LaunchAgents or registry.
"""

from __future__ import annotations

import configparser
import os
import plistlib
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from gpen_watch.cli import main
from gpen_watch.platform import current, linux_login, macos_login, module_name, paths, program, windows_login
from gpen_watch.platform.api import Platform
from gpen_watch.platform.login_common import MARKER, NODE, LoginError, LoginOptions, stale_note


def tree(root: Path) -> dict[str, str]:
    """Every file and link under root (relative path -> content or link target)."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = "-> " + os.readlink(p)
        elif p.is_file():
            out[rel] = p.read_text(errors="replace")
        else:
            out[rel] = "/"
    return out


@pytest.fixture
def python_with_spaces(tmp_path: Path) -> str:
    """An interpreter path with a space and a percent sign, as a venv under 'My Files' might have."""
    folder = tmp_path / "my env 100%"
    folder.mkdir()
    link = folder / "python3"
    link.symlink_to(sys.executable)
    return str(link)


class Calls:
    """A Runner that records commands and answers from a table."""

    def __init__(self, answers: dict[str, int] | None = None) -> None:
        self.calls: list[list[str]] = []
        self.answers = answers or {}

    def __call__(self, argv: Sequence[str]) -> tuple[int, str]:
        self.calls.append(list(argv))
        return self.answers.get(" ".join(argv[:2]), 0), ""


def read_desktop(path: Path) -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    parser.read(path, encoding="utf-8")
    return parser["Desktop Entry"]


def desktop_argv(exec_value: str) -> list[str]:
    """Undo the desktop entry escaping (string escapes, quoting, %%) the way launchers do."""
    return [a.replace("%%", "%") for a in shlex.split(exec_value.replace("\\\\", "\\"))]


def read_unit(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(path, encoding="utf-8")
    return parser


def systemd_verify(path: Path) -> None:
    """`systemd-analyze verify` where it exists: syntax, known keys, and that ExecStart is executable."""
    tool = shutil.which("systemd-analyze")
    if tool is None:
        return
    done = subprocess.run([tool, "verify", str(path)], capture_output=True, text=True, timeout=60)
    out = done.stdout + done.stderr
    if "Failed to initialize manager" in out or "Failed to setup working directory" in out:
        return  # a container without what systemd-analyze needs to start its manager
    assert done.returncode == 0, out
    assert path.name not in out, out  # no warnings about our unit


# --- Linux: XDG autostart ----------------------------------------------------------------------------


def test_autostart_entry_runs_this_python_and_parses_back(
    isolated_user_dirs: Path, python_with_spaces: str
) -> None:
    result = linux_login.install(LoginOptions(python=python_with_spaces), run=Calls())
    path = Path(os.environ["XDG_CONFIG_HOME"]) / "autostart" / "gpen-watch.desktop"
    assert result.changed
    assert path.is_file()
    entry = read_desktop(path)
    assert entry["Type"] == "Application"
    assert entry["Terminal"] == "false"
    assert desktop_argv(entry["Exec"]) == [python_with_spaces, "-m", "gpen_watch", "run"]
    assert Path(entry["Icon"]).is_file()
    assert MARKER in path.read_text()
    status = linux_login.status()
    assert status.installed
    assert status.kind == "xdg-autostart"
    assert status.location == str(path)


def test_autostart_no_tray() -> None:
    linux_login.install(LoginOptions(no_tray=True), run=Calls())
    entry = read_desktop(linux_login.autostart_file())
    assert desktop_argv(entry["Exec"]) == [sys.executable, "-m", "gpen_watch", "run", "--no-tray"]


def test_a_frozen_program_starts_itself_at_login(isolated_user_dirs: Path, tmp_path: Path) -> None:
    """The one-folder bundle: its executable is gpen-watch, not an interpreter to give ``-m``."""
    program = str(tmp_path / "gpen watch" / "gpen-watch")
    linux_login.install(LoginOptions(python=program, frozen=True), run=Calls())
    entry = read_desktop(linux_login.autostart_file())
    assert desktop_argv(entry["Exec"]) == [program, "run"]


def test_install_twice_is_harmless_and_uninstall_removes_exactly_what_install_made(
    isolated_user_dirs: Path,
) -> None:
    before = tree(isolated_user_dirs)
    first = linux_login.install(LoginOptions(), run=Calls())
    after_first = tree(isolated_user_dirs)
    second = linux_login.install(LoginOptions(), run=Calls())
    assert first.changed
    assert not second.changed
    assert second.messages[0] == "already installed; nothing changed"
    assert tree(isolated_user_dirs) == after_first
    assert linux_login.uninstall(run=Calls()).changed
    assert tree(isolated_user_dirs) == before
    assert not linux_login.status().installed
    assert linux_login.uninstall(run=Calls()).messages == ["start at login was not installed"]


def test_a_file_the_user_wrote_is_never_overwritten_or_removed() -> None:
    path = linux_login.autostart_file()
    path.parent.mkdir(parents=True)
    path.write_text("[Desktop Entry]\nExec=my-own-thing\n")
    with pytest.raises(LoginError, match="not written by gpen-watch"):
        linux_login.install(LoginOptions(), run=Calls())
    result = linux_login.uninstall(run=Calls())
    assert "left" in result.messages[0]
    assert path.read_text() == "[Desktop Entry]\nExec=my-own-thing\n"
    assert not linux_login.status().installed


def test_status_notices_a_file_written_for_another_python(tmp_path: Path) -> None:
    other = tmp_path / "old-venv" / "python3"
    linux_login.install(LoginOptions(python=str(other)), run=Calls())
    assert stale_note() in linux_login.status().notes
    linux_login.install(LoginOptions(), run=Calls())
    assert linux_login.status().notes == ()


# --- Linux: systemd user unit --------------------------------------------------------------------------


def test_systemd_unit_for_the_graphical_session(isolated_user_dirs: Path, python_with_spaces: str) -> None:
    calls = Calls()
    linux_login.install(LoginOptions(systemd=True, python=python_with_spaces), run=calls)
    path = Path(os.environ["XDG_CONFIG_HOME"]) / "systemd" / "user" / "gpen-watch.service"
    unit = read_unit(path)
    assert unit["Unit"]["PartOf"] == "graphical-session.target"
    assert unit["Unit"]["After"] == "graphical-session.target"
    assert unit["Install"]["WantedBy"] == "graphical-session.target"
    assert unit["Service"]["Restart"] == "on-failure"
    assert unit["Service"]["RestartPreventExitStatus"] == "2"
    # systemd's own quoting: the path keeps its space, %% is a literal %.
    assert [a.replace("%%", "%") for a in shlex.split(unit["Service"]["ExecStart"])] == [
        python_with_spaces,
        "-m",
        "gpen_watch",
        "run",
    ]
    link = path.parent / "graphical-session.target.wants" / "gpen-watch.service"
    assert link.is_symlink()
    assert link.resolve() == path.resolve()
    assert ["systemctl", "--user", "daemon-reload"] in calls.calls
    systemd_verify(path)
    st = linux_login.status()
    assert st.installed
    assert st.kind == "systemd"
    assert st.notes == (stale_note(),)  # written for python_with_spaces, not for the Python running the tests


def test_systemd_headless_unit_uses_default_target(isolated_user_dirs: Path) -> None:
    linux_login.install(LoginOptions(systemd=True, no_tray=True), run=Calls())
    path = linux_login.unit_file()
    unit = read_unit(path)
    assert "PartOf" not in unit["Unit"]
    assert unit["Install"]["WantedBy"] == "default.target"
    assert unit["Service"]["ExecStart"].endswith("-m gpen_watch run --no-tray")
    assert linux_login.wants_link("default.target").is_symlink()
    assert not linux_login.wants_link("graphical-session.target").exists()
    systemd_verify(path)
    assert linux_login.status().notes == ()


def test_switching_between_autostart_and_systemd_keeps_one(isolated_user_dirs: Path) -> None:
    before = tree(isolated_user_dirs)
    linux_login.install(LoginOptions(), run=Calls())
    linux_login.install(LoginOptions(systemd=True), run=Calls())
    assert not linux_login.autostart_file().exists()
    assert linux_login.unit_file().exists()
    linux_login.install(LoginOptions(systemd=True, no_tray=True), run=Calls())
    assert not linux_login.wants_link("graphical-session.target").exists()
    linux_login.install(LoginOptions(), run=Calls())
    assert linux_login.autostart_file().exists()
    assert not linux_login.unit_file().exists()
    linux_login.uninstall(run=Calls())
    assert tree(isolated_user_dirs) == before


def test_systemd_without_a_user_manager_still_installs(isolated_user_dirs: Path) -> None:
    result = linux_login.install(LoginOptions(systemd=True), run=Calls({"systemctl --user": 1}))
    assert linux_login.enabled()
    assert any("daemon-reload failed" in m for m in result.messages)


# --- macOS: LaunchAgent ----------------------------------------------------------------------------


def test_launch_agent_plist(isolated_user_dirs: Path, python_with_spaces: str) -> None:
    calls = Calls({"launchctl print": 113})  # not loaded yet
    result = macos_login.install(LoginOptions(python=python_with_spaces), run=calls)
    path = isolated_user_dirs / "Library" / "LaunchAgents" / "org.gpen-watch.gpen-watch.plist"
    data = plistlib.loads(path.read_bytes())
    assert data["Label"] == "org.gpen-watch.gpen-watch"
    assert data["ProgramArguments"] == [python_with_spaces, "-m", "gpen_watch", "run"]
    assert data["RunAtLoad"] is True
    assert data["KeepAlive"] == {"SuccessfulExit": False}
    assert data["ProcessType"] == "Interactive"
    assert data["StandardErrorPath"] == str(paths.log_dir() / "launchd.log")
    assert ["launchctl", "bootstrap", f"gui/{os.getuid()}", str(path)] in calls.calls
    assert result.changed
    # Twice: same file, already loaded -> nothing to do.
    again = Calls()
    assert not macos_login.install(LoginOptions(python=python_with_spaces), run=again).changed
    assert [c[:2] for c in again.calls] == [["launchctl", "print"]]


def test_launch_agent_from_a_running_instance_is_not_loaded_now(isolated_user_dirs: Path) -> None:
    calls = Calls({"launchctl print": 113})
    macos_login.install(LoginOptions(no_tray=True, load_now=False), run=calls)
    assert not any(c[1] == "bootstrap" for c in calls.calls)
    data = plistlib.loads(macos_login.agent_file().read_bytes())
    assert data["ProgramArguments"][-1] == "--no-tray"


def test_launch_agent_uninstall(isolated_user_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = tree(isolated_user_dirs)
    macos_login.install(LoginOptions(), run=Calls())
    st = macos_login.status(run=Calls())
    assert st.installed
    assert st.kind == "launchagent"
    assert st.notes == ()
    calls = Calls()
    assert macos_login.uninstall(run=calls).changed
    assert ["launchctl", "bootout", f"gui/{os.getuid()}/org.gpen-watch.gpen-watch"] in calls.calls
    assert not macos_login.agent_file().exists()
    # Started by launchd itself (the tray's toggle): the file goes, the job is not booted out.
    macos_login.install(LoginOptions(), run=Calls())
    monkeypatch.setenv("XPC_SERVICE_NAME", macos_login.LABEL)
    calls = Calls()
    macos_login.uninstall(run=calls)
    assert not any(c[1] == "bootout" for c in calls.calls)
    assert not macos_login.agent_file().exists()
    for folder in ("Library/LaunchAgents", "Library"):
        (isolated_user_dirs / folder).rmdir()  # the Mac's own folders, made here by install
    assert tree(isolated_user_dirs) == before


# --- Windows: HKCU Run -------------------------------------------------------------------------------


class DictRunKey(dict):  # type: ignore[type-arg]
    def set(self, name: str, value: str) -> None:
        self[name] = value

    def delete(self, name: str) -> None:
        del self[name]


def test_run_key_uses_pythonw(tmp_path: Path) -> None:
    scripts = tmp_path / "venv dir" / "Scripts"
    scripts.mkdir(parents=True)
    (scripts / "python.exe").write_bytes(b"")
    (scripts / "pythonw.exe").write_bytes(b"")
    key = DictRunKey()
    result = windows_login.install(LoginOptions(python=str(scripts / "python.exe")), key=key)
    assert result.changed
    assert key == {"gpen-watch": f'"{scripts / "pythonw.exe"}" -m gpen_watch run'}
    assert not windows_login.install(LoginOptions(python=str(scripts / "python.exe")), key=key).changed
    st = windows_login.status(key)
    assert st.installed
    assert st.kind == "run-key"
    assert st.command == key["gpen-watch"]
    assert windows_login.uninstall(key).changed
    assert key == {}


def test_run_key_without_pythonw_and_headless(tmp_path: Path) -> None:
    key = DictRunKey()
    windows_login.install(LoginOptions(python=str(tmp_path / "python.exe"), no_tray=True), key=key)
    assert key["gpen-watch"] == f"{tmp_path / 'python.exe'} -m gpen_watch run --no-tray"


def test_run_key_of_someone_else_is_left_alone() -> None:
    key = DictRunKey({"gpen-watch": r"C:\Tools\other.exe"})
    with pytest.raises(LoginError):
        windows_login.install(LoginOptions(), key=key)
    assert not windows_login.uninstall(key).changed
    assert key == {"gpen-watch": r"C:\Tools\other.exe"}
    assert not windows_login.status(key).installed


# --- picking the platform and the CLI ------------------------------------------------------------------


def test_platform_modules_by_name() -> None:
    assert module_name("linux") == "linux"
    assert module_name("freebsd14") == "linux"
    assert module_name("darwin") == "macos"
    assert module_name("win32") == "windows"
    for plat, login in (("linux", linux_login), ("darwin", macos_login), ("win32", windows_login)):
        platform = current(plat)  # instantiating checks that it implements all of Platform
        assert isinstance(platform, Platform)
        assert platform.login is login, plat


def test_every_platform_says_each_difference_the_interface_declares() -> None:
    # The ABC checks the methods; the class attributes (read by the tray, the cluster, the restorer
    # and the status) are checked here, so an OS module that leaves one out fails in a test rather
    # than with an AttributeError on that OS.
    declared = [n for n in Platform.__annotations__ if n not in ("name", "login")]
    assert {"x11_desktop", "procfs", "libc", "maxrss_unit", "posix_permissions", "unix_sockets"} <= set(
        declared
    )
    for plat in ("linux", "darwin", "win32"):
        cls = type(current(plat))
        assert all(hasattr(cls, n) for n in declared), (plat, [n for n in declared if not hasattr(cls, n)])
    assert [current(p).x11_desktop for p in ("linux", "freebsd14", "darwin", "win32")] == [
        True,
        True,
        False,
        False,
    ]
    # ru_maxrss: KiB on Linux, bytes on macOS.
    assert (current("linux").maxrss_unit, current("darwin").maxrss_unit) == (1024, 1)
    assert current("darwin").libc is None and current("win32").libc is None
    assert not current("darwin").procfs and not current("win32").procfs
    # File modes mean privacy, and the control channel is a Unix socket, on POSIX systems only.
    assert [
        (current(p).posix_permissions, current(p).unix_sockets) for p in ("linux", "darwin", "win32")
    ] == [
        (True, True),
        (True, True),
        (False, False),
    ]
    if sys.platform.startswith("linux"):
        assert current().procfs and current().libc == "libc.so.6"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the CLI acts on this machine's platform")
def test_service_cli_install_status_uninstall(
    isolated_user_dirs: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = Calls()
    monkeypatch.setattr(linux_login, "run_command", calls)  # not the real user's systemd
    before = tree(isolated_user_dirs)
    assert main(["service", "status"]) == 3
    assert "not installed" in capsys.readouterr().out
    assert main(["service", "install"]) == 0
    assert "wrote" in capsys.readouterr().out
    assert main(["service", "install"]) == 0
    assert "already installed" in capsys.readouterr().out
    assert main(["service", "status"]) == 0
    out = capsys.readouterr().out
    assert "installed (xdg-autostart)" in out
    assert f"{sys.executable} -m gpen_watch run" in out
    assert main(["service", "install", "--systemd", "--no-tray"]) == 0
    capsys.readouterr()
    assert main(["service", "status"]) == 0
    assert "installed (systemd)" in capsys.readouterr().out
    assert main(["service", "uninstall"]) == 0
    assert "removed" in capsys.readouterr().out
    assert tree(isolated_user_dirs) == before
    assert calls.calls == [["systemctl", "--user", "daemon-reload"]] * 2  # after install, after uninstall


# --- the cluster node's own entry (`service install --node ...`) ----------------------------------

NODE_ARGS = ("join", "192.168.1.10:6379", "--cpu")
KEEPER = ["-m", "gpen_watch", "cluster", "join", "192.168.1.10:6379", "--cpu", "--stay"]


def test_node_entries_sit_beside_the_service_and_go_alone(isolated_user_dirs: Path) -> None:
    linux_login.install(LoginOptions(), run=Calls())
    service = tree(isolated_user_dirs)
    linux_login.install(LoginOptions(node=NODE_ARGS), run=Calls())
    node_file = Path(os.environ["XDG_CONFIG_HOME"]) / "autostart" / "gpen-watch-node.desktop"
    assert desktop_argv(read_desktop(node_file)["Exec"]) == [sys.executable, *KEEPER]
    assert linux_login.status(entry=NODE).installed and linux_login.enabled(entry=NODE)
    assert linux_login.status().command == f"{sys.executable} -m gpen_watch run"  # untouched
    # systemd: at default.target (no display needed), and the node's desktop entry is replaced.
    linux_login.install(LoginOptions(systemd=True, node=NODE_ARGS), run=Calls())
    assert not node_file.exists()
    unit_path = linux_login.unit_file(NODE)
    assert unit_path.name == "gpen-watch-node.service"
    unit = read_unit(unit_path)
    assert shlex.split(unit["Service"]["ExecStart"]) == [sys.executable, *KEEPER]
    assert unit["Install"]["WantedBy"] == "default.target"
    assert "PartOf" not in unit["Unit"]
    assert linux_login.wants_link("default.target", NODE).resolve() == unit_path.resolve()
    systemd_verify(unit_path)
    st = linux_login.status(entry=NODE)
    assert (st.installed, st.kind, st.notes) == (True, "systemd", ())
    assert linux_login.uninstall(run=Calls(), entry=NODE).changed
    assert tree(isolated_user_dirs) == service  # the service's entry alone is left
    assert not linux_login.status(entry=NODE).installed


def test_node_launch_agent_and_run_value_have_their_own_names(
    isolated_user_dirs: Path, tmp_path: Path
) -> None:
    calls = Calls({"launchctl print": 113})
    macos_login.install(LoginOptions(node=NODE_ARGS), run=calls)
    path = macos_login.agent_file(NODE)
    assert path.name == "org.gpen-watch.gpen-watch-node.plist"
    data = plistlib.loads(path.read_bytes())
    assert data["Label"] == "org.gpen-watch.gpen-watch-node"
    assert data["ProgramArguments"] == [sys.executable, *KEEPER]
    assert data["ProcessType"] == "Background"
    assert data["StandardErrorPath"] == str(paths.log_dir() / "launchd-gpen-watch-node.log")
    assert ["launchctl", "bootstrap", f"gui/{os.getuid()}", str(path)] in calls.calls
    assert not macos_login.agent_file().exists()  # the service's agent: not made
    calls = Calls()
    assert macos_login.uninstall(run=calls, entry=NODE).changed
    assert ["launchctl", "bootout", f"gui/{os.getuid()}/org.gpen-watch.gpen-watch-node"] in calls.calls
    assert not path.exists()

    key = DictRunKey({"gpen-watch": f"{sys.executable} -m gpen_watch run"})
    python = tmp_path / "python.exe"
    windows_login.install(LoginOptions(python=str(python), node=NODE_ARGS), key=key)
    assert key["gpen-watch-node"] == subprocess.list2cmdline([str(python), *KEEPER])
    assert windows_login.status(key, entry=NODE).installed
    assert windows_login.uninstall(key, entry=NODE).changed
    assert key == {"gpen-watch": f"{sys.executable} -m gpen_watch run"}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the CLI acts on this machine's platform")
def test_service_cli_installs_the_node_and_refuses_what_a_login_could_not_run(
    isolated_user_dirs: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(linux_login, "run_command", Calls())
    assert main(["service", "install", "--node", *NODE_ARGS]) == 0
    assert "this machine's cluster node starts at your next login" in capsys.readouterr().out
    assert main(["service", "status", "--node"]) == 0
    assert f"{sys.executable} {' '.join(KEEPER)}" in capsys.readouterr().out
    assert main(["service", "status"]) == 3  # the service's own entry is another one
    assert (
        f"cluster node starts at login too (`{program.command('service status --node')}`)"
        in capsys.readouterr().out
    )
    for bad, says in (
        (["status"], "give a `head` or `join` command"),
        (["join", "192.168.1.10:6379", "--stay"], "leave out --stay"),
        (["join", "192.168.1.10:6379", "--bogus"], "unknown argument(s) --bogus"),
        (["join"], "not a `gpen-watch cluster` command line"),
    ):
        assert main(["service", "install", "--node", *bad]) == 2, bad
        assert says in capsys.readouterr().err, bad
    for action in ("uninstall", "status"):
        assert main(["service", action, "--node", "join"]) == 2
        assert "takes --node alone" in capsys.readouterr().err
    assert main(["service", "uninstall", "--node"]) == 0
    assert "removed" in capsys.readouterr().out
    assert main(["service", "status", "--node"]) == 3
    assert "service install --node join HEAD:PORT" in capsys.readouterr().out
