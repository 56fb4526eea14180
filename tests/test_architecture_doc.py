"""docs/architecture.md names the code's types, modules and files (its glossary, its layers and
where to change what): each name it gives in backticks must still be there, so a rename that
forgets the page fails here."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "architecture.md"
PACKAGES = {p.name for p in (REPO / "gpen_watch").iterdir() if (p / "__init__.py").exists()}


def named_objects(text: str) -> list[str]:
    """Dotted names in backticks that start with one of gpen_watch's packages."""
    found = re.findall(r"`([a-z_]+(?:\.[A-Za-z_]+)+)`", text)
    return sorted({n for n in found if n.split(".")[0] in PACKAGES})


def named_files(text: str) -> list[str]:
    """Paths of modules inside gpen_watch, in backticks (`journal/states.py`)."""
    found = re.findall(r"`((?:[a-z_]+/)+[a-z_]+\.py)`", text)
    return sorted({f for f in found if f.split("/")[0] in PACKAGES})


def resolve(dotted: str) -> object:
    """The object gpen_watch.<dotted> names: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module("gpen_watch." + ".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


def test_the_page_names_code_at_all() -> None:
    text = PAGE.read_text()
    assert len(named_objects(text)) >= 20
    assert len(named_files(text)) >= 8


@pytest.mark.parametrize("dotted", named_objects(PAGE.read_text()))
def test_each_name_on_the_page_is_in_the_code(dotted: str) -> None:
    try:
        resolve(dotted)
    except (ModuleNotFoundError, AttributeError) as exc:
        pytest.fail(f"docs/architecture.md names `{dotted}`, which gpen_watch no longer has ({exc})")


@pytest.mark.parametrize("path", named_files(PAGE.read_text()))
def test_each_file_on_the_page_exists(path: str) -> None:
    assert (REPO / "gpen_watch" / path).is_file(), f"docs/architecture.md names {path}, which is gone"


def test_a_stale_name_is_caught() -> None:
    with pytest.raises(AttributeError):
        resolve("journal.states.NO_SUCH_TABLE")
    with pytest.raises(ModuleNotFoundError):
        resolve("nosuchpackage.Thing")
