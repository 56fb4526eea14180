"""output.name_template's one rule: the fields a result's name may be made from, and the check
that a template uses only those, in one file name (checked when the config loads and again by
``outbox.naming`` before it renders one)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from string import Formatter

from gpen_watch.base.errors import ConfigError


@dataclass(frozen=True)
class NameSource:
    """What a result's name is made from: the input's file name, the output's extension (with its
    dot), the day and the model."""

    name: str
    ext: str
    date: str
    model: str


def name_fields(src: NameSource) -> dict[str, str]:
    """The fields output.name_template may use and their values for one result. A new field is one
    entry here (and its line in the setting's description); the check below and outbox.naming's
    rendering both read this."""
    return {
        "stem": os.path.splitext(src.name)[0],
        "ext": src.ext,
        "name": src.name,
        "date": src.date,
        "model": src.model,
    }


TEMPLATE_FIELDS = tuple(name_fields(NameSource("", "", "", "")))


def check_name_template(template: str) -> None:
    """Refuse anything but plain {field} substitutions of the known fields, in one file name. The
    one rule for the template: checked when the config loads, or the service would start and then
    stop at the first photo, and again by outbox.naming before it renders one."""
    allowed = set(TEMPLATE_FIELDS)
    try:
        fields = [(f, spec, conv) for _, f, spec, conv in Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise ConfigError(f"output.name_template: {exc}") from None
    for f, spec, conv in fields:
        if f not in allowed:
            raise ConfigError(
                f"output.name_template: unknown field {{{f}}}; use {', '.join(sorted(allowed))}"
            )
        if spec or conv:
            raise ConfigError(
                f"output.name_template: only plain fields like {{{f}}} are allowed "
                "(no conversion or format spec)"
            )
    if "/" in template.replace("{", "").replace("}", "") or "\\" in template or ".." in template:
        raise ConfigError("output.name_template: must be a file name, not a path")
