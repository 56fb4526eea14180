"""The interface every operating system implements: one subclass of ``Platform`` per OS module.

In the pattern of platformdirs' ``api.py`` and pystray's ``_base``: the base class holds what is
common, an OS module overrides what differs, and an OS that leaves something out cannot be
instantiated (``abc``), so nothing is forgotten when one is added.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar, Protocol

from gpen_watch.platform.login_common import SERVICE, LoginEntry, LoginOptions, LoginResult, LoginStatus
from gpen_watch.platform.mounts import Volume
from gpen_watch.platform.opener import Opened


class LoginService(Protocol):
    """Start at login on one OS: its ``*_login`` module (XDG autostart or systemd, LaunchAgent,
    the Run key) provides these as functions."""

    def install(self, options: LoginOptions) -> LoginResult: ...
    def uninstall(self, *, entry: LoginEntry = ...) -> LoginResult: ...
    def status(self, *, entry: LoginEntry = ...) -> LoginStatus: ...
    def enabled(self, *, entry: LoginEntry = ...) -> bool: ...


class Platform(ABC):
    """What differs between operating systems, for the tray and the ``service`` command."""

    #: ``sys.platform`` families this class serves, for ``gpen_watch.platform.current``.
    name: ClassVar[str]
    login: ClassVar[LoginService]
    #: The desktop is X11 or Wayland: a tray needs a display, and gpen-watch picks pystray's
    #: backend itself (``tray.glib.choose``) rather than leaving it to pystray.
    x11_desktop: ClassVar[bool]
    #: Linux's /proc, with each process's status and command line (the Ray processes `gpen-watch
    #: cluster leave` looks for).
    procfs: ClassVar[bool]
    #: The C library whose allocator a restorer tunes and trims (glibc's ``mallopt`` and
    #: ``malloc_trim``, through ctypes), by the name ctypes loads it; None where there is none.
    libc: ClassVar[str | None]
    #: Bytes in one unit of ``resource.getrusage``'s ``ru_maxrss`` (KiB on Linux, bytes on macOS).
    maxrss_unit: ClassVar[int]
    #: File modes and owners say who may read a file (a 0600 file, a 0700 folder owned by the
    #: user is private), so the control channel and the cluster token check them; False where
    #: access lists do that instead and the modes Python reports are a guess (Windows).
    posix_permissions: ClassVar[bool]
    #: The control channel can be a Unix domain socket in the private runtime folder, which the
    #: kernel already keeps from other users; else it is loopback TCP, guarded by the secret alone.
    unix_sockets: ClassVar[bool]
    #: Characters a file name may not hold here, beyond the separators, NUL and control characters
    #: no OS allows (``outbox.naming.sanitize_component`` replaces them with "_").
    name_forbidden: ClassVar[frozenset[str]]

    @abstractmethod
    def open_path(self, path: Path) -> None:
        """Show a folder in the file manager, or open a file with its default application;
        OSError saying why when that did not happen."""

    @abstractmethod
    def open_url(self, url: str) -> Opened:
        """Open ``url`` in the user's browser ($BROWSER where it names one), and say whether that
        happened (``platform.opener``)."""

    @abstractmethod
    def notify(self, title: str, message: str) -> bool:
        """A desktop notification when the tray backend cannot show one; False if there is no way."""

    def desktop_session(self) -> bool:
        """Whether this process runs in a desktop session that can show ``notify``'s notices
        (the headless service asks before it sends one); True where the OS gives every user one."""
        return True

    @abstractmethod
    def volume_of(self, path: Path) -> Volume | None:
        """The mounted filesystem holding ``path`` (absolute, links resolved); None if unknown."""

    @abstractmethod
    def cloud_placeholder(self, st: os.stat_result) -> bool:
        """Whether an lstat result's flags say the file's bytes are not on this machine (a cloud
        placeholder that reading would download); never opens the file."""

    @abstractmethod
    def on_battery(self) -> bool | None:
        """Whether the machine runs on battery now (workers.pause_on_battery): False on mains power
        or without a battery, None when the OS does not say. Cheap: the service asks every 30 s."""

    def defuse_name(self, name: str) -> str:
        """``name`` (one component, already without separators and leading dots and spaces) made
        a name this OS will store as given; unchanged where every such name is fine."""
        return name

    def install_login(self, options: LoginOptions) -> LoginResult:
        """Start gpen-watch (or, with ``options.node``, this machine's cluster node) at login."""
        return self.login.install(options)

    def uninstall_login(self, entry: LoginEntry = SERVICE) -> LoginResult:
        """Undo exactly what ``install_login`` made for ``entry``."""
        return self.login.uninstall(entry=entry)

    def login_status(self, entry: LoginEntry = SERVICE) -> LoginStatus:
        """What is installed for ``entry``, where, and what it runs."""
        return self.login.status(entry=entry)

    def login_enabled(self, entry: LoginEntry = SERVICE) -> bool:
        """A cheap "is it installed", for the tray's checkbox."""
        return self.login.enabled(entry=entry)
