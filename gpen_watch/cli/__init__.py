"""`gpen-watch` command line.

The top layer: one module here per command group (``restore``, ``run``, ``control`` for
status/pause/resume/stop/reload, ``models``, ``config``, ``service``, ``cluster``), each with
``add_arguments(parser, command)`` and ``run(args)``. This module only wires them up, and imports
the handler lazily so `gpen-watch status` never pays for torch.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import textwrap
from collections.abc import Sequence
from typing import Any, NoReturn

from gpen_watch import __version__
from gpen_watch.base.errors import GpenWatchError
from gpen_watch.base.streams import flush_and_exit, silence
from gpen_watch.cli.exitcodes import NOT_RUNNING
from gpen_watch.service.control import NotRunning

# command -> (module, help). Each module has add_arguments(parser) and run(args) -> int.
COMMANDS: dict[str, tuple[str, str]] = {
    "restore": ("gpen_watch.cli.restore", "restore faces in photos once and exit"),
    "run": ("gpen_watch.cli.run", "run the watch service (inbox -> outbox)"),
    "status": ("gpen_watch.cli.control", "show the running service's queue and workers"),
    "pause": ("gpen_watch.cli.control", "stop starting new work (work in flight finishes)"),
    "resume": ("gpen_watch.cli.control", "resume after pause"),
    "stop": ("gpen_watch.cli.control", "stop the running service gracefully"),
    "redo": ("gpen_watch.cli.redo", "restore a done photo again with other settings"),
    "retry": ("gpen_watch.cli.retry", "send a file set aside in failed/ through again"),
    "reload": ("gpen_watch.cli.control", "make the running service read its settings file again"),
    "dashboard": ("gpen_watch.cli.dashboard", "open the running service's dashboard in a browser"),
    "submit": (
        "gpen_watch.cli.submit",
        "send photos to a running service (this machine's or another's) and get them back",
    ),
    "api": ("gpen_watch.cli.api", "make, list or revoke the API's tokens"),
    "models": ("gpen_watch.cli.models", "list, fetch, verify model weights"),
    "config": ("gpen_watch.cli.config", "show or create the config file"),
    "service": ("gpen_watch.cli.service", "install or remove start at login"),
    "cluster": ("gpen_watch.cli.cluster", "use the GPUs of other machines through a Ray cluster"),
}


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, wrapping only at spaces: its default breaks at hyphens, which cuts
    names users type ("GPEN-BFR-256", "--no-parse", "cuda:N") across lines."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        text = self._whitespace_matcher.sub(" ", text).strip()
        return textwrap.wrap(text, width, break_on_hyphens=False, break_long_words=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        text = self._whitespace_matcher.sub(" ", text).strip()
        return textwrap.fill(
            text,
            width,
            initial_indent=indent,
            subsequent_indent=indent,
            break_on_hyphens=False,
            break_long_words=False,
        )


class ArgumentParser(argparse.ArgumentParser):
    """Every parser of the command line, sub-commands' too (add_subparsers makes its children of
    the parent's class), formats its help with HelpFormatter."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="gpen-watch",
        description="Restore faces in photos with GPEN, once or as a hot-folder service.",
    )
    parser.add_argument("--version", action="version", version=f"gpen-watch {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="more log output")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        module = importlib.import_module(module_name)
        p = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(p, name)
        p.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        code = _main(argv)
        # Flushed here, where a closed pipe can still be caught, rather than at interpreter exit.
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        return _reader_gone()


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit:
        sys.stdout.flush()  # --help or --version: a closed pipe raises here, where main catches it
        raise
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
    except NotRunning as exc:
        # Every command that needs the service ends the same way without one (cli.exitcodes).
        print(f"gpen-watch {args.command}: {exc}", file=sys.stderr)
        return NOT_RUNNING
    except GpenWatchError as exc:
        print(f"gpen-watch: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("gpen-watch: interrupted", file=sys.stderr)
        return 130


def entry() -> NoReturn:
    """The `gpen-watch` command (the console script and ``python -m gpen_watch``)."""
    exit_with(main())


def exit_with(code: int) -> NoReturn:
    """End the process with ``code``. A command that loaded torch (`restore`, `models verify`) has
    finished its work and written its files, and the interpreter's teardown of torch's native state
    would keep the prompt away for about a second more: logs and streams are flushed, and the
    process ends there. Without torch, a normal exit."""
    if "torch" not in sys.modules:
        raise SystemExit(code)
    logging.shutdown()
    flush_and_exit(code)


def _reader_gone() -> int:
    """The reader of stdout went away (`gpen-watch status | head`): it took what it wanted, which is
    no failure of the command, so it ends quietly with status 0 (not 141, not a traceback)."""
    silence(sys.stdout)
    return 0
