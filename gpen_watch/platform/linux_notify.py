"""Desktop notices on Linux and the BSDs: the freedesktop Notifications service on the session bus.

Through notify-send (libnotify) where it is installed, else GLib's gdbus, which most desktops
have; both only when a session bus exists (``DBUS_SESSION_BUS_ADDRESS``, or the ``bus`` socket
systemd's user session puts in ``$XDG_RUNTIME_DIR``): a service on a server or a NAS, or started
from a plain SSH login, has none, and there is nothing to show a notice on.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import threading
from collections.abc import Mapping
from pathlib import Path

APP_NAME = "gpen-watch"
DEST = "org.freedesktop.Notifications"
OBJECT_PATH = "/org/freedesktop/Notifications"
# gdbus gives up on a notification daemon that does not answer after this long.
CALL_TIMEOUT_S = 10


def session_bus(environ: Mapping[str, str] | None = None) -> str | None:
    """The session bus's address, or None where this process has no desktop session."""
    env = os.environ if environ is None else environ
    address = env.get("DBUS_SESSION_BUS_ADDRESS", "").strip()
    if address:
        return address
    runtime = env.get("XDG_RUNTIME_DIR", "")
    if runtime:
        bus = Path(runtime) / "bus"
        try:
            if stat.S_ISSOCK(bus.stat().st_mode):
                return f"unix:path={bus}"
        except OSError:
            pass
    return None


def gvariant_string(text: str) -> str:
    """``text`` as a GVariant text-format string, which gdbus parses its arguments as."""
    out = []
    for c in text:
        if c in ('"', "\\"):
            out.append("\\" + c)
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def command(title: str, message: str) -> list[str] | None:
    """The program and arguments that send one notice; None when neither is installed."""
    sender = shutil.which("notify-send")
    if sender is not None:
        return [sender, f"--app-name={APP_NAME}", "--", title, message]
    gdbus = shutil.which("gdbus")
    if gdbus is not None:
        # Notify(app_name s, replaces_id u, app_icon s, summary s, body s, actions as, hints a{sv},
        # expire_timeout i), each typed in the text so no introspection is needed.
        return [
            gdbus,
            "call",
            "--session",
            "--timeout",
            str(CALL_TIMEOUT_S),
            "--dest",
            DEST,
            "--object-path",
            OBJECT_PATH,
            "--method",
            f"{DEST}.Notify",
            gvariant_string(APP_NAME),
            "uint32 0",
            gvariant_string(""),
            gvariant_string(title),
            gvariant_string(message),
            "@as []",
            "@a{sv} {}",
            "int32 -1",
        ]
    return None


def notify(title: str, message: str, environ: Mapping[str, str] | None = None) -> bool:
    """Send one notice, not waiting for it; False when there is no session bus or no sender."""
    env = dict(os.environ if environ is None else environ)
    bus = session_bus(env)
    argv = command(title, message) if bus is not None else None
    if bus is None or argv is None:
        return False
    env["DBUS_SESSION_BUS_ADDRESS"] = bus
    proc = subprocess.Popen(
        argv,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    # Reaped on a thread: a notification daemon that is slow to answer holds up no one.
    threading.Thread(target=proc.wait, name="gpen-watch-notify", daemon=True).start()
    return True
