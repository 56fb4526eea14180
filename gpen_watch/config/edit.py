"""Changing settings in the user's TOML file as a form sends them, keeping the file's comments,
order and spelling (tomlkit edits the parsed document in place; nothing here writes TOML by hand).

A form names each setting as ``--set`` does (``restore.strength``,
``watch.inboxes[1].restore.strength``) and sends its value as text. ``toml_value`` turns that text
into the TOML value a user would have typed for the setting's type, and leaves text that is no
such value as a string: the file's own checks (``parse.from_text``, the one validator) then refuse
it with the sentence the file would get. Only what a form adds beyond a file is checked here: the
names it may send, path values given whole, and sizes.

A setting left at its default is not added to the file; one the file has stays there, with its
new value. An inbox's own restore.* and output.* settings left blank are taken out of its profile
(it then follows the global ones).
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.exceptions
import tomlkit.items
from tomlkit.toml_document import TOMLDocument

from gpen_watch.base.errors import ConfigError
from gpen_watch.config import parse
from gpen_watch.config.schema import (
    _PROFILE_SECTIONS,
    GLOBAL_ONLY,
    Config,
    InboxConfig,
    OutputConfig,
    RestoreConfig,
    default_inbox,
    short_path,
)

# A form's values are short: a path, a number, a list of devices.
MAX_VALUE = 4096
# A form writes a list as one line, its items separated by commas, except a list whose items hold
# commas themselves ("sat,sun 10:00-18:00"): those by this.
LIST_SEPARATORS: dict[str, str] = {"workers.schedule": ";"}
INBOX_NAME = re.compile(r"watch\.inboxes\[(\d{1,3})\]\.(.+)")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def global_fields() -> dict[str, Any]:
    """Dotted name -> type of every global setting a form may send (the inboxes are edited one
    by one: ``inbox_fields``)."""
    out: dict[str, Any] = {}
    for section in dataclasses.fields(Config):
        cls = type(getattr(Config(), section.name))
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if f"{section.name}.{f.name}" != "watch.inboxes":
                out[f"{section.name}.{f.name}"] = hints[f.name]
    return out


def profile_fields() -> dict[str, Any]:
    """``restore.KEY`` / ``output.KEY`` -> type, of the settings an inbox may have its own of."""
    out: dict[str, Any] = {}
    for section, cls in (("restore", RestoreConfig), ("output", OutputConfig)):
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if f"{section}.{f.name}" not in GLOBAL_ONLY:
                out[f"{section}.{f.name}"] = hints[f.name]
    return out


def inbox_fields() -> dict[str, Any]:
    """An inbox's own settings (after ``watch.inboxes[i].``) -> type."""
    hints = typing.get_type_hints(InboxConfig)
    plain = {
        f.name: hints[f.name] for f in dataclasses.fields(InboxConfig) if f.name not in _PROFILE_SECTIONS
    }
    return {**plain, **profile_fields()}


def default_of(name: str) -> Any:
    """The schema's default of a global setting."""
    section, _, key = name.partition(".")
    return getattr(getattr(Config(), section), key)


def field_type(name: str, inboxes: int) -> Any:
    """The type of the setting a form names, or ConfigError saying it is none of the page's."""
    match = INBOX_NAME.fullmatch(name)
    if match is not None and int(match[1]) < inboxes and match[2] in inbox_fields():
        return inbox_fields()[match[2]]
    if match is None and name in global_fields():
        return global_fields()[name]
    shown = name if len(name) <= 80 else name[:80] + "..."
    raise ConfigError(
        f"{shown!r} is not a setting this page can change (the file has {inboxes} inbox(es), "
        "counted from 0); reload the settings page and save again"
    )


def check_text(name: str, text: str, tp: Any) -> None:
    """What a form must not send: a huge value, control characters, a path not given whole."""
    if len(text) > MAX_VALUE:
        raise ConfigError(
            f"{name}: the value is {len(text)} characters long; a setting takes at most {MAX_VALUE}"
        )
    if _CONTROL.search(text):
        raise ConfigError(f"{name}: the value contains a control character (a line break or tab); remove it")
    if _is_path(tp) and text:
        path = Path(text).expanduser()
        if not path.is_absolute() or ".." in path.parts:
            raise ConfigError(
                f"{name}: {text!r} is not a whole path; give the folder from the top (such as "
                f"{short_path(default_inbox())}), without '..'"
            )


def _is_path(tp: Any) -> bool:
    return tp is Path or Path in typing.get_args(tp)


def list_separator(name: str) -> str:
    """What separates the items of the list setting ``name`` in a form."""
    return LIST_SEPARATORS.get(name, ",")


def toml_value(tp: Any, text: str, sep: str = ",") -> Any:
    """The TOML value a user would have written for ``text`` in a setting of type ``tp`` (a list's
    items separated by ``sep``); text that is no such value stays text, for the file's checks to
    refuse with the file's sentence."""
    text = text.strip()
    if tp is bool:
        return {"true": True, "false": False}.get(text.lower(), text)
    if tp in (int, float):
        for kind in (int, float):
            try:
                return kind(text)
            except ValueError:
                continue
        return text
    if typing.get_origin(tp) is list:
        return [part.strip() for part in text.split(sep) if part.strip()]
    return text


def _same(tp: Any, old: Any, new: Any) -> bool:
    """Whether two values mean the same setting (``~/in`` and its full path, 1 and 1.0): a value
    the user did not change keeps the file's spelling. A value that is none of the type's is the
    same as nothing, so it is written, and the file's checks refuse it."""
    try:
        return bool(parse._convert(tp, old, "") == parse._convert(tp, new, ""))
    except ConfigError:
        return False


def apply_form(text: str, form: Mapping[str, str], inboxes: int) -> str:
    """``text`` (the file's TOML) with the form's settings set; ``inboxes``: how many the file
    has (what the form's inbox numbers count)."""
    doc = _parse(text)
    for name, raw in form.items():
        tp = field_type(name, inboxes)
        check_text(name, raw, tp)
        value = toml_value(tp, raw, list_separator(name))
        match = INBOX_NAME.fullmatch(name)
        if match is None:
            _set_global(doc, name, tp, value)
        else:
            _set_inbox_of(doc, int(match[1]), match[2], tp, value)
    return tomlkit.dumps(doc)


def _set_inbox_of(doc: TOMLDocument, index: int, key: str, tp: Any, value: Any) -> None:
    """Set ``key`` of the file's ``index``-th inbox. A file that lists its inboxes as paths, or
    has none (the default inbox), gets its ``[[watch.inboxes]]`` tables only for a value that
    changes an inbox: the page sends every inbox's fields, and a save must not write out the
    inboxes the user left as they were."""
    watch = doc.get("watch")
    found = watch.get("inboxes") if watch is not None else None
    if not isinstance(found, tomlkit.items.AoT):
        probe = _as_tables(found)[index]
        before = probe.as_string()
        _set_inbox(probe, key, tp, value)
        if probe.as_string() == before:
            return
    _set_inbox(_inbox_tables(doc)[index], key, tp, value)


def add_inbox(text: str, folder: str) -> str:
    """``text`` with one more ``[[watch.inboxes]]`` table for ``folder``."""
    check_text("watch.inboxes.path", folder, Path)
    if not folder.strip():
        raise ConfigError("watch.inboxes.path: give the folder to watch")
    doc = _parse(text)
    tables = _inbox_tables(doc)
    entry = tomlkit.table()
    entry["path"] = folder.strip()
    entry.add(tomlkit.nl())  # a blank line before whatever table follows
    tables.append(entry)
    return tomlkit.dumps(doc)


def remove_inbox(text: str, index: int, inboxes: int) -> str:
    """``text`` without its ``index``-th inbox (its folder and files are not touched)."""
    if not 0 <= index < inboxes:
        raise ConfigError(f"watch.inboxes[{index}]: there is no such inbox; reload the settings page")
    doc = _parse(text)
    tables = _inbox_tables(doc)
    del tables[index]
    if not len(tables):
        # No [[watch.inboxes]] table left: an empty list, which the checks refuse by name
        # (leaving the key out would quietly bring back the default inbox).
        _section(doc, "watch")["inboxes"] = tomlkit.array()
    return tomlkit.dumps(doc)


def _parse(text: str) -> TOMLDocument:
    try:
        return tomlkit.parse(text)
    except tomlkit.exceptions.TOMLKitError as exc:
        raise ConfigError(f"cannot read config: {exc}; fix the file in an editor first") from None


def _section(doc: TOMLDocument, name: str) -> Any:
    if name not in doc:
        doc[name] = tomlkit.table()
    return doc[name]


def _set_global(doc: TOMLDocument, name: str, tp: Any, value: Any) -> None:
    section, _, key = name.partition(".")
    table = doc.get(section)
    if table is not None and key in table:
        if not _same(tp, _unwrap(table[key]), value):
            table[key] = value
        return
    if _same(tp, default_of(name), value):
        return  # at its default and not in the file: not added
    _section(doc, section)[key] = value


def _set_inbox(table: Any, key: str, tp: Any, value: Any) -> None:
    section, _, sub = key.partition(".")
    if not sub:  # path, recursive, outbox
        if key in table:
            if value == "" and key == "outbox":
                del table[key]
            elif not _same(tp, _unwrap(table[key]), value):
                table[key] = value
        elif value != "" and not (key == "recursive" and value is True):
            table[key] = value
        return
    profile = table.get(section)
    if value == "" or value == []:
        # Blank: the inbox follows the global setting again.
        if profile is not None and sub in profile:
            del profile[sub]
            if not len(profile):
                del table[section]
            elif isinstance(profile, tomlkit.items.InlineTable):
                table[section] = _respaced(profile)
        return
    if profile is not None and sub in profile and _same(tp, _unwrap(profile[sub]), value):
        return
    if profile is None or isinstance(profile, tomlkit.items.InlineTable):
        # Made again whole: tomlkit spaces the items of a new inline table as a person would.
        fresh = tomlkit.inline_table()
        for k, v in (profile or {}).items():
            fresh[k] = v
        fresh[sub] = value
        table[section] = fresh
    else:
        profile[sub] = value


def _respaced(profile: Any) -> Any:
    fresh = tomlkit.inline_table()
    for k, v in profile.items():
        fresh[k] = v
    return fresh


def _unwrap(item: Any) -> Any:
    return item.unwrap() if isinstance(item, tomlkit.items.Item) else item


def _inbox_tables(doc: TOMLDocument) -> Any:
    """The file's ``[[watch.inboxes]]`` tables, made so where the file lists its inboxes another way
    (a list of paths) or not at all (the default inbox, written out so that it stays)."""
    watch = _section(doc, "watch")
    found = watch.get("inboxes")
    if isinstance(found, tomlkit.items.AoT):
        return found
    watch["inboxes"] = _as_tables(found)
    return watch["inboxes"]


def _as_tables(found: Any) -> Any:
    """The inboxes a file lists another way (``found``: a list of paths or inline tables; None
    when it lists none, which means the default inbox) as ``[[watch.inboxes]]`` tables."""
    entries = _unwrap(found) if found is not None else [str(short_path(default_inbox()))]
    aot = tomlkit.aot()
    for entry in entries:
        table = tomlkit.table()
        if isinstance(entry, dict):
            for k, v in entry.items():
                table[k] = v
        else:
            table["path"] = str(entry)
        aot.append(table)
    return aot
