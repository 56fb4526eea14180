"""`gpen-watch run`: parse the options, set up logging and signals, run the service."""

from __future__ import annotations

import argparse
import contextlib
import logging
import logging.handlers
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpen_watch import config
from gpen_watch.cli.argtypes import seconds
from gpen_watch.cli.config import add_config_option, add_set_option, set_overrides
from gpen_watch.cli.restore_options import add_restore_options, restore_overrides
from gpen_watch.config.source import ConfigSource
from gpen_watch.platform import paths
from gpen_watch.service.folders import check_service_folders

if TYPE_CHECKING:
    from gpen_watch.service.daemon import Service


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    parser.add_argument("--no-tray", action="store_true", help="run without a tray icon (headless)")
    parser.add_argument(
        "--open-if-running",
        action="store_true",
        help="if the service is running already, open its dashboard instead (the menu entry's way)",
    )
    add_config_option(parser)
    parser.add_argument(
        "--inbox",
        type=Path,
        action="append",
        default=None,
        metavar="DIR",
        help="folder to watch (repeat for several; replaces watch.inboxes, keeping the settings the "
        "config file gives a folder it lists)",
    )
    parser.add_argument("--outbox", type=Path, default=None, metavar="DIR", help="where results go")
    parser.add_argument(
        "--device",
        action="append",
        default=None,
        metavar="DEV",
        help="auto, cpu, cuda or cuda:N (repeat or comma-separate; workers.devices)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="workers per GPU, or CPU workers when there is no GPU",
    )
    add_set_option(
        parser,
        "--set watch.settle_seconds=2, or an inbox's own: --set 'watch.inboxes[1].restore.strength=0.8'",
    )
    parser.add_argument(
        "--stop-grace",
        type=seconds,
        default=10.0,
        metavar="S",
        help="seconds in-flight images get to finish on stop (default: 10)",
    )
    add_restore_options(parser)


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The command line as dotted config settings; --set comes last and wins."""
    out: dict[str, Any] = {}
    if args.inbox:
        out["watch.inboxes"] = [_absolute(p) for p in args.inbox]
    if args.outbox is not None:
        out["watch.outbox"] = _absolute(args.outbox)
    if args.device:
        out["workers.devices"] = ",".join(args.device)
    if args.workers is not None:
        out["workers.workers_per_device"] = args.workers
        out["workers.cpu_workers"] = args.workers
    out.update(restore_overrides(args))
    out.update(set_overrides(args.set))
    return out


def _absolute(path: Path) -> str:
    # Relative to where the command was typed, not to wherever the service later looks from.
    return str(path.expanduser().absolute())


def setup_logging(verbose: bool) -> Path:
    """Rotating log file in the user log folder, plus stderr when it is a terminal."""
    path = paths.log_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    file_handler = logging.handlers.RotatingFileHandler(
        path, maxBytes=5 << 20, backupCount=3, encoding="utf-8"
    )
    file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    root.addHandler(file_handler)
    if sys.stderr is not None and sys.stderr.isatty():
        term = logging.StreamHandler(sys.stderr)
        term.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
        root.addHandler(term)
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    return path


def say_log_file(path: Path) -> None:
    """One line at start, even when stderr is no terminal (a login service, a pipe): without a
    terminal the log file is all there is, and this says where it is."""
    if sys.stderr is None:
        return
    with contextlib.suppress(OSError, ValueError):  # a closed stderr does not stop the service
        print(f"gpen-watch: logging to {path}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from gpen_watch.service.daemon import Service, engine_from_environ

    if args.open_if_running and _service_answers():
        return _open_dashboard()
    given = overrides(args)
    cfg = config.load(args.config, given, must_exist=args.config is not None)
    # The dashboard's settings page saves into this file, and the service reads it again the same
    # way, with the same command line over it.
    file = args.config or paths.config_file()
    source = ConfigSource(
        file,
        tuple(given),
        lambda: config.load(args.config, given, must_exist=args.config is not None),
        lambda text: config.from_text(text, file, given),
    )
    check_service_folders(cfg)  # a mistyped --inbox is said before anything starts
    log_path = setup_logging(getattr(args, "verbose", False))
    say_log_file(log_path)
    log = logging.getLogger("gpen_watch.service")
    service = Service(cfg, engine=engine_from_environ(os.environ), stop_grace=args.stop_grace, source=source)

    def on_signal(signum: int, _frame: object) -> None:
        log.info("%s received: stopping", signal.Signals(signum).name)
        service.request_stop()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, on_signal)  # terminal closed
    log.debug("logging to %s", log_path)
    with _dashboard_beside(service):
        if args.no_tray:
            return service.run()
        # Imported here: pystray and Pillow are loaded only when there is a tray to draw.
        from gpen_watch.tray.app import run_with_tray

        return run_with_tray(service, log_path=log_path)


def _service_answers() -> bool:
    from gpen_watch.service import control

    try:
        return bool(control.request("status", timeout=5).get("ok"))
    except control.ControlError:
        return False


def _open_dashboard() -> int:
    """A second start from the menu: the service is there, so show it."""
    from gpen_watch.cli import dashboard
    from gpen_watch.service import control

    try:
        url = dashboard.login_url()
    except control.ControlError as exc:
        print(f"gpen-watch is already running; {exc}", file=sys.stderr)
        return 0
    # From the desktop's menu nobody reads this output: a browser that did not open is a notice.
    return dashboard.open_in_browser(url, notify=not sys.stdout.isatty())


def _dashboard_beside(service: Service) -> contextlib.AbstractContextManager[object]:
    if not service.cfg.dashboard.enabled:
        return contextlib.nullcontext()
    # Imported only when it is on: aiohttp and Jinja stay out of a service without a page.
    from gpen_watch.dashboard.server import ServedBeside

    return ServedBeside(service)
