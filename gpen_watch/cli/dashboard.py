"""`gpen-watch dashboard [--url]`: open the running service's dashboard, or print its login URL."""

from __future__ import annotations

import argparse
import sys

from gpen_watch import platform as platforms
from gpen_watch.dashboard import access
from gpen_watch.service import control


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    parser.add_argument(
        "--url",
        action="store_true",
        help="print the URL with its login token, and nothing else (for scripts)",
    )


def login_url() -> str:
    """The running service's dashboard URL with its token; GpenWatchError saying why there is none."""
    reply = control.request("status")
    if not reply.get("ok"):
        raise control.ControlError(f"the service did not answer: {reply.get('error', 'refused')}")
    url = str(reply.get("dashboard") or "")
    if not url:
        why = reply.get("dashboard_problem") or "it is off in the settings (dashboard.enabled = false)"
        raise control.ControlError(f"the running service has no dashboard: {why}")
    signed = access.login_url(url)
    if signed is None:
        raise control.ControlError(f"{access.token_path()}: no dashboard login token to read")
    return signed


def run(args: argparse.Namespace) -> int:
    try:
        url = login_url()
    except control.NotRunning:
        raise  # the exit status of every command that finds no service (cli.exitcodes)
    except control.ControlError as exc:
        print(f"gpen-watch dashboard: {exc}", file=sys.stderr)
        return 1
    if args.url:
        print(url)
        return 0
    return open_in_browser(url)


def open_in_browser(url: str, *, notify: bool = False) -> int:
    """Open ``url`` (a login URL) in the user's browser; where none opened, say why and print the
    link itself (it signs the reader in, so it is printed only then). ``notify``: nobody reads
    this process's output (started from the desktop's menu), so that is a desktop notice too."""
    plain = url.partition("?")[0]
    platform = platforms.current()
    opened = platform.open_url(url)
    if not opened.ok and notify:
        platform.notify("gpen-watch: no browser opened", access.no_browser(opened.why, plain))
    if opened.ok and not opened.lingering:
        print(f"opened the dashboard ({plain}) in your browser")
    elif opened.ok:
        # The opener stays while the browser it started runs: most likely a browser starting up.
        print(
            f"your browser is starting with the dashboard ({plain}); if it shows nothing, open this link: {url}"
        )
    else:
        print(f"no browser opened ({opened.why}); open this link (it signs you in): {url}")
    return 0
