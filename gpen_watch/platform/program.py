"""How this user runs gpen-watch: the command every hint names ("run `gpen-watch models fetch`").

A hint that says `gpen-watch` is wrong where the shell finds no `gpen-watch` (the README's install
leaves it in .venv/bin, and a venv that is not activated is not on PATH) or finds another one. So a
hint names the program the way this process was started:

- the plain name, when `gpen-watch` on PATH is this very program (a link to it counts);
- else the full path of the running program: the console script (sys.argv[0]), or the frozen
  bundle's executable;
- ``python -m gpen_watch`` when run that way, with the interpreter named as PATH finds it, or by its
  full path; the plain name where PATH's `gpen-watch` is this interpreter's own console script.

A launcher on PATH that starts this program by its path (the Debian package's /usr/bin/gpen-watch,
a shell script that execs /opt/gpen-watch/gpen-watch) counts as this program too. Everything is
read at each call, so a test or a child process sees its own.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

NAME = "gpen-watch"
PACKAGE = "gpen_watch"
# A launcher script is small; a file on PATH larger than this is no launcher of ours.
LAUNCHER_MAX_BYTES = 16_384

Which = Callable[[str], "str | None"]


def command(args: str = "") -> str:
    """``gpen-watch ARGS`` as this user can run it: "gpen-watch models fetch ParseNet", or
    "/home/me/gpen-watch/.venv/bin/gpen-watch models fetch ParseNet"."""
    program = program_name()
    return f"{program} {args}" if args else program


def program_name() -> str:
    """The program part of ``command``, for this process."""
    return program_for(
        sys.argv[0] if sys.argv else "",
        sys.executable,
        frozen=bool(getattr(sys, "frozen", False)),
        which=shutil.which,
    )


def program_for(argv0: str, executable: str, *, frozen: bool, which: Which) -> str:
    """``program_name`` for a process started as ``argv0`` by ``executable``; ``which`` finds a
    name on PATH (shutil.which)."""
    on_path = which(NAME)
    running = _running_program(argv0, executable, frozen, which)
    if running is None:  # python -m gpen_watch
        if on_path is not None and _same_file(Path(on_path).parent, Path(executable).parent):
            return NAME  # PATH finds this interpreter's own console script
        return f"{_python(executable, which)} -m {PACKAGE}"
    if on_path is not None and (_same_file(on_path, running) or _launches(Path(on_path), running)):
        return NAME
    return _quote(str(running))


def _running_program(argv0: str, executable: str, frozen: bool, which: Which) -> Path | None:
    """The program file this process runs as; None for ``python -m gpen_watch``."""
    if frozen:
        return Path(executable).absolute()
    started = Path(argv0)
    if started.stem == NAME:  # the console script (gpen-watch, gpen-watch.exe)
        if started.parent == Path() and not argv0.startswith("."):
            found = which(argv0)  # started by name alone: where PATH found it
            return Path(found) if found else started
        return started.absolute()
    if started.name == "__main__.py" and started.parent.name == PACKAGE:
        return None
    # Started some other way (a test runner, ``python -c``, a multiprocessing child): this
    # interpreter's console script where there is one, else the plain name.
    beside = Path(executable).parent / (NAME + (".exe" if os.name == "nt" else ""))
    return beside.absolute() if beside.is_file() else Path(NAME)


def _launches(launcher: Path, running: Path) -> bool:
    """Whether ``launcher`` is a script that starts ``running`` by its path (a package's wrapper)."""
    try:
        if launcher.stat().st_size > LAUNCHER_MAX_BYTES:
            return False
        text = launcher.read_bytes()
    except OSError:
        return False
    if not text.startswith(b"#!"):
        return False
    path = os.fsencode(str(running))
    return re.search(rb"(?<![\w./-])" + re.escape(path) + rb"(?![\w./-])", text) is not None


def _python(executable: str, which: Which) -> str:
    """This interpreter as the user can name it: "python3" where PATH finds this very file (not
    another Python a link leads to: a venv's python links to the system's), else its full path."""
    here = Path(executable).absolute()
    for name in ("python3", "python"):
        found = which(name)
        if found is not None and Path(found).absolute().parent == here.parent and _same_file(found, here):
            return name
    return _quote(str(here))


def _same_file(a: str | Path, b: str | Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


# Characters a shell takes as part of a word (and, on Windows, the path separator).
_PLAIN = re.compile(r"[\w@%+=:,./\\-]+" if os.name == "nt" else r"[\w@%+=:,./-]+")


def _quote(text: str) -> str:
    """``text`` as one word in the user's shell."""
    if _PLAIN.fullmatch(text):
        return text
    return f'"{text}"' if os.name == "nt" else shlex.quote(text)
