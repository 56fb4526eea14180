"""`gpen-watch retry NAME_OR_ID | --all`: send a file set aside in failed/ through again."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from gpen_watch.service import control


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "target",
        nargs="?",
        metavar="NAME_OR_ID",
        help="the file's name as it was dropped (or as failed/ holds it), or its run id from the Failed page",
    )
    which.add_argument("--all", action="store_true", help="every file on the Failed page")


def run(args: argparse.Namespace) -> int:
    fields: dict[str, Any] = {"all": True} if args.all else {"target": as_target(args.target)}
    try:
        reply = control.request("retry", **fields)
    except control.NotRunning:
        raise  # the exit status of every command that finds no service (cli.exitcodes)
    except control.ControlError as exc:
        print(f"gpen-watch retry: {exc}", file=sys.stderr)
        return 1
    if not reply.get("ok"):
        print(f"gpen-watch retry: {reply.get('error', 'refused')}", file=sys.stderr)
        for m in reply.get("matches", []):
            print(
                f"  {m['id']:>8}  {m['name']}  (failed {_when(m['finished'])} in {m['inbox']}: {m['reason']})",
                file=sys.stderr,
            )
        return 1
    for path in reply["sent"]:
        print(f"sent back to {path}; it is restored again, as a new run")
    for line in reply["refused"]:
        print(line, file=sys.stderr)
    if args.all and not reply["sent"] and not reply["refused"]:
        print("nothing to retry: the Failed page is empty")
    return 0 if not reply["refused"] else 1


def as_target(text: str) -> str:
    """An id or a file name as given; a path (one with a folder in it) made absolute from where
    the command was typed, as the journal holds its paths."""
    if text.isdigit() or (os.sep not in text and (os.altsep is None or os.altsep not in text)):
        return text
    return str(Path(text).expanduser().absolute())


def print_matches(reply: dict[str, Any]) -> None:
    """The photos an ambiguous name matched, with the ids to choose from."""
    for m in reply.get("matches", []):
        why = f": {m['reason']}" if m.get("reason") else ""
        print(
            f"  {m['id']:>8}  {m['name']}  ({_when(m['finished'])}, inbox {m['inbox']}{why})", file=sys.stderr
        )


def _when(epoch: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(epoch)) if epoch else "?"
