"""Filling the config dataclasses: a TOML file (``load``), single settings by dotted name from
the command line (``set_value``), and an inbox's own restore.* and output.* tables, each value
converted to its field's type with a message naming the setting."""

from __future__ import annotations

import dataclasses
import difflib
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any, Literal

from gpen_watch.base.errors import ConfigError
from gpen_watch.config.checks import validate
from gpen_watch.config.schema import (
    _PROFILE_SECTIONS,
    GLOBAL_ONLY,
    Config,
    InboxConfig,
    OutputConfig,
    PollingMode,
    RestoreConfig,
    inbox_label,
    short_path,
)
from gpen_watch.platform import paths

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def _profile(section: str, data: Any, label: str) -> dict[str, Any]:
    """An inbox's ``restore`` or ``output`` table, typed; ``label`` names the inbox."""
    if not isinstance(data, dict):
        raise ConfigError(f"{label}: {section}: expected a table, got {data!r}")
    cls = RestoreConfig if section == "restore" else OutputConfig
    out: dict[str, Any] = {}
    for key, value in data.items():
        out[key] = _profile_value(cls, section, key, value, label)
    return out


def _profile_value(cls: type, section: str, key: str, value: Any, label: str) -> Any:
    hints = typing.get_type_hints(cls)
    dotted = f"{section}.{key}"
    if key not in hints:
        known = [f"{section}.{k}" for k in hints if f"{section}.{k}" not in GLOBAL_ONLY]
        raise ConfigError(f"{label}: {dotted}: unknown setting{_suggest(dotted, known)}")
    if dotted in GLOBAL_ONLY:
        raise ConfigError(
            f"{label}: {dotted}: cannot be set per inbox: {GLOBAL_ONLY[dotted]}; set it in [{section}]"
        )
    return _convert(hints[key], value, f"{label}: {dotted}")


def _build_inbox(data: Any, name: str) -> InboxConfig:
    if isinstance(data, (str, Path)):
        return InboxConfig(Path(data).expanduser())
    if not isinstance(data, dict):
        raise ConfigError(f"{name}: expected a table or a path, got {data!r}")
    index = int(name.rpartition("[")[2].rstrip("]") or 0) if name.endswith("]") else 0
    plain = {k: v for k, v in data.items() if k not in _PROFILE_SECTIONS}
    inbox: InboxConfig = _build(InboxConfig, plain, name + ".")
    label = inbox_label(index, inbox)
    for section in _PROFILE_SECTIONS:
        if section in data:
            setattr(inbox, section, _profile(section, data[section], label))
    return inbox


# --- loading ------------------------------------------------------------------------------------


def load(
    path: Path | None = None, overrides: dict[str, Any] | None = None, must_exist: bool = False
) -> Config:
    """Read the TOML file (defaults when it does not exist), apply overrides, validate.

    A problem with a value that came from the file names the file; one from an override does not.
    ``must_exist``: the user named this file (``--config``), so a missing one is a typo to report,
    not a reason to run on defaults.
    """
    if must_exist and path is not None and not path.exists():
        raise ConfigError(f"{path}: config file not found")
    path = path or paths.config_file()
    text = ""
    if path.exists():
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read config: {exc}") from exc
    return from_text(text, path, overrides)


def from_text(text: str, path: Path, overrides: dict[str, Any] | None = None) -> Config:
    """``load`` of ``text`` as if it were the file at ``path`` (messages name ``path``): the one
    way a config is read, also for text not yet written (the dashboard's settings page checks
    what it would save before it saves it)."""
    overrides = overrides or {}
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from exc
    try:
        cfg: Config = _build(Config, data, "")
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    from_file = list(cfg.watch.inboxes)
    for key, value in overrides.items():
        set_value(cfg, key, value)

    def where(name: str) -> str:
        inbox_key = _INBOX_KEY.fullmatch(name)
        if inbox_key is not None:
            # watch.inboxes[i].restore.strength: from the file if that inbox's table has it. An
            # inbox --inbox kept from the file may have another place in the list now.
            index, inboxes = int(inbox_key[1]), cfg.watch.inboxes
            at = [j for j, inbox in enumerate(from_file) if index < len(inboxes) and inbox is inboxes[index]]
            in_file = bool(at) and _has_key(data.get("watch", {}).get("inboxes"), at[0], inbox_key[2])
            return f"{path}: " if in_file and name not in overrides else ""
        section, _, key = name.partition(".")
        in_file = isinstance(data.get(section), dict) and key in data[section]
        return f"{path}: " if in_file and name not in overrides else ""

    return validate(cfg, where)


_INBOX_KEY = re.compile(r"watch\.inboxes\[(\d+)\]\.(.+)")


def _has_key(inboxes: Any, index: int, dotted: str) -> bool:
    """Whether the file's ``inboxes[index]`` table holds ``dotted`` (e.g. "restore.strength")."""
    if not isinstance(inboxes, list) or index >= len(inboxes):
        return False
    node: Any = inboxes[index]
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def set_value(cfg: Config, dotted: str, value: Any) -> None:
    """Set one setting by dotted name, converting strings from the command line. An inbox's own
    settings are named by its place in watch.inboxes: ``watch.inboxes[1].restore.strength``."""
    inbox_key = _INBOX_KEY.fullmatch(dotted)
    if inbox_key is not None:
        _set_inbox_value(cfg, int(inbox_key[1]), inbox_key[2], value, dotted)
        return
    section_name, _, name = dotted.partition(".")
    sections = [f.name for f in dataclasses.fields(cfg)]
    section = getattr(cfg, section_name) if section_name in sections else None
    hints = typing.get_type_hints(type(section)) if section is not None else {}
    if name not in hints:
        known = [f"{s}.{f.name}" for s in sections for f in dataclasses.fields(getattr(cfg, s))]
        raise ConfigError(f"{dotted}: no such setting{_suggest(dotted, known)}")
    converted = _convert(hints[name], value, dotted)
    if dotted == "watch.inboxes":
        converted = _keep_profiles(cfg.watch.inboxes, converted)
    setattr(section, name, converted)


def _keep_profiles(old: list[InboxConfig], new: list[InboxConfig]) -> list[InboxConfig]:
    """``new`` (``--inbox``) with each folder given as a bare path that the file already lists
    taking the file's entry (its profile, outbox, recursive): naming the folders to watch is no
    reason to lose their settings. The same folder however it is spelt (resolved paths)."""
    by_folder = {inbox.path.resolve(): inbox for inbox in old}
    return [
        by_folder.get(inbox.path.resolve(), inbox) if inbox == InboxConfig(inbox.path) else inbox
        for inbox in new
    ]


def _set_inbox_value(cfg: Config, index: int, name: str, value: Any, dotted: str) -> None:
    inboxes = cfg.watch.inboxes
    if index >= len(inboxes):
        raise ConfigError(
            f"{dotted}: there is no inbox {index}; watch.inboxes has {len(inboxes)} "
            f"(counted from 0: watch.inboxes[0] is {short_path(inboxes[0].path) if inboxes else 'none'})"
        )
    inbox = inboxes[index]
    section, _, key = name.partition(".")
    if section in _PROFILE_SECTIONS and key:
        cls = RestoreConfig if section == "restore" else OutputConfig
        converted = _profile_value(cls, section, key, value, inbox_label(index, inbox))
        getattr(inbox, section)[key] = converted
        return
    hints = typing.get_type_hints(InboxConfig)
    plain = [f.name for f in dataclasses.fields(InboxConfig) if f.name not in _PROFILE_SECTIONS]
    if name not in plain:
        known = [f"watch.inboxes[{index}].{k}" for k in plain] + [
            f"watch.inboxes[{index}].{s}.KEY" for s in _PROFILE_SECTIONS
        ]
        raise ConfigError(f"{dotted}: no such setting{_suggest(dotted, known)}")
    setattr(inbox, name, _convert(hints[name], value, dotted))


# How alike (difflib's ratio, 0 to 1) a typed section and key must each be to a real one's to be
# suggested: one or two letters off in a word ("face_bach", "strenght", "worker.") pass; a word
# that only shares the section ("restore.nonsense" and restore.use_parse, 0.47) does not.
_SIMILAR = 0.75


def _suggest(name: str, known: list[str]) -> str:
    close = _closest(name, known)
    if close:
        return f"; did you mean {close}?"
    return f"; known: {', '.join(known)}"


def _closest(name: str, known: list[str]) -> str | None:
    """The known setting whose section and key are each close to ``name``'s, or None.

    Compared as a whole, the shared "restore." would make any two restore settings look alike.
    """
    section, _, key = name.rpartition(".")
    best, best_score = None, 0.0
    for candidate in known:
        c_section, _, c_key = candidate.rpartition(".")
        by_section = (
            difflib.SequenceMatcher(None, section, c_section).ratio() if section or c_section else 1.0
        )
        by_key = difflib.SequenceMatcher(None, key, c_key).ratio()
        if by_section >= _SIMILAR and by_key >= _SIMILAR and by_section * by_key > best_score:
            best, best_score = candidate, by_section * by_key
    return best


def _build(cls: type, data: Any, prefix: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: expected a table, got {data!r}")
    hints = typing.get_type_hints(cls)
    known = [f.name for f in dataclasses.fields(cls)]
    for key in data:
        if key not in known:
            hint = _suggest(prefix + key, [prefix + k for k in known])
            raise ConfigError(f"{prefix}{key}: unknown setting{hint}")
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            kwargs[f.name] = _convert(hints[f.name], data[f.name], prefix + f.name)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{prefix}{f.name}: missing (required)")
    return cls(**kwargs)


def legacy_polling(value: Any) -> Any:
    """watch.polling as older files wrote it, a bool: true -> "always", false -> "auto"."""
    if isinstance(value, bool):
        return "always" if value else "auto"
    if isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "on"):
        return "always"
    if isinstance(value, str) and value.strip().lower() in ("0", "false", "no", "off"):
        return "auto"
    return value.strip().lower() if isinstance(value, str) else value


def _convert(tp: Any, value: Any, name: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        unset = value is None or (isinstance(value, str) and value.lower() in ("", "none"))
        if unset and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _convert(inner[0], value, name)
    if origin is Literal:
        if args == typing.get_args(PollingMode):
            value = legacy_polling(value)  # older files' true / false
        if value not in args:
            raise ConfigError(f"{name}: must be one of {', '.join(map(str, args))}, got {value!r}")
        return value
    if origin is list:
        (item,) = args
        if isinstance(value, str) and value.strip().startswith("["):
            # A TOML list from the command line: --set 'workers.devices=["cuda:0", "cuda:1"]'.
            try:
                value = tomllib.loads(f"v = {value.strip()}")["v"]
            except tomllib.TOMLDecodeError as exc:
                raise ConfigError(f'{name}: expected a list like ["a", "b"] or a,b: {exc}') from None
        elif isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, list):
            raise ConfigError(f"{name}: expected a list, got {value!r}")
        return [_convert(item, v, f"{name}[{i}]") for i, v in enumerate(value)]
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if tp is InboxConfig:
            return _build_inbox(value, name)
        return _build(tp, value, name + ".")
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on"):
            return True
        if isinstance(value, str) and value.lower() in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{name}: expected true or false, got {value!r}")
    if tp in (int, float):
        if isinstance(value, bool):
            raise ConfigError(f"{name}: expected a number, got {value!r}")
        if tp is int and isinstance(value, float) and not value.is_integer():
            # int() would silently cut 1.5 to 1.
            raise ConfigError(f"{name}: expected a whole number, got {value!r}")
        try:
            return tp(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{name}: expected a number, got {value!r}") from None
    if tp is Path:
        if not isinstance(value, (str, Path)):
            raise ConfigError(f"{name}: expected a path, got {value!r}")
        return Path(value).expanduser()
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{name}: expected text, got {value!r}")
        return value
    return value
