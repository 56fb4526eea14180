"""`gpen-watch submit FILE... [--to URL --token T] [-o DIR]`: send photos to a running service
through its API (this machine's by default), wait for them with a progress bar, and write the
results beside the photos (``NAME.restored.jpg``) or into ``-o DIR``.

Each photo is sent with an Idempotency-Key of its own, so a send repeated after a lost answer
gives the same photo, never a second. Exit codes as `restore` has (cli.exitcodes): 0 every photo
restored, 1 some failed or were refused, 2 nothing could begin (no photo, a token refused, a bad
setting), 3 no service running here.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from gpen_watch.base.errors import ConfigError
from gpen_watch.catalog import registry
from gpen_watch.cli.argtypes import positive_int
from gpen_watch.cli.config import add_set_option, set_overrides
from gpen_watch.dashboard.api.client import ApiClient, ApiError
from gpen_watch.imaging.formats import SUPPORTED_EXTENSIONS, denied_name
from gpen_watch.outbox.sent import SENT_SETTINGS

TOKEN_ENV = "GPEN_WATCH_TOKEN"
URL_ENV = "GPEN_WATCH_URL"
FINGERPRINT_ENV = "GPEN_WATCH_FINGERPRINT"
# A refusal of the client itself: no photo would be taken, so stop before sending the others.
FATAL = (401, 403)


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    parser.add_argument("inputs", nargs="+", type=Path, metavar="FILE", help="photos, or folders of photos")
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="DIR",
        help="write the results here (default: beside each photo, as NAME.restored.EXT)",
    )
    parser.add_argument(
        "--to",
        metavar="URL",
        help=f"another machine's service: https://HOST:4737/ (default: this machine's; ${URL_ENV})",
    )
    parser.add_argument(
        "--token", help=f"an API token of that service (`gpen-watch api token create`; ${TOKEN_ENV})"
    )
    parser.add_argument(
        "--fingerprint",
        metavar="SHA256",
        help=f"its certificate's fingerprint, as its `gpen-watch status` shows (${FINGERPRINT_ENV})",
    )
    parser.add_argument("--inbox", type=int, metavar="N", help="which of its inboxes (default: the first, 0)")
    parser.add_argument("--model", help=f"{registry.choices_text('face')} (restore.model)")
    parser.add_argument("--strength", metavar="S", help="0 (none) to 1 (all) (restore.strength)")
    parser.add_argument("--faces", choices=["all", "largest", "center"], help="which faces (restore.faces)")
    parser.add_argument(
        "--format", metavar="F", help="the results' format: same, jpeg, png, webp... (output.format)"
    )
    add_set_option(parser, "--set restore.upscale=2 (" + ", ".join(SENT_SETTINGS) + ")")
    parser.add_argument(
        "--jobs", type=positive_int, default=4, metavar="N", help="photos sent at once (default 4)"
    )
    parser.add_argument(
        "--no-wait", action="store_true", help="send them and exit; the service restores them"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


@dataclass
class Sent:
    path: Path
    dest: Path | None  # where the result goes
    photo: dict[str, Any] = field(default_factory=dict)
    error: str = ""


def run(args: argparse.Namespace) -> int:
    settings = _settings(args)
    api = _client(args)
    photos, problems = plan(args.inputs, args.output)
    for path, why in problems:
        print(f"gpen-watch submit: {path}: {why}", file=sys.stderr)
    if not photos:
        print("gpen-watch submit: nothing to send: no photo in the inputs", file=sys.stderr)
        return 2
    batch = secrets.token_hex(8)
    try:
        _send_all(api, photos, batch, settings, args)
    except ApiError as exc:
        if exc.status in FATAL or exc.status == 0:
            print(f"gpen-watch submit: {exc}", file=sys.stderr)
            return 2
        raise
    taken = [p for p in photos if p.photo]
    if args.no_wait or not taken:
        for p in taken:
            print(f"sent {p.path} as photo {p.photo['id']} ({p.photo['name']})")
        return _summary(photos, problems, waited=False)
    _wait(api, batch, taken, args)
    for p in taken:
        if p.photo.get("result") and p.dest is not None:
            try:
                p.dest = api.download(int(p.photo["id"]), p.dest)
            except ApiError as exc:
                p.error = f"its result could not be fetched: {exc}"
        elif not p.error:
            p.error = p.photo.get("error") or f"ended {p.photo.get('state')}"
    return _summary(photos, problems, waited=True)


def _settings(args: argparse.Namespace) -> dict[str, str]:
    settings = set_overrides(args.set)
    for option, key in (
        ("model", "restore.model"),
        ("strength", "restore.strength"),
        ("faces", "restore.faces"),
        ("format", "output.format"),
    ):
        value = getattr(args, option)
        if value is not None:
            settings[key] = str(value)
    unknown = [k for k in settings if k not in SENT_SETTINGS]
    if unknown:
        raise ConfigError(
            f"{', '.join(unknown)}: a photo sent to the service sets only {', '.join(SENT_SETTINGS)}"
        )
    return settings


def _client(args: argparse.Namespace) -> ApiClient:
    url = args.to or os.environ.get(URL_ENV)
    if not url:
        return ApiClient.local()
    token = args.token or os.environ.get(TOKEN_ENV)
    if not token:
        raise ConfigError(
            f"--to {url} needs --token (or ${TOKEN_ENV}): a token of that service's `gpen-watch api token create`"
        )
    return ApiClient(url, token, fingerprint=args.fingerprint or os.environ.get(FINGERPRINT_ENV) or None)


def plan(inputs: list[Path], outdir: Path | None) -> tuple[list[Sent], list[tuple[Path, str]]]:
    """The photos to send and where each result goes; the inputs that are not, with why."""
    photos: list[Sent] = []
    problems: list[tuple[Path, str]] = []
    seen: set[Path] = set()
    for raw in inputs:
        path = raw.expanduser()
        if path.is_dir():
            root = path.resolve()
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
                for name in sorted(filenames):
                    f = Path(dirpath) / name
                    if (
                        name.startswith(".")
                        or f.is_symlink()
                        or os.path.splitext(name)[1].lower() not in SUPPORTED_EXTENSIONS
                    ):
                        continue
                    rel = f.relative_to(root)
                    dest = (
                        outdir / root.name / rel
                        if outdir is not None and len(inputs) > 1
                        else (outdir / rel if outdir else None)
                    )
                    _add(photos, seen, f, dest)
        elif path.is_file():
            if denied_name(path.name):
                problems.append((raw, f"not a photo (a {path.suffix} file)"))
                continue
            _add(photos, seen, path.resolve(), outdir / path.name if outdir is not None else None)
        else:
            problems.append((raw, "no such file or folder"))
    return photos, problems


def _add(photos: list[Sent], seen: set[Path], path: Path, dest: Path | None) -> None:
    if path in seen:
        return
    seen.add(path)
    if dest is None:
        dest = path.with_name(f"{path.stem}.restored{path.suffix}")
    photos.append(Sent(path, dest))


def _send_all(
    api: ApiClient, photos: list[Sent], batch: str, settings: dict[str, str], args: argparse.Namespace
) -> None:
    total = sum(p.path.stat().st_size for p in photos)
    bar = tqdm(total=total, unit="B", unit_scale=True, desc="sending", disable=args.no_progress, leave=False)
    lock = threading.Lock()
    fatal: list[ApiError] = []

    def advance(n: int) -> None:
        with lock:
            bar.update(n)

    def send(i: int, p: Sent) -> None:
        if fatal:
            p.error = "not sent"
            return
        try:
            p.photo = api.submit(
                p.path, inbox=args.inbox, batch=batch, settings=settings, key=f"{batch}-{i}", progress=advance
            )
        except ApiError as exc:
            p.error = str(exc)
            if exc.status in (*FATAL, 0):
                fatal.append(exc)
        else:
            if p.photo.get("note"):
                tqdm.write(f"{p.path.name}: {p.photo['note']}")

    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(lambda item: send(*item), enumerate(photos)))
    bar.close()
    if fatal and not any(p.photo for p in photos):
        raise fatal[0]


def _wait(api: ApiClient, batch: str, taken: list[Sent], args: argparse.Namespace) -> None:
    bar = tqdm(total=len(taken), unit="photo", desc="restoring", disable=args.no_progress, leave=False)

    def on_change(counts: dict[str, Any]) -> None:
        bar.n = int(counts.get("total", 0)) - int(counts.get("waiting", 0))
        bar.refresh()

    found = api.wait_batch(batch, on_change)
    bar.close()
    by_id = {int(p["id"]): p for p in found.get("photos", [])}
    for p in taken:
        p.photo = by_id.get(int(p.photo["id"]), p.photo)


def _summary(photos: list[Sent], problems: list[tuple[Path, str]], *, waited: bool) -> int:
    failed = [p for p in photos if p.error]
    if waited:
        done = [p for p in photos if not p.error]
        where = sorted({str(p.dest.parent) for p in done if p.dest is not None})
        line = f"restored {len(done)} of {len(photos)} photo{'s' if len(photos) != 1 else ''}"
        print(line + (f" into {', '.join(where)}" if where else ""))
        for p in done:
            print(f"  {p.path} -> {p.dest}")
    elif len(failed) < len(photos):
        print(f"sent {len(photos) - len(failed)} of {len(photos)}; the service restores them")
    if failed:
        print(f"{len(failed)} failed:")
        for p in failed:
            print(f"  {p.path}: {p.error}")
    return 1 if failed or problems else 0
