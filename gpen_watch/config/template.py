"""The file `gpen-watch config init` writes: every setting at its default, each with a note.

Notes start with "## " and settings without a value (the unset paths) with "# ", so that a user
who removes a leading "# " from any line still has a valid file.
"""

from __future__ import annotations

from gpen_watch.config import Config, to_toml
from gpen_watch.config.docs import notes

# One line per setting, from the one description of each (config/docs.py: DESCRIPTIONS).
NOTES: dict[str, str] = notes()

HEADER = """\
## gpen-watch settings, written by `gpen-watch config init` with every default.
## Lines starting with "## " are notes. A line starting with "# " is a setting without a value:
## remove the "# " and fill in the value to set it. `gpen-watch config show` prints what is in
## effect; the settings page of the documentation (docs/settings.md) says more about each.
"""


def commented_toml(cfg: Config) -> str:
    """``cfg`` as TOML with a note above each setting; unset settings commented out."""
    return to_toml(cfg, NOTES, HEADER)
