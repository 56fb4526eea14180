"""`gpen-watch service install | uninstall | status`: start gpen-watch at login, or stop doing so.

Linux: an XDG autostart entry (default) or a systemd user unit (--systemd); macOS: a LaunchAgent;
Windows: the HKCU Run key. The platform modules in gpen_watch.platform do the work.

``--node head|join ...`` does the same for this machine's Ray cluster node instead of the service:
an entry of its own that runs `gpen-watch cluster head|join ... --stay` (gpen_watch.cluster.stay),
so the machine is back in the cluster after its own restart or its head's.
"""

from __future__ import annotations

import argparse
import sys

from gpen_watch import platform
from gpen_watch.platform import program
from gpen_watch.platform.login_common import NODE, SERVICE, LoginOptions, LoginStatus


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
    parser.add_argument(
        "--node",
        nargs=argparse.REMAINDER,
        metavar="head|join ...",
        help="this machine's cluster node instead of the service: what follows is a `gpen-watch "
        "cluster head ...` or `cluster join ...` command line, run with --stay at every login "
        "(install; uninstall and status take --node alone); put it last",
    )


def run(args: argparse.Namespace) -> int:
    plat = platform.current()
    entry = SERVICE if args.node is None else NODE
    if args.node and args.action != "install":
        print(
            f"gpen-watch service: error: {args.action} takes --node alone, with nothing after it",
            file=sys.stderr,
        )
        return 2
    if args.action == "status":
        status = plat.login_status(entry)
        print(format_status(status, node=args.node is not None))
        if entry == SERVICE and plat.login_enabled(NODE):
            print(
                f"this machine's cluster node starts at login too (`{program.command('service status --node')}`)"
            )
        return 0 if status.installed else 3  # like `systemctl status` for a unit that is not there
    if args.action == "uninstall":
        result = plat.uninstall_login(entry)
    else:
        if args.systemd and platform.module_name() != "linux":
            print("gpen-watch service: error: --systemd is for Linux only", file=sys.stderr)
            return 2
        if args.node is not None:
            problem = node_problem(args.node)
            if problem:
                print(f"gpen-watch service: error: --node {' '.join(args.node)}: {problem}", file=sys.stderr)
                return 2
            options = LoginOptions(systemd=args.systemd, node=tuple(args.node))
        else:
            # Loading the macOS agent starts it: not while an instance is already running.
            options = LoginOptions(
                systemd=args.systemd, no_tray=args.no_tray, load_now=not _service_running()
            )
        result = plat.install_login(options)
    for line in result.messages:
        print(line)
    return 0


def node_problem(node: list[str]) -> str | None:
    """Why ``node`` is not a `gpen-watch cluster head|join` command line a login can run; None if it is."""
    from gpen_watch.cli import cluster as cluster_cli

    if not node or node[0] not in ("head", "join"):
        return (
            "give a `head` or `join` command, as for `gpen-watch cluster`, e.g. --node join 192.168.1.10:6379"
        )
    if "--stay" in node:
        return "leave out --stay: the login entry adds it"
    parser = argparse.ArgumentParser(prog="gpen-watch cluster", add_help=False, exit_on_error=False)
    cluster_cli.add_arguments(parser, "cluster")
    try:
        parsed, extra = parser.parse_known_args(node)
    except argparse.ArgumentError as exc:
        return str(exc)
    except SystemExit:  # argparse said why above, with the usage
        return "not a `gpen-watch cluster` command line (see above)"
    if extra:
        return f"unknown argument(s) {' '.join(extra)}"
    if parsed.config is not None:
        return "leave out --config: the node started at login reads the default config"
    return None


def format_status(status: LoginStatus, node: bool = False) -> str:
    if not status.installed and status.kind is None:
        how = program.command("service install" + (" --node join HEAD:PORT" if node else ""))
        return f"start at login: not installed (install with `{how}`)"
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
