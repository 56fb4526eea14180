"""Start at login on Linux: an XDG autostart entry (default) or a systemd user unit (--systemd).

Autostart is the default because every desktop (GNOME, KDE, XFCE, Cinnamon, MATE, LXQt) runs
``~/.config/autostart`` entries inside the graphical session, with DISPLAY set, which the tray
needs. A systemd user unit only joins the graphical session on desktops that start
``graphical-session.target`` (GNOME, Plasma); headless machines use it with --no-tray and
``default.target``, which starts at the user's first login (or at boot with lingering enabled).

Only one of the two is installed at a time: installing one removes the other one gpen-watch made.
The cluster node (``--node``) has its own entry beside the service's, under its own name; its unit
starts at default.target, as it needs no display.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from pathlib import Path

import platformdirs

from gpen_watch.platform import resources
from gpen_watch.platform.login_common import (
    SERVICE,
    LoginEntry,
    LoginOptions,
    LoginResult,
    LoginStatus,
    Runner,
    check_replaceable,
    is_ours,
    remove_if_ours,
    render,
    run_command,
    stale_note,
    write_if_changed,
)

GRAPHICAL = "graphical-session.target"
HEADLESS = "default.target"

# Characters that make the desktop entry spec require an argument to be quoted.
_DESKTOP_RESERVED = set(" \t\n\"'\\><~|&;$*?#()`")
_SYSTEMD_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")


# --- where -------------------------------------------------------------------------------------


def _config_home() -> Path:
    # $XDG_CONFIG_HOME or ~/.config, read at call time so tests can redirect it.
    return Path(platformdirs.user_config_dir())


def autostart_file(entry: LoginEntry = SERVICE) -> Path:
    return _config_home() / "autostart" / f"{entry.name}.desktop"


def unit_file(entry: LoginEntry = SERVICE) -> Path:
    return _config_home() / "systemd" / "user" / f"{entry.name}.service"


def wants_link(target: str, entry: LoginEntry = SERVICE) -> Path:
    """The symlink `systemctl --user enable` makes for WantedBy=target."""
    return unit_file(entry).parent / f"{target}.wants" / f"{entry.name}.service"


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
    icon = resources.path_on_disk(*resources.ICON)
    return render(
        f"linux/{options.entry.name}.desktop",
        exec=desktop_exec(options.command()),
        icon=str(icon) if icon else "applications-graphics",
    )


def unit_target(options: LoginOptions) -> str:
    return HEADLESS if options.no_tray or options.node else GRAPHICAL


def unit(options: LoginOptions) -> str:
    target = unit_target(options)
    # PartOf: stopped with the graphical session, so it does not outlive the display it draws on.
    deps = f"PartOf={GRAPHICAL}\nAfter={GRAPHICAL}\n" if target == GRAPHICAL else ""
    return render(
        f"linux/{options.entry.name}.service",
        exec=systemd_exec(options.command()),
        session_deps=deps,
        target=target,
    )


# --- doing -------------------------------------------------------------------------------------


def install(options: LoginOptions, run: Runner | None = None) -> LoginResult:
    run = run or run_command  # looked up now, so tests can replace it
    result = LoginResult()
    entry = options.entry
    if options.systemd:
        path = unit_file(entry)
        check_replaceable(path)
        _remove_desktop(result, entry)
        target = unit_target(options)
        if write_if_changed(path, unit(options)):
            result.changed = True
            result.say(f"wrote {path}")
        other = wants_link(GRAPHICAL if target == HEADLESS else HEADLESS, entry)
        if _is_our_link(other, entry):
            other.unlink()
            _rmdir_if_empty(other.parent)
            result.changed = True
        if _link(wants_link(target, entry), path, entry):
            result.changed = True
            result.say(f"enabled for {target}")
        if result.changed:
            _daemon_reload(run, result)
        result.say(
            f"{entry.what} starts with {target} at your next login (now: systemctl --user start {path.name})"
        )
    else:
        path = autostart_file(entry)
        check_replaceable(path)
        _remove_systemd(result, run, entry)
        if write_if_changed(path, desktop_entry(options)):
            result.changed = True
            result.say(f"wrote {path}")
        result.say(f"{entry.what} starts at your next login")
    if not result.changed:
        result.messages.insert(0, "already installed; nothing changed")
    return result


def uninstall(run: Runner | None = None, *, entry: LoginEntry = SERVICE) -> LoginResult:
    run = run or run_command  # looked up now, so tests can replace it
    result = LoginResult()
    _remove_desktop(result, entry)
    _remove_systemd(result, run, entry)
    if not result.changed and not result.messages:
        result.say("start at login was not installed")
    return result


def status(*, entry: LoginEntry = SERVICE) -> LoginStatus:
    desktop, unit_path = autostart_file(entry), unit_file(entry)
    # The node's command is the user's own (`--node ...`): only the service's is known to compare.
    known = entry == SERVICE
    if is_ours(unit_path):
        links = [t for t in (GRAPHICAL, HEADLESS) if _is_our_link(wants_link(t, entry), entry)]
        notes = [] if links else [f"the unit is not enabled (no {GRAPHICAL}.wants or {HEADLESS}.wants link)"]
        fresh = [unit(LoginOptions(systemd=True, no_tray=n)) for n in (False, True)]
        if known and not _current(unit_path, fresh):
            notes.append(stale_note())
        return LoginStatus(bool(links), "systemd", str(unit_path), _key(unit_path, "ExecStart"), tuple(notes))
    if is_ours(desktop):
        fresh = [desktop_entry(LoginOptions(no_tray=n)) for n in (False, True)]
        stale = () if not known or _current(desktop, fresh) else (stale_note(),)
        return LoginStatus(True, "xdg-autostart", str(desktop), _key(desktop, "Exec"), stale)
    return LoginStatus(False)


def enabled(*, entry: LoginEntry = SERVICE) -> bool:
    return is_ours(autostart_file(entry)) or (
        is_ours(unit_file(entry))
        and any(_is_our_link(wants_link(t, entry), entry) for t in (GRAPHICAL, HEADLESS))
    )


def _remove_desktop(result: LoginResult, entry: LoginEntry) -> None:
    remove_if_ours(autostart_file(entry), result)
    _rmdir_if_empty(autostart_file(entry).parent)


def _remove_systemd(result: LoginResult, run: Runner, entry: LoginEntry) -> None:
    changed = False
    path = unit_file(entry)
    for target in (GRAPHICAL, HEADLESS):
        link = wants_link(target, entry)
        if _is_our_link(link, entry):
            link.unlink()
            changed = True
        _rmdir_if_empty(link.parent)
    if is_ours(path):
        changed = True
    remove_if_ours(path, result)
    # Install may have made these folders; empty ones are left by nobody else.
    _rmdir_if_empty(path.parent)
    _rmdir_if_empty(path.parent.parent)
    if changed:
        result.changed = True
        _daemon_reload(run, result)


def _link(link: Path, target: Path, entry: LoginEntry) -> bool:
    if _is_our_link(link, entry):
        return False
    if link.exists() or link.is_symlink():
        link.unlink()  # a stale link to an older unit file under the same name
    link.parent.mkdir(parents=True, exist_ok=True)
    # Relative, like systemctl makes it, so the tree still works when $HOME moves.
    link.symlink_to(Path("..") / target.name)
    return True


def _is_our_link(link: Path, entry: LoginEntry) -> bool:
    return link.is_symlink() and link.resolve() == unit_file(entry).resolve()


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
