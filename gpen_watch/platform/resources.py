"""Finding the files that live beside the package: login templates (packaging/) and icons (assets/).

From a source checkout or an editable install they sit next to the gpen_watch folder. An installed
wheel carries them as data files under ``<prefix>/share/gpen-watch/`` (pyproject's data-files).
"""

from __future__ import annotations

import site
import sys
from pathlib import Path

APP = "gpen-watch"


def search_roots() -> list[Path]:
    # The checkout, then where pip puts data files: the environment, or ~/.local for --user.
    return [
        Path(__file__).resolve().parents[2],
        Path(sys.prefix) / "share" / APP,
        Path(site.getuserbase()) / "share" / APP,
    ]


def find(*parts: str) -> Path | None:
    """The first existing ``<root>/<parts...>``, or None."""
    for root in search_roots():
        path = root.joinpath(*parts)
        if path.is_file():
            return path
    return None


def require(*parts: str) -> Path:
    """Like :func:`find`, but a missing file is an error that says where it was looked for."""
    path = find(*parts)
    if path is None:
        where = ", ".join(str(r.joinpath(*parts)) for r in search_roots())
        raise FileNotFoundError(
            f"{'/'.join(parts)} not found (looked in {where}); is gpen-watch fully installed?"
        )
    return path
