"""`gpen-watch config path|show|init`."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpen_watch import config
from gpen_watch.base.errors import ConfigError
from gpen_watch.config.template import commented_toml
from gpen_watch.platform import paths


def add_config_option(parser: argparse.ArgumentParser, what: str = "", default: object = None) -> None:
    """``--config PATH``, the same for every command that reads the config file (a sub-command's
    copy passes ``default=argparse.SUPPRESS`` so it leaves the parent's value alone)."""
    parser.add_argument(
        "--config",
        type=Path,
        default=default,
        metavar="PATH",
        help=f"config file{what} (default: {paths.config_file()})",
    )


def add_set_option(parser: argparse.ArgumentParser, examples: str) -> None:
    """``--set SECTION.KEY=VALUE`` (repeatable), the same for every command that takes it."""
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help=f"set any config setting, e.g. {examples} (repeatable)",
    )


def set_overrides(items: list[str]) -> dict[str, str]:
    """What ``--set`` gave, as dotted settings (values converted and checked by ``config.load``)."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: expected SECTION.KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    parser.add_argument("action", choices=["path", "show", "init"], help="what to do")
    add_config_option(parser)
    parser.add_argument("--force", action="store_true", help="init: overwrite an existing file")


def run(args: argparse.Namespace) -> int:
    path: Path = args.config or paths.config_file()
    if args.action == "path":
        print(path)
        return 0
    if args.action == "show":
        print(config.to_toml(config.load(path)), end="")
        return 0
    if path.exists() and not args.force:
        raise ConfigError(f"{path} exists; use --force to overwrite it")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(commented_toml(config.Config()), encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write config: {_why(exc)}") from None
    print(f"wrote {path}")
    return 0


def _why(exc: OSError) -> str:
    """mkdir's FileExistsError names a folder on the way that is a file: say that."""
    if isinstance(exc, (FileExistsError, NotADirectoryError)) and exc.filename:
        return f"{exc.filename} is a file, not a folder"
    return exc.strerror or str(exc)
