"""Send to gpen-watch from the Linux file managers, each entry run the way its file manager runs it,
against a real service (the stand-in restorer): Nautilus's script with its NAUTILUS_SCRIPT_*
variables in the photos' folder, Dolphin's service menu's Exec line with %F, Thunar's custom action
with %F quoted and parsed as Thunar does. Each photo's result comes back beside it, and a desktop
notice (a stand-in notify-send) says so. No file manager itself runs here."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from dashboard_client import Dashboard, served_dashboard

REPO = Path(__file__).resolve().parents[1]
SEND_TO = REPO / "packaging" / "linux-send-to"

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def dash(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    with served_dashboard(tmp_path_factory.mktemp("send-to")) as d:
        yield d


@pytest.fixture
def desktop(tmp_path: Path, dash: Dashboard) -> dict[str, str]:
    """The environment a file manager's child gets: the user's folders (the service's), a PATH with
    gpen-watch and a notify-send that writes each notice to a file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    program = bin_dir / "gpen-watch"
    program.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m gpen_watch "$@"\n')
    notify = bin_dir / "notify-send"
    notify.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >>"{tmp_path / "notices.txt"}"\n')
    for p in (program, notify):
        p.chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    env = dict(dash.svc.env)
    env.update(
        PATH=f"{bin_dir}{os.pathsep}/usr/bin:/bin",
        HOME=str(home),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_CONFIG_HOME=str(home / ".config"),
    )
    env.pop("GPEN_WATCH", None)
    return env


def photos(folder: Path, *names: str) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    made = []
    for name in names:
        p = folder / name
        p.write_bytes(b"\xff\xd8 " + name.encode())
        made.append(p)
    return made


def assert_restored_beside(paths: list[Path]) -> None:
    for p in paths:
        result = p.with_name(f"{p.stem}.restored{p.suffix}")
        assert result.read_bytes() == p.read_bytes(), result  # the stand-in gives the photo back as it was


def install(env: dict[str, str]) -> str:
    run = subprocess.run(
        ["sh", str(SEND_TO / "install.sh")], env=env, capture_output=True, text=True, timeout=30, check=True
    )
    return run.stdout


def test_nautilus_runs_its_script_with_the_selection_in_its_variables(
    dash: Dashboard, tmp_path: Path, desktop: dict[str, str]
) -> None:
    install(desktop)
    script = Path(desktop["XDG_DATA_HOME"]) / "nautilus" / "scripts" / "Send to gpen-watch"
    assert os.access(script, os.X_OK)
    folder = tmp_path / "Holiday 2026"
    chosen = photos(folder, "beach.jpg", "dinner party.jpg")
    env = {
        **desktop,
        "NAUTILUS_SCRIPT_SELECTED_FILE_PATHS": "".join(f"{p}\n" for p in chosen),
        "NAUTILUS_SCRIPT_SELECTED_URIS": "".join(f"{p.as_uri()}\n" for p in chosen),
        "NAUTILUS_SCRIPT_CURRENT_URI": folder.as_uri(),
    }
    # Nautilus runs a script in the folder shown, the selected names as its arguments.
    run = subprocess.run(
        [str(script), *(p.name for p in chosen)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert_restored_beside(chosen)
    assert "gpen-watch: restored restored 2 of 2 photos" in (tmp_path / "notices.txt").read_text()


def test_nautilus_selection_from_its_variable_alone(
    dash: Dashboard, tmp_path: Path, desktop: dict[str, str]
) -> None:
    chosen = photos(tmp_path / "scans", "grandma.jpg")
    env = {**desktop, "GPEN_WATCH": str(Path(desktop["PATH"].split(os.pathsep)[0]) / "gpen-watch")}
    env["NAUTILUS_SCRIPT_SELECTED_FILE_PATHS"] = f"{chosen[0]}\n"
    run = subprocess.run(
        [str(SEND_TO / "gpen-watch-send-to")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert_restored_beside(chosen)


def test_dolphin_runs_its_service_menus_exec_line_with_the_files(
    dash: Dashboard, tmp_path: Path, desktop: dict[str, str]
) -> None:
    install(desktop)
    menu = Path(desktop["XDG_DATA_HOME"]) / "kio" / "servicemenus" / "gpen-watch-send-to.desktop"
    text = menu.read_text()
    assert "MimeType=image/*;inode/directory;" in text and os.access(menu, os.X_OK)
    exec_line = re.search(r"^Exec=(.*)$", text, re.M)
    assert exec_line is not None
    chosen = photos(tmp_path / "shoot", "a.jpg", "b.png")
    folder = photos(tmp_path / "shoot" / "more", "c.jpg")
    # KIO puts each selected path where %F is, one argument each.
    argv = [
        a
        for part in shlex.split(exec_line[1])
        for a in ([str(p) for p in [*chosen, folder[0].parent]] if part == "%F" else [part])
    ]
    run = subprocess.run(argv, env=desktop, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert_restored_beside([*chosen, *folder])


def test_thunar_runs_its_custom_action_with_the_files_quoted(
    dash: Dashboard, tmp_path: Path, desktop: dict[str, str]
) -> None:
    config = Path(desktop["XDG_CONFIG_HOME"]) / "Thunar"
    config.mkdir(parents=True)
    (config / "uca.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n<actions>\n<action>\n\t<name>Open Terminal Here</name>\n'
        "\t<unique-id>1-1</unique-id>\n\t<command>exo-open --launch TerminalEmulator</command>\n</action>\n</actions>\n"
    )
    install(desktop)
    install(desktop)  # a second install replaces its action, never adds another
    uca = (config / "uca.xml").read_text()
    assert uca.count("gpen-watch-send-to</unique-id>") == 1 and "Open Terminal Here" in uca
    command = re.search(r"<command>(.*gpen-watch-send-to.*)</command>", uca)
    assert command is not None
    chosen = photos(tmp_path / "it's mine", "o'brien.jpg", "two words.jpg")
    # Thunar quotes each path into %F, then parses the line into arguments as a shell would.
    line = command[1].replace("%F", " ".join(shlex.quote(str(p)) for p in chosen))
    run = subprocess.run(shlex.split(line), env=desktop, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert_restored_beside(chosen)


def test_uninstall_removes_exactly_what_install_made(tmp_path: Path, desktop: dict[str, str]) -> None:
    install(desktop)
    subprocess.run(
        ["sh", str(SEND_TO / "install.sh"), "--uninstall"],
        env=desktop,
        check=True,
        capture_output=True,
        timeout=30,
    )
    data, config = Path(desktop["XDG_DATA_HOME"]), Path(desktop["XDG_CONFIG_HOME"])
    left = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "home").rglob("*") if p.is_file())
    assert left == ["home/.config/Thunar/uca.xml"]
    assert "gpen-watch" not in (config / "Thunar" / "uca.xml").read_text()
    assert not (data / "nautilus" / "scripts" / "Send to gpen-watch").exists()


def test_a_send_with_no_service_running_says_so(tmp_path: Path, desktop: dict[str, str]) -> None:
    env = {
        **desktop,
        "XDG_RUNTIME_DIR": str(tmp_path / "no-service"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }
    (tmp_path / "no-service").mkdir(mode=0o700)
    chosen = photos(tmp_path / "p", "x.jpg")
    run = subprocess.run(
        [str(SEND_TO / "gpen-watch-send-to"), str(chosen[0])],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 3
    assert "gpen-watch is not running" in (tmp_path / "notices.txt").read_text()
    assert not chosen[0].with_name("x.restored.jpg").exists()


def test_the_macos_quick_actions_shell_script_sends_its_arguments(
    dash: Dashboard, tmp_path: Path, desktop: dict[str, str]
) -> None:
    """The Quick Action's own script (its document.wflow), its notice stood in for: macOS itself,
    Automator and the Finder never ran it."""
    import plistlib

    wflow = REPO / "packaging" / "macos" / "Send to gpen-watch.workflow" / "Contents" / "document.wflow"
    action = plistlib.loads(wflow.read_bytes())["actions"][0]["action"]
    assert action["ActionParameters"]["inputMethod"] == 1  # the Finder's selection as arguments
    script = action["ActionParameters"]["COMMAND_STRING"]
    osascript = tmp_path / "osascript"
    osascript.write_text(f'#!/bin/sh\ncat >/dev/null; printf "%s\\n" "$*" >>"{tmp_path / "notices.txt"}"\n')
    osascript.chmod(0o755)
    (tmp_path / "quick-action.sh").write_text(script.replace("/usr/bin/osascript", str(osascript)))
    chosen = photos(tmp_path / "Pictures", "mac.jpg")
    run = subprocess.run(
        ["/bin/sh", str(tmp_path / "quick-action.sh"), *map(str, chosen)],
        env=desktop,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert_restored_beside(chosen)
    assert "- gpen-watch: restored restored 1 of 1 photo" in (tmp_path / "notices.txt").read_text()
