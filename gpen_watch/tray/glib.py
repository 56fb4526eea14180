"""The gtk and appindicator backends: a native menu and notifications, through PyGObject.

PyGObject (``gi``) comes with the system (Debian: python3-gi), built for the system's Python; a
venv does not see it, and ``--system-site-packages`` does not help a venv made from another Python
(pyenv, conda). Its C extension loads in any Python of the same version and ABI, so where the
venv has no ``gi`` of its own, :func:`enable_system_gi` lets it import the system's ``gi`` (and
``cairo``) and nothing else from the system's site-packages.

Which one: appindicator where a StatusNotifierWatcher runs on the session bus (KDE, GNOME with the
AppIndicator extension, XFCE/MATE/Budgie with their indicator plugins); gtk (an XEmbed icon with a
GTK menu) otherwise; and xorg where there is no PyGObject, no GTK or no D-Bus session bus, which
pystray's gtk backend needs (without it, it fails after it already put an empty icon in the tray).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from PIL import Image

from gpen_watch.tray.base import Backend, Hooks

log = logging.getLogger(__name__)

SYSTEM_PACKAGES = ("gi", "cairo")  # what PyGObject needs from the system, and no more
WATCHER = "org.kde.StatusNotifierWatcher"


@dataclass(frozen=True)
class GLibBackend(Backend):
    def prepare(self, icon: Any) -> Hooks:
        return GLibHooks()

    def create_icon(self, name: str, image: Image.Image, title: str, menu: Any) -> Any:
        cls = gtk_icon_class(self.pystray) if self.name == "gtk" else self.pystray.Icon
        return cls(name, image, title, menu=menu)

    def discard(self, icon: Any) -> None:
        # pystray's GTK icon docks into an XEmbed tray as soon as GTK runs, before the loop that
        # failed: without this a 1 px wide empty icon stays in the tray while the log says headless.
        from gi.repository import Gtk

        status_icon = getattr(icon, "_status_icon", None)
        if status_icon is not None:
            status_icon.set_visible(False)
        while Gtk.events_pending():
            Gtk.main_iteration_do(False)


class GLibHooks(Hooks):
    """pystray sets SIGINT back to the default (die at once) when its GLib loop starts; gpen-watch's
    handler stops gracefully (images in flight finish), so it is put back."""

    def __init__(self) -> None:
        import signal

        self._sigint = signal.getsignal(signal.SIGINT)  # on the main thread, before the loop

    def loop_started(self) -> None:
        import signal

        from gi.repository import GLib  # loaded by pystray already

        def restore() -> bool:  # runs on the loop (main) thread, the only one that may set handlers
            if callable(self._sigint):
                signal.signal(signal.SIGINT, self._sigint)
            return False  # once

        GLib.idle_add(restore)


def gtk_icon_class(pystray: Any) -> type:
    """pystray's gtk icon, drawn at the size the tray gives it: pystray hands GTK the 64 px file,
    which GtkStatusIcon scales past its slot (in trayer the badge was cut off at the corner)."""
    from gi.repository import GdkPixbuf, GLib

    class GtkIcon(pystray.Icon):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._status_icon.connect("size-changed", self._on_size_changed)

        def _on_size_changed(self, _status_icon: Any, size: int) -> bool:
            self._fit(size)
            return True  # handled: GTK does not scale it again

        def _update_icon(self) -> None:
            super()._update_icon()  # the file, which notifications show; queued on the loop
            GLib.idle_add(lambda: self._fit(self._status_icon.get_size()) and False)

        def _fit(self, size: int) -> bool:
            if not self.icon or size <= 0:
                return False
            image = self.icon.convert("RGBA").resize((size, size), Image.Resampling.LANCZOS)
            pixbuf = GdkPixbuf.Pixbuf.new_from_bytes(
                GLib.Bytes.new(image.tobytes()), GdkPixbuf.Colorspace.RGB, True, 8, size, size, size * 4
            )
            self._status_icon.set_from_pixbuf(pixbuf)
            return False

        def _update_title(self) -> None:
            super()._update_title()  # the accessible name; the tooltip is what users see on hover
            text = self.title
            GLib.idle_add(lambda: self._status_icon.set_tooltip_text(text) and False)

    return GtkIcon


def choose() -> tuple[str, str]:
    """The pystray backend name for this Linux session, and why (for the log)."""
    gi = import_gi()
    if gi is None:
        return "xorg", "no PyGObject (python3-gi) for this Python"
    try:
        gi.require_version("Gtk", "3.0")
        from gi.repository import Gio, Gtk

        if not Gtk.init_check()[0]:
            return "xorg", "GTK could not open the display"
    except (ImportError, ValueError) as exc:
        return "xorg", f"no GTK 3 introspection data (gir1.2-gtk-3.0): {exc}"
    try:
        bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
    except Exception as exc:  # noqa: BLE001 - GLib.Error
        return "xorg", f"no D-Bus session bus ({exc})"
    if _has_owner(bus, WATCHER):
        try:
            gi.require_version("AyatanaAppIndicator3", "0.1")
            return "appindicator", f"{WATCHER} runs"
        except ValueError:
            log.debug("%s runs but AyatanaAppIndicator3 is not installed", WATCHER)
    return "gtk", f"no {WATCHER}: an XEmbed icon with a GTK menu"


def _has_owner(bus: Any, name: str) -> bool:
    from gi.repository import GLib

    try:
        reply = bus.call_sync(
            "org.freedesktop.DBus",
            "/org/freedesktop/DBus",
            "org.freedesktop.DBus",
            "NameHasOwner",
            GLib.Variant("(s)", (name,)),
            None,
            0,
            2000,
            None,
        )
        return bool(reply.unpack()[0])
    except Exception as exc:  # noqa: BLE001
        log.debug("asking D-Bus for %s failed: %s", name, exc)
        return False


def import_gi() -> ModuleType | None:
    """``gi``: the environment's own, else the system's (see the module docstring), else None."""
    try:
        import gi

        own: ModuleType = gi
        return own
    except ImportError:
        pass
    if enable_system_gi() is None:
        return None
    try:
        import gi

        system: ModuleType = gi
        return system
    except ImportError as exc:
        log.debug("the system's PyGObject does not load here: %s", exc)
        return None


def enable_system_gi(dirs: Sequence[Path] | None = None) -> Path | None:
    """Make the system's PyGObject importable, if one is built for this Python; its folder or None."""
    folder = find_system_gi(system_site_dirs() if dirs is None else dirs)
    if folder is None:
        return None
    if not any(isinstance(f, SystemPackages) and f.folder == folder for f in sys.meta_path):
        # After the environment's own finders: a PyGObject installed in the venv wins.
        sys.meta_path.append(SystemPackages(folder, SYSTEM_PACKAGES))
    return folder


def system_site_dirs() -> list[Path]:
    """Where Linux distributions put packages for their Python (Debian/Ubuntu, Fedora, Arch...)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return [
        Path("/usr/lib/python3/dist-packages"),
        Path(f"/usr/lib/{version}/site-packages"),
        Path(f"/usr/lib64/{version}/site-packages"),
    ]


def find_system_gi(dirs: Sequence[Path]) -> Path | None:
    """The first folder whose ``gi`` has a C extension this interpreter can load."""
    # ".so" alone would also match an extension built for another Python version.
    suffixes = [s for s in importlib.machinery.EXTENSION_SUFFIXES if s != ".so"]
    for folder in dirs:
        gi = folder / "gi"
        if (gi / "__init__.py").is_file() and any((gi / f"_gi{s}").is_file() for s in suffixes):
            return folder
    return None


class SystemPackages(importlib.abc.MetaPathFinder):
    """Finds only the named top-level packages, and only in ``folder``."""

    def __init__(self, folder: Path, names: Sequence[str]) -> None:
        self.folder, self.names = folder, frozenset(names)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if path is not None or fullname not in self.names:
            return None  # submodules are found through their package's own __path__
        return importlib.machinery.PathFinder.find_spec(fullname, [str(self.folder)])
