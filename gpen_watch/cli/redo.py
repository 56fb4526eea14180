"""`gpen-watch redo NAME_OR_ID [--strength S] [--model M] [--fidelity W] [--faces ...] [--upscale N]
[--format F] [--face-ids 0,2] [--beside]`: restore a done photo again from its original, with these
settings on top of its inbox's; the new result replaces the old one at the same outbox name, or
with --beside goes beside it, to be compared on the photo's page until one is kept."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gpen_watch.catalog import registry
from gpen_watch.cli.retry import as_target, print_matches
from gpen_watch.service import control


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    parser.add_argument(
        "target",
        metavar="NAME_OR_ID",
        help="the result's or the original's file name, a path inside the outbox, or a run id "
        "(the number its page shows in the dashboard)",
    )
    parser.add_argument("--strength", type=float, metavar="S", help="0 (the original's own pixels) to 1")
    parser.add_argument(
        "--model", metavar="NAME|PATH", help=f"{registry.choices_text('face')}, or a .pth file"
    )
    parser.add_argument(
        "--fidelity",
        type=float,
        metavar="W",
        help=f"{' and '.join(registry.fidelity_families())}'s fidelity weight, 0 (the most restored) to 1",
    )
    parser.add_argument(
        "--beside",
        action="store_true",
        help="put the result beside the current one, replacing nothing: compare the two on the "
        "photo's page in the dashboard and keep one",
    )
    parser.add_argument("--faces", choices=["all", "largest", "center"], help="which faces to restore")
    parser.add_argument("--upscale", type=int, choices=[1, 2, 4], help="upscale the whole photo")
    parser.add_argument(
        "--format", choices=["same", "jpeg", "png", "webp", "tiff"], help="the result's format"
    )
    parser.add_argument(
        "--face-ids",
        metavar="0,2",
        help="restore only these faces, by the numbers the photo's page shows; '' restores none "
        "(the original's own pixels)",
    )


def run(args: argparse.Namespace) -> int:
    settings: dict[str, Any] = {
        k: v
        for k, v in {
            "restore.strength": args.strength,
            "restore.model": args.model,
            "restore.fidelity": args.fidelity,
            "restore.faces": args.faces,
            "restore.upscale": args.upscale,
            "output.format": args.format,
        }.items()
        if v is not None
    }
    fields: dict[str, Any] = {"target": as_target(args.target), "settings": settings}
    if args.beside:
        fields["beside"] = True
    if args.face_ids is not None:
        try:
            fields["face_ids"] = [int(i) for i in args.face_ids.replace(" ", "").split(",") if i]
        except ValueError:
            print(
                f"gpen-watch redo: --face-ids {args.face_ids!r}: give face numbers like 0,2", file=sys.stderr
            )
            return 2
    try:
        reply = control.request("redo", **fields)
    except control.NotRunning:
        raise  # the exit status of every command that finds no service (cli.exitcodes)
    except control.ControlError as exc:
        print(f"gpen-watch redo: {exc}", file=sys.stderr)
        return 1
    if not reply.get("ok"):
        print(f"gpen-watch redo: {reply.get('error', 'refused')}", file=sys.stderr)
        print_matches(reply)
        return 1
    then = (
        f"its result goes beside {reply['output']}, to compare on the photo's page and keep one"
        if args.beside
        else f"it replaces {reply['output']}"
    )
    print(f"{reply['name']}: queued again as run {reply['id']}, ahead of new arrivals; {then}")
    if reply.get("note"):
        print(f"note: {reply['note']}")
    return 0
