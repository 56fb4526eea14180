"""Pieces every login backend shares: the options, the results, the command it runs, templates.

Start-at-login files are generated from templates in ``gpen_watch/data/login/`` (package data) with
the absolute path of the interpreter running now, so a login starts the same environment (venv,
conda, pipx) the user installed from, whatever PATH the login session has.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from string import Template

from gpen_watch.base.errors import GpenWatchError
from gpen_watch.base.fsutil import write_text_atomic
from gpen_watch.platform import program, resources

# Written into every file install makes; uninstall removes only files that carry it, so a file the
# user wrote by hand under the same name is never deleted.
MARKER = "Written by `gpen-watch service install`; `gpen-watch service uninstall` removes it."


def stale_note() -> str:
    """A status note for a login file that differs from what install would write now."""
    return (
        "written for another Python or gpen-watch version than this one; "
        f"`{program.command('service install')}` brings it up to date"
    )


# (exit status, combined output) of an external command; tests pass a fake.
Runner = Callable[[Sequence[str]], tuple[int, str]]


class LoginError(GpenWatchError):
    """Start at login cannot be installed or removed (the message says why and what to do)."""


@dataclass(frozen=True)
class LoginEntry:
    """One thing started at login, with files (unit, autostart entry, agent, Run value) of its own."""

    name: str  # their file name's stem, launchd label's end and Run value's name
    what: str  # what the user reads it as, in messages
    signature: str  # in a Windows Run value that is gpen-watch's


# The service with its tray (`gpen-watch run`), and the Ray node that keeps this machine in the
# studio's cluster (`gpen-watch cluster head|join --stay`, gpen_watch.cluster.stay).
SERVICE = LoginEntry("gpen-watch", "gpen-watch", "-m gpen_watch run")
NODE = LoginEntry("gpen-watch-node", "this machine's cluster node", "-m gpen_watch cluster")


@dataclass(frozen=True)
class LoginOptions:
    # Linux only: a systemd user unit instead of an XDG autostart entry.
    systemd: bool = False
    # Run headless (`gpen-watch run --no-tray`): for servers and sessions without a tray.
    no_tray: bool = False
    python: str = field(default_factory=lambda: sys.executable)
    # A frozen program (the one-folder bundle): ``python`` is gpen-watch itself, not an interpreter.
    frozen: bool = field(default_factory=lambda: bool(getattr(sys, "frozen", False)))
    # macOS: load the agent with launchctl now (which starts it). The tray passes False: it is
    # the running instance, and a second one would only find the lock taken.
    load_now: bool = True
    # The cluster node's entry instead of the service's: `gpen-watch cluster` arguments
    # (``head ...`` or ``join ...``), run with --stay.
    node: tuple[str, ...] = ()

    @property
    def entry(self) -> LoginEntry:
        return NODE if self.node else SERVICE

    def command(self) -> list[str]:
        """What login runs: this interpreter, as a module, so no console script or PATH is needed
        (or, in a frozen program, the program itself)."""
        argv = [str(Path(self.python).absolute())]
        if not self.frozen:
            argv += ["-m", "gpen_watch"]
        if self.node:
            return [*argv, "cluster", *self.node, "--stay"]
        argv.append("run")
        if self.no_tray:
            argv.append("--no-tray")
        return argv


@dataclass
class LoginResult:
    changed: bool = False
    messages: list[str] = field(default_factory=list)

    def say(self, message: str) -> None:
        self.messages.append(message)


@dataclass(frozen=True)
class LoginStatus:
    installed: bool
    kind: str | None = None  # "xdg-autostart", "systemd", "launchagent", "run-key"
    location: str | None = None  # file, or registry value
    command: str | None = None  # what it runs, as written there
    notes: tuple[str, ...] = ()


def render(template: str, **values: str) -> str:
    """Fill ``data/login/<template>`` (string.Template ${names}; a missing name is an error)."""
    text = resources.require("login", *template.split("/")).read_text(encoding="utf-8")
    return Template(text).substitute(marker=MARKER, **values)


def write_if_changed(path: Path, text: str) -> bool:
    """Write ``text`` atomically; False when the file already says exactly that (install twice)."""
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError):
        pass  # unreadable: replace it below (only ever called on files that are ours)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, text, mode=0o644)
    return True


def is_ours(path: Path) -> bool:
    try:
        return MARKER in path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def check_replaceable(path: Path) -> None:
    """Refuse to overwrite a file of the same name that gpen-watch did not write."""
    if path.exists() and not is_ours(path):
        raise LoginError(f"{path} exists and was not written by gpen-watch; move it away first")


def remove_if_ours(path: Path, result: LoginResult) -> None:
    if not path.exists():
        return
    if not is_ours(path):
        result.say(f"left {path} alone: it was not written by gpen-watch")
        return
    path.unlink()
    result.changed = True
    result.say(f"removed {path}")


def run_command(argv: Sequence[str]) -> tuple[int, str]:
    """Run a short system command (systemctl, launchctl); never raises, 127 when it is missing."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        return 127, f"{argv[0]}: not found"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 1, str(exc)
    return done.returncode, (done.stdout + done.stderr).strip()
