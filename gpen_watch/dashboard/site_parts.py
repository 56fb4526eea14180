"""What the dashboard's page modules use of its ``Site``, which builds them (so they never import it
back): the journal, the views folder, the settings now and the page renderer, and for pages that
act, the service's control channel."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from aiohttp import web

from gpen_watch.config import Config
from gpen_watch.journal.browse import JournalBrowser


class PageParts(Protocol):
    """What a page that only reads needs of the ``Site``."""

    journal: JournalBrowser
    views_root: Path

    def settings_now(self) -> Config: ...
    def page(self, template: str, **context: Any) -> web.Response: ...


class SiteParts(PageParts, Protocol):
    """What a page that also acts (redo, keep, marks) needs of the ``Site``."""

    async def command(self, request: dict[str, Any]) -> dict[str, Any]: ...
