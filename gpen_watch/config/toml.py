"""Writing a config back as TOML (``config init``, ``config show``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpen_watch.config.schema import Config


def to_toml(cfg: Config, notes: Mapping[str, str] | None = None, header: str = "") -> str:
    """Serialise a config as TOML (the subset the dataclasses use). With ``notes`` (dotted name ->
    one line), each setting gets its note above it as a "## " comment (``config init``). Unset
    settings are written as ``# name = ""``, which stays valid TOML with the "# " removed ("" reads
    back as unset)."""

    def setting(dotted: str, name: str, value: Any) -> list[str]:
        note = [f"## {notes[dotted]}"] if notes is not None else []
        return [*note, f'# {name} = ""' if value is None else f"{name} = {_toml_value(value)}"]

    lines: list[str] = [header] if header else []
    for section in dataclasses.fields(cfg):
        obj = getattr(cfg, section.name)
        tables: list[tuple[str, list[Any]]] = []
        lines.append(f"[{section.name}]")
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if isinstance(value, list) and value and dataclasses.is_dataclass(value[0]):
                tables.append((f.name, value))  # arrays of tables go after the plain keys
                continue
            lines += setting(f"{section.name}.{f.name}", f.name, value)
        for name, items in tables:
            dotted = f"{section.name}.{name}"
            for item in items:
                lines += ["", *([f"## {notes[dotted]}"] if notes is not None else []), f"[[{dotted}]]"]
                for f in dataclasses.fields(item):
                    lines += setting(f"{dotted}.{f.name}", f.name, getattr(item, f.name))
        lines.append("")
    return "\n".join(lines)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, str):
        return '"' + "".join(_toml_char(c) for c in value) + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        # An inbox's profile, as an inline table; an unset path reads back as unset from "".
        items = (f"{k} = {_toml_value('' if v is None else v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    raise TypeError(f"cannot write {value!r} as TOML")


def _toml_char(c: str) -> str:
    # A TOML basic string: backslash and quote escaped, control characters (a newline in a path)
    # as \uXXXX, or the file would not load back.
    if c in ('"', "\\"):
        return "\\" + c
    if ord(c) < 0x20 or ord(c) == 0x7F:
        return f"\\u{ord(c):04X}"
    return c
