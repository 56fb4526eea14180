"""Finding the data files gpen-watch ships: the tray icon and the start-at-login templates.

They are package data under ``gpen_watch/data/``, read through :mod:`importlib.resources`, so a
checkout, an editable install and an installed wheel (in a venv, ``--user``, pipx, or a zip) all
find them in the same place: inside the package, wherever the package is.
"""

from __future__ import annotations

import sys
from importlib.resources import files
from pathlib import Path

if sys.version_info >= (3, 11):
    from importlib.resources.abc import Traversable
else:
    from importlib.abc import Traversable

PACKAGE = "gpen_watch"
DATA = "data"

ICON = ("icon.png",)


def resource(*parts: str) -> Traversable:
    """``gpen_watch/data/<parts...>``, whether or not it exists."""
    node = files(PACKAGE) / DATA
    for part in parts:  # one at a time: Python 3.10's joinpath takes a single name
        node = node / part
    return node


def find(*parts: str) -> Traversable | None:
    """The data file ``parts``, or None when this installation lacks it."""
    node = resource(*parts)
    return node if node.is_file() else None


def require(*parts: str) -> Traversable:
    """Like :func:`find`, but a missing file is an error that says which and where it was looked for."""
    node = find(*parts)
    if node is None:
        raise FileNotFoundError(
            f"{'/'.join(parts)} not found in {resource()}; is gpen-watch fully installed?"
        )
    return node


def path_on_disk(*parts: str) -> Path | None:
    """The data file as a real file name, for other programs that open it by name (a desktop
    entry's Icon=); None when it is missing, or lives in a zip where no name would last."""
    node = find(*parts)
    return node if isinstance(node, Path) else None
