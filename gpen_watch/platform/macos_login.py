"""Start at login on macOS: a LaunchAgent in ~/Library/LaunchAgents, loaded with launchctl.

launchd starts every agent in that folder at login (RunAtLoad). KeepAlive with SuccessfulExit
false restarts gpen-watch after a crash, while Quit (exit status 0) stays quit. The cluster node
(``--node``) has an agent of its own beside the service's.
"""

from __future__ import annotations

import os
from pathlib import Path
from xml.sax.saxutils import escape

from gpen_watch.platform import paths
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


def label(entry: LoginEntry = SERVICE) -> str:
    return f"org.gpen-watch.{entry.name}"


LABEL = label(SERVICE)


def agent_file(entry: LoginEntry = SERVICE) -> Path:
    return Path.home() / "Library" / "LaunchAgents" / f"{label(entry)}.plist"


def _domain() -> str:
    return f"gui/{os.getuid()}"  # type: ignore[attr-defined,unused-ignore]  # POSIX only


def plist(options: LoginOptions) -> str:
    arguments = "\n".join(f"\t\t<string>{escape(a)}</string>" for a in options.command())
    # Where launchd sends output the service's own log cannot catch (a crash before logging starts).
    entry = options.entry
    log = paths.log_dir() / ("launchd.log" if entry == SERVICE else f"launchd-{entry.name}.log")
    return render(f"macos/{entry.name}.plist", label=label(entry), arguments=arguments, log=escape(str(log)))


def install(options: LoginOptions, run: Runner | None = None) -> LoginResult:
    run = run or run_command  # looked up now, so tests can replace it
    result = LoginResult()
    entry = options.entry
    job = f"{_domain()}/{label(entry)}"
    path = agent_file(entry)
    check_replaceable(path)
    if write_if_changed(path, plist(options)):
        result.changed = True
        result.say(f"wrote {path}")
    loaded = _loaded(run, entry)
    if options.load_now and (result.changed or not loaded):
        if loaded:
            run(["launchctl", "bootout", job])  # reload the changed file
        rc, out = run(["launchctl", "bootstrap", _domain(), str(path)])
        if rc == 0:
            result.changed = True
            result.say(f"loaded with launchctl: {entry.what} is starting")
        else:
            result.say(f"note: launchctl bootstrap failed ({out or rc}); it starts at your next login")
    else:
        result.say(f"{entry.what} starts at your next login")
    if not result.changed:
        result.messages.insert(0, "already installed; nothing changed")
    return result


def uninstall(run: Runner | None = None, *, entry: LoginEntry = SERVICE) -> LoginResult:
    run = run or run_command  # looked up now, so tests can replace it
    result = LoginResult()
    path = agent_file(entry)
    if not path.exists():
        result.say("start at login was not installed")
        return result
    if not is_ours(path):
        remove_if_ours(path, result)  # says it was left alone
        return result
    # bootout stops the job. When that job is this very process (the tray's toggle in an instance
    # launchd started), removing the file is enough: it is not started again at the next login.
    if _loaded(run, entry) and os.environ.get("XPC_SERVICE_NAME") != label(entry):
        rc, out = run(["launchctl", "bootout", f"{_domain()}/{label(entry)}"])
        if rc == 0:
            result.say("unloaded from launchd")
        else:
            result.say(f"note: launchctl bootout failed ({out or rc})")
    remove_if_ours(path, result)
    return result


def status(run: Runner | None = None, *, entry: LoginEntry = SERVICE) -> LoginStatus:
    run = run or run_command  # looked up now, so tests can replace it
    path = agent_file(entry)
    if not is_ours(path):
        return LoginStatus(False)
    import plistlib

    try:
        data = plistlib.loads(path.read_bytes())
        command = " ".join(data.get("ProgramArguments", []))
    except Exception as exc:  # noqa: BLE001 - a damaged file is still ours to report
        command = f"(unreadable: {exc})"
    notes = [] if _loaded(run, entry) else ["not loaded in launchd now; it loads at your next login"]
    # The node's command is the user's own (`--node ...`): only the service's is known to compare.
    fresh = [plist(LoginOptions(no_tray=n)) for n in (False, True)]
    if entry == SERVICE and path.read_text(encoding="utf-8", errors="replace") not in fresh:
        notes.append(stale_note())
    return LoginStatus(True, "launchagent", str(path), command, tuple(notes))


def enabled(*, entry: LoginEntry = SERVICE) -> bool:
    return is_ours(agent_file(entry))


def _loaded(run: Runner, entry: LoginEntry) -> bool:
    rc, _ = run(["launchctl", "print", f"{_domain()}/{label(entry)}"])
    return rc == 0
