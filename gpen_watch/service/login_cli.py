"""`gpen-watch service install | uninstall | status`: start gpen-watch at login, or stop doing so.

Linux: an XDG autostart entry (default) or a systemd user unit (--systemd); macOS: a LaunchAgent;
Windows: the HKCU Run key. The platform modules in gpen_watch.platform do the work.
"""

from __future__ import annotations

import argparse
import sys

from gpen_watch import platform
from gpen_watch.platform.login_common import LoginOptions, LoginStatus


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    parser.add_argument(
        "action",
        choices=("install", "uninstall", "status"),
        help="install or remove start at login, or show what is installed",
    )
    parser.add_argument(
        "--systemd", action="store_true", help="Linux: a systemd user unit instead of an XDG autostart entry"
    )
    parser.add_argument(
        "--no-tray",
        action="store_true",
        help="start headless (`gpen-watch run --no-tray`); with --systemd: at default.target",
    )


def run(args: argparse.Namespace) -> int:
    plat = platform.current()
    if args.action == "status":
        status = plat.login_status()
        print(format_status(status))
        return 0 if status.installed else 3  # like `systemctl status` for a unit that is not there
    if args.action == "uninstall":
        result = plat.uninstall_login()
    else:
        if args.systemd and platform.module_name() != "linux":
            print("gpen-watch service: --systemd is for Linux only", file=sys.stderr)
            return 2
        # Loading the macOS agent starts it: not while an instance is already running.
        result = plat.install_login(
            LoginOptions(systemd=args.systemd, no_tray=args.no_tray, load_now=not _service_running())
        )
    for line in result.messages:
        print(line)
    return 0


def format_status(status: LoginStatus) -> str:
    if not status.installed and status.kind is None:
        return "start at login: not installed (install with `gpen-watch service install`)"
    lines = [
        f"start at login: {'installed' if status.installed else 'NOT ENABLED'} ({status.kind})",
        f"  where: {status.location}",
        f"  runs:  {status.command}",
    ]
    lines += [f"  note: {n}" for n in status.notes]
    return "\n".join(lines)


def _service_running() -> bool:
    from gpen_watch.service import control

    try:
        control.request("ping", timeout=2.0)
    except control.ControlError:
        return False
    except Exception:  # noqa: BLE001
        return False
    return True
