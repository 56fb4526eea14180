"""Every hint names the command the way this user can run it (gpen_watch.platform.program): the
plain `gpen-watch` only where PATH finds this very program, else its full path, or `python -m
gpen_watch` when started that way."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpen_watch.platform import program

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX paths and scripts")


def script(path: Path, text: str = "#!/usr/bin/python3\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def finder(**found: Path | None) -> program.Which:
    """A stand-in for shutil.which: the names given, nothing else."""
    return lambda name: (
        None if found.get(name.replace("-", "_")) is None else str(found[name.replace("-", "_")])
    )


def test_the_console_script_is_named_plainly_only_where_path_finds_it(tmp_path: Path) -> None:
    venv_bin = tmp_path / "proj" / ".venv" / "bin"
    mine = script(venv_bin / "gpen-watch")
    python = script(venv_bin / "python")
    other = script(tmp_path / "usr" / "bin" / "gpen-watch")

    def name(which: program.Which, argv0: str = str(mine)) -> str:
        return program.program_for(argv0, str(python), frozen=False, which=which)

    assert name(finder(gpen_watch=mine)) == "gpen-watch"
    # The README's install: the venv is not activated, so PATH finds no gpen-watch at all.
    assert name(finder()) == str(mine)
    # PATH finds another gpen-watch (an older install): the hint must not send the user there.
    assert name(finder(gpen_watch=other)) == str(mine)
    # A link on PATH to this very program is this program.
    link = tmp_path / "bin" / "gpen-watch"
    link.parent.mkdir()
    link.symlink_to(mine)
    assert name(finder(gpen_watch=link)) == "gpen-watch"


def test_a_relative_start_is_named_by_its_full_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = script(tmp_path / ".venv" / "bin" / "gpen-watch")
    monkeypatch.chdir(tmp_path)
    named = program.program_for(".venv/bin/gpen-watch", "/usr/bin/python3", frozen=False, which=finder())
    assert named == str(mine)
    assert program.program_for(
        "./.venv/bin/gpen-watch", "/usr/bin/python3", frozen=False, which=finder()
    ) == str(mine)


def test_python_dash_m_is_named_as_it_was_run(tmp_path: Path) -> None:
    venv_bin = tmp_path / "venv" / "bin"
    system_python = script(tmp_path / "usr" / "bin" / "python3")
    python = venv_bin / "python"
    venv_bin.mkdir(parents=True)
    python.symlink_to(system_python)  # as a venv's python is
    main = str(tmp_path / "site-packages" / "gpen_watch" / "__main__.py")

    def name(which: program.Which) -> str:
        return program.program_for(main, str(python), frozen=False, which=which)

    # PATH's python3 is the system's, which the venv's links to: another environment, without
    # gpen-watch. The interpreter is named by its path.
    assert name(finder(python3=system_python)) == f"{python} -m gpen_watch"
    # An activated venv: its python3 is this interpreter.
    python3 = venv_bin / "python3"
    python3.symlink_to(system_python)
    assert name(finder(python3=python3)) == "python3 -m gpen_watch"
    assert name(finder(python=python)) == "python -m gpen_watch"
    # PATH finds this interpreter's own console script: the plain name runs the same program.
    assert name(finder(gpen_watch=script(venv_bin / "gpen-watch"), python=python)) == "gpen-watch"


def test_a_frozen_program_and_a_launcher_that_starts_it(tmp_path: Path) -> None:
    bundle = script(tmp_path / "opt" / "gpen-watch" / "gpen-watch", "\x7fELF")

    def name(which: program.Which) -> str:
        return program.program_for(str(bundle), str(bundle), frozen=True, which=which)

    assert name(finder()) == str(bundle)
    # The package's /usr/bin/gpen-watch: a script that execs the bundle by its path.
    launcher = script(
        tmp_path / "usr" / "bin" / "gpen-watch", f'#!/bin/sh\nprogram={bundle}\nexec "$program" "$@"\n'
    )
    assert name(finder(gpen_watch=launcher)) == "gpen-watch"
    # One that starts another program, whose path merely begins with this one's, is not this one.
    elsewhere = script(tmp_path / "bin" / "gpen-watch", f'#!/bin/sh\nexec {bundle}-old "$@"\n')
    assert name(finder(gpen_watch=elsewhere)) == str(bundle)


def test_a_path_with_a_space_is_quoted_for_the_shell(tmp_path: Path) -> None:
    mine = script(tmp_path / "My Photos" / ".venv" / "bin" / "gpen-watch")
    named = program.program_for(str(mine), "/usr/bin/python3", frozen=False, which=finder())
    assert named == f"'{mine}'"
    assert program.command("models fetch").endswith(" models fetch")


def test_the_cli_names_itself_by_its_path_when_path_does_not_find_it(tmp_path: Path) -> None:
    """`gpen-watch models path ParseNet` with no ParseNet file says how to fetch it: through the
    venv's full path when the venv is not on PATH, plainly when it is."""
    script_path = Path(sys.executable).parent / "gpen-watch"
    if not script_path.is_file():
        pytest.skip("no gpen-watch console script beside this interpreter")
    env = {
        **os.environ,
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "GPEN_WATCH_MODEL_DIR": "",
    }
    bare = {**env, "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [str(script_path), "models", "path", "ParseNet"], capture_output=True, text=True, env=bare, timeout=60
    )
    assert done.returncode == 2
    assert f"`{script_path} models fetch ParseNet`" in done.stderr, done.stderr
    on_path = {**env, "PATH": f"{script_path.parent}:/usr/bin:/bin"}
    done = subprocess.run(
        ["gpen-watch", "models", "path", "ParseNet"], capture_output=True, text=True, env=on_path, timeout=60
    )
    assert "`gpen-watch models fetch ParseNet`" in done.stderr, done.stderr
