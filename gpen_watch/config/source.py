"""Where a running service's settings come from: its TOML file and the command line over it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpen_watch.config.schema import Config


@dataclass(frozen=True)
class ConfigSource:
    """``path``: the TOML file the service was started with (``--config``, or the default one);
    ``overridden``: the dotted settings its command line sets, which win over the file;
    ``load``: the file read again with those settings over it, as at start; ``with_text``: the
    same for a text not yet written as the file (``cli.run`` makes both, so that the service and
    the dashboard never have to know its command line)."""

    path: Path
    overridden: tuple[str, ...]
    load: Callable[[], Config]
    with_text: Callable[[str], Config]

    def overrides(self, name: str) -> bool:
        """Whether the command line sets ``name`` (an inbox's settings: when it sets the inboxes)."""
        if name in self.overridden:
            return True
        if name.startswith("watch.inboxes"):
            return "watch.inboxes" in self.overridden or any(
                name.startswith(o + ".") or o.startswith(name + ".") for o in self.overridden
            )
        return False
