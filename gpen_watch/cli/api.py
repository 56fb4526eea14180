"""`gpen-watch api token create|list|revoke`: the tokens other programs and machines send photos
with (docs/api.md). Made here, checked by the running service at each request: a token revoked
here is refused from its next request on, without a restart."""

from __future__ import annotations

import argparse
import datetime as dt

from gpen_watch.cli.argtypes import positive_int
from gpen_watch.dashboard.api import tokens
from gpen_watch.platform import program
from gpen_watch.service import control


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    what = parser.add_subparsers(dest="what", metavar="WHAT", required=True)
    token = what.add_parser("token", help="make, list or revoke API tokens")
    action = token.add_subparsers(dest="action", metavar="ACTION", required=True)
    create = action.add_parser("create", help="make a token and show it once")
    create.add_argument("--name", required=True, help="what it is for: lightroom, studio-laptop")
    create.add_argument(
        "--scope",
        default="submit,read",
        help="comma-separated: "
        + ", ".join(f"{k} ({v})" for k, v in tokens.SCOPES.items())
        + " (default: both)",
    )
    create.add_argument("--requests-per-minute", type=positive_int, metavar="N", help="its own limit (api.*)")
    create.add_argument("--mb-per-day", type=positive_int, metavar="MB", help="its own limit (api.*)")
    create.add_argument("--max-file-mb", type=positive_int, metavar="MB", help="its own limit (api.*)")
    action.add_parser("list", help="list the tokens (never the tokens themselves)")
    revoke = action.add_parser("revoke", help="refuse a token from its next request on")
    revoke.add_argument("name", metavar="NAME_OR_ID")


def run(args: argparse.Namespace) -> int:
    store = tokens.TokenStore()
    if args.action == "create":
        limits = {
            k: v
            for k, v in (
                ("requests_per_minute", args.requests_per_minute),
                ("mb_per_day", args.mb_per_day),
                ("max_file_mb", args.max_file_mb),
            )
            if v is not None
        }
        record, token = store.create(args.name, tokens.parse_scopes(args.scope), limits)
        print(
            f"made token {record.name!r} (id {record.id}), scopes {', '.join(record.scopes)}. "
            "It is shown this once; only its hash is kept. Keep it where the program that uses it can read it:"
        )
        print()
        print(f"  {token}")
        print()
        print(usage(token))
        return 0
    if args.action == "list":
        print(list_text(store.records()))
        return 0
    record = store.revoke(args.name)
    print(f"revoked token {record.name!r} (id {record.id}): refused from its next request on")
    return 0


def usage(token: str) -> str:
    """How to send a photo with ``token``: to this machine's API for other machines when the
    service serves one (its address and certificate fingerprint), else where to set that up."""
    try:
        reply = control.request("status")
    except control.ControlError:
        reply = {}
    url, fingerprint = str(reply.get("api") or ""), str(reply.get("api_fingerprint") or "")
    if url:
        return (
            f"From another machine: {program.command('submit')} --to {url} --token {token} "
            f"--fingerprint {fingerprint} PHOTO..."
        )
    return (
        'This service listens to other machines once api.address is set (docs/api.md, "Other machines"); '
        f"on this machine: {program.command('submit')} PHOTO... needs no token."
    )


def list_text(records: list[tokens.TokenRecord]) -> str:
    if not records:
        return f"no API tokens; `{program.command('api token create --name NAME')}` makes one"
    rows = [("NAME", "ID", "SCOPES", "MADE", "STATE", "LIMITS")]
    for r in records:
        state = "active" if r.active else f"revoked {_when(r.revoked or 0)}"
        limits = ", ".join(f"{k}={v}" for k, v in sorted(r.limits.items())) or "the settings'"
        rows.append((r.name, r.id, ",".join(r.scopes), _when(r.created), state, limits))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def _when(t: float) -> str:
    return dt.datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M")
