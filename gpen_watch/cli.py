"""`gpen-watch` command line.

Each command's parser and handler live with the stage they belong to; this module only wires them
up, and imports the handler lazily so `gpen-watch status` never pays for torch.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from gpen_watch import __version__
from gpen_watch.errors import GpenWatchError

# command -> (module, help). Each module has add_arguments(parser) and run(args) -> int.
COMMANDS: dict[str, tuple[str, str]] = {
    "restore": ("gpen_watch.restore.cli", "restore faces in photos once and exit"),
    "run": ("gpen_watch.service.run_cli", "run the watch service (inbox -> outbox)"),
    "status": ("gpen_watch.service.control_cli", "show the running service's queue and workers"),
    "pause": ("gpen_watch.service.control_cli", "stop starting new work (work in flight finishes)"),
    "resume": ("gpen_watch.service.control_cli", "resume after pause"),
    "stop": ("gpen_watch.service.control_cli", "stop the running service gracefully"),
    "models": ("gpen_watch.modelstore.cli", "list, fetch, verify model weights"),
    "config": ("gpen_watch.config_cli", "show or create the config file"),
    "service": ("gpen_watch.service.login_cli", "install or remove start at login"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpen-watch",
        description="Restore faces in photos with GPEN, once or as a hot-folder service.",
    )
    parser.add_argument("--version", action="version", version=f"gpen-watch {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="more log output")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue  # command not built yet
        p = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(p, name)
        p.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 1
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(message)s",
        stream=sys.stderr,
    )
    try:
        return int(args._module.run(args) or 0)
    except GpenWatchError as exc:
        print(f"gpen-watch: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("gpen-watch: interrupted", file=sys.stderr)
        return 130
