"""model.Entry list -> pystray.Menu. The only place that knows pystray's menu classes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from gpen_watch.tray.model import Entry


def build(pystray: ModuleType, entries: Sequence[Entry], on_action: Callable[[str], None]) -> Any:
    items = []
    for e in entries:
        if e.separator:
            items.append(pystray.Menu.SEPARATOR)
            continue
        if e.action is None:
            # Information lines: shown greyed out, so they do not look clickable.
            items.append(pystray.MenuItem(e.text, None, enabled=False))
            continue
        checked = None if e.checked is None else _constant(e.checked)
        items.append(
            pystray.MenuItem(e.text, _callback(on_action, e.action), checked=checked, default=e.default)
        )
    return pystray.Menu(*items)


def _callback(on_action: Callable[[str], None], action: str) -> Callable[[Any, Any], None]:
    def clicked(_icon: Any, _item: Any) -> None:
        on_action(action)

    return clicked


def _constant(value: bool) -> Callable[[Any], bool]:
    # The menu is rebuilt whenever the state changes, so each checkbox is a constant.
    return lambda _item: value
