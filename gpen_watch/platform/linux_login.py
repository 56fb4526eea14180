"""Start at login on Linux: an XDG autostart entry (default) or a systemd user unit (--systemd).

Autostart is the default because every desktop (GNOME, KDE, XFCE, Cinnamon, MATE, LXQt) runs
``~/.config/autostart`` entries inside the graphical session, with DISPLAY set, which the tray
needs. A systemd user unit only joins the graphical session on desktops that start
``graphical-session.target`` (GNOME, Plasma); headless machines use it with --no-tray and
``default.target``, which starts at the user's first login (or at boot with lingering enabled).

Only one of the two is installed at a time: installing one removes the other one gpen-watch made.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from pathlib import Path

import platformdirs

from gpen_watch.platform import resources
from gpen_watch.platform.login_common import (
    STALE,
    LoginOptions,
    LoginResult,
    LoginStatus,
    Runner,
    check_replaceable,
    is_ours,
    remove_if_ours,
    render,
    run_command,
    write_if_changed,
)

DESKTOP_NAME = "gpen-watch.desktop"
UNIT_NAME = "gpen-watch.service"
GRAPHICAL = "graphical-session.target"
HEADLESS = "default.target"

# Characters that make the desktop entry spec require an argument to be quoted.
_DESKTOP_RESERVED = set(" \t\n\"'\\><~|&;$*?#()`")
_SYSTEMD_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")


# --- where -------------------------------------------------------------------------------------


def _config_home() -> Path:
    # $XDG_CONFIG_HOME or ~/.config, read at call time so tests can redirect it.
    return Path(platformdirs.user_config_dir())


def autostart_file() -> Path:
    return _config_home() / "autostart" / DESKTOP_NAME


def unit_file() -> Path:
    return _config_home() / "systemd" / "user" / UNIT_NAME


def wants_link(target: str) -> Path:
    """The symlink `systemctl --user enable` makes for WantedBy=target."""
    return unit_file().parent / f"{target}.wants" / UNIT_NAME


# --- what --------------------------------------------------------------------------------------


def desktop_exec(argv: Sequence[str]) -> str:
    """An Exec= value per the desktop entry spec: quoting, then %-escaping, then string escaping."""
    words = []
    for arg in argv:
        if arg and not _DESKTOP_RESERVED.intersection(arg):
            word = arg
        else:
            word = '"' + re.sub(r'(["`$\\])', r"\\\1", arg) + '"'
        words.append(word.replace("%", "%%"))
    # Values of type string unescape \\ before the Exec quoting rules apply.
    return " ".join(words).replace("\\", "\\\\")


def systemd_exec(argv: Sequence[str]) -> str:
    """An ExecStart= value: %-specifiers and $-variables escaped, odd arguments double-quoted."""
    words = []
    for arg in argv:
        arg = arg.replace("%", "%%")
        if _SYSTEMD_SAFE.fullmatch(arg):
            words.append(arg)
        else:
            escaped = arg.replace("\\", "\\\\").replace('"', '\\"').replace("$", "$$")
            words.append(f'"{escaped}"')
    return " ".join(words)


def desktop_entry(options: LoginOptions) -> str:
    icon = resources.find("assets", "icon.png")
    return render(
        "linux/gpen-watch.desktop",
        exec=desktop_exec(options.command()),
        icon=str(icon) if icon else "applications-graphics",
    )


def unit(options: LoginOptions) -> str:
    if options.no_tray:
        deps, target = "", HEADLESS
    else:
        # PartOf: stopped with the graphical session, so it does not outlive the display it draws on.
        deps, target = f"PartOf={GRAPHICAL}\nAfter={GRAPHICAL}\n", GRAPHICAL
    return render(
        "linux/gpen-watch.service", exec=systemd_exec(options.command()), session_deps=deps, target=target
    )


# --- doing -------------------------------------------------------------------------------------


def install(options: LoginOptions, run: Runner | None = None) -> LoginResult:
    run = run or run_command  # looked up now, so tests can replace it
    result = LoginResult()
    if options.systemd:
        path = unit_file()
        check_replaceable(path)
        _remove_desktop(result)
        target = HEADLESS if options.no_tray else GRAPHICAL
        if write_if_changed(path, unit(options)):
            result.changed = True
            result.say(f"wrote {path}")
        other = wants_link(GRAPHICAL if options.no_tray else HEADLESS)
        if _is_our_link(other):
            other.unlink()
            _rmdir_if_empty(other.parent)
            result.changed = True
        if _link(wants_link(target), path):
            result.changed = True
            result.say(f"enabled for {target}")
        if result.changed:
            _daemon_reload(run, result)
        result.say(
            f"gpen-watch starts with {target} at your next login (now: systemctl --user start {UNIT_NAME})"
        )
    else:
        path = autostart_file()
        check_replaceable(path)
        _remove_systemd(result, run)
        if write_if_changed(path, desktop_entry(options)):
            result.changed = True
            result.say(f"wrote {path}")
        result.say("gpen-watch starts at your next login")
    if not result.changed:
        result.messages.insert(0, "already installed; nothing changed")
    return result


def uninstall(run: Runner | None = None) -> LoginResult:
    run = run or run_command  # looked up now, so tests can replace it
    result = LoginResult()
    _remove_desktop(result)
    _remove_systemd(result, run)
    if not result.changed and not result.messages:
        result.say("start at login was not installed")
    return result


def status() -> LoginStatus:
    desktop, unit_path = autostart_file(), unit_file()
    if is_ours(unit_path):
        links = [t for t in (GRAPHICAL, HEADLESS) if _is_our_link(wants_link(t))]
        notes = [] if links else [f"the unit is not enabled (no {GRAPHICAL}.wants or {HEADLESS}.wants link)"]
        if not _current(unit_path, [unit(LoginOptions(systemd=True, no_tray=n)) for n in (False, True)]):
            notes.append(STALE)
        return LoginStatus(bool(links), "systemd", str(unit_path), _key(unit_path, "ExecStart"), tuple(notes))
    if is_ours(desktop):
        fresh = [desktop_entry(LoginOptions(no_tray=n)) for n in (False, True)]
        stale = () if _current(desktop, fresh) else (STALE,)
        return LoginStatus(True, "xdg-autostart", str(desktop), _key(desktop, "Exec"), stale)
    return LoginStatus(False)


def enabled() -> bool:
    return is_ours(autostart_file()) or (
        is_ours(unit_file()) and any(_is_our_link(wants_link(t)) for t in (GRAPHICAL, HEADLESS))
    )


def _remove_desktop(result: LoginResult) -> None:
    remove_if_ours(autostart_file(), result)
    _rmdir_if_empty(autostart_file().parent)


def _remove_systemd(result: LoginResult, run: Runner) -> None:
    changed = False
    for target in (GRAPHICAL, HEADLESS):
        link = wants_link(target)
        if _is_our_link(link):
            link.unlink()
            changed = True
        _rmdir_if_empty(link.parent)
    if is_ours(unit_file()):
        changed = True
    remove_if_ours(unit_file(), result)
    # Install may have made these folders; empty ones are left by nobody else.
    _rmdir_if_empty(unit_file().parent)
    _rmdir_if_empty(unit_file().parent.parent)
    if changed:
        result.changed = True
        _daemon_reload(run, result)


def _link(link: Path, target: Path) -> bool:
    if _is_our_link(link):
        return False
    if link.exists() or link.is_symlink():
        link.unlink()  # a stale link to an older unit file under the same name
    link.parent.mkdir(parents=True, exist_ok=True)
    # Relative, like systemctl makes it, so the tree still works when $HOME moves.
    link.symlink_to(Path("..") / target.name)
    return True


def _is_our_link(link: Path) -> bool:
    return link.is_symlink() and link.resolve() == unit_file().resolve()


def _rmdir_if_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):
        folder.rmdir()


def _daemon_reload(run: Runner, result: LoginResult) -> None:
    """Tell a running systemd user manager about the change; without one it reads it at next login."""
    rc, out = run(["systemctl", "--user", "daemon-reload"])
    if rc != 0:
        result.say(
            f"note: systemctl --user daemon-reload failed ({out or rc}); "
            "the change applies at your next login"
        )


def _current(path: Path, fresh: list[str]) -> bool:
    try:
        return path.read_text(encoding="utf-8") in fresh
    except (OSError, UnicodeDecodeError):
        return False


def _key(path: Path, name: str) -> str | None:
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == name:
            return value.strip()
    return None
