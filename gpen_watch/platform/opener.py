"""Starting a program that opens a URL or a file for the user (xdg-open, macOS's open, the user's
$BROWSER), and knowing whether it did.

An opener usually hands the URL to the desktop and exits at once, with a status that says whether
that worked (xdg-open: 4 when the browser did not start). Some stay until the browser they started
quits (xdg-open's generic mode runs $BROWSER in the foreground). So the opener is waited for, up
to ``WAIT_S``: its exit status decides; one still running then is taken as the browser running,
and a thread reaps it when it ends. Either way no opener is left a zombie in a long-lived process
(the tray), as an opener started and never waited for is.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass

log = logging.getLogger(__name__)

# Seconds an opener has to say how it went; one still running then has started something.
WAIT_S = 3.0
# Characters of an opener's own error output quoted in the reason.
ERROR_CHARS = 300


@dataclass(frozen=True)
class Opened:
    """What became of a request to open something: ``ok`` (it opened, or an opener that stays
    while the application runs is running), else ``why`` it did not, in words."""

    ok: bool
    why: str = ""
    # The opener was still running after WAIT_S (reaped later): most likely the application it
    # started, which has not shown anything yet.
    lingering: bool = False


def launch(argv: list[str], *, meanings: Mapping[int, str] | None = None) -> Opened:
    """Run an opener detached from our session; its exit status (with ``meanings``' words for a
    status, and its own first error line) within ``WAIT_S``, or ``lingering``."""
    name = os.path.basename(argv[0])
    # Its errors go to a file, not a pipe: a browser it starts inherits the descriptor, and a pipe
    # would stay open (and a read of it wait) for as long as that browser runs.
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True
            )
        except OSError as exc:
            return Opened(False, f"{name} could not be started: {exc.strerror or exc}")
        try:
            status = proc.wait(WAIT_S)
        except subprocess.TimeoutExpired:
            reap_later(proc)
            return Opened(True, lingering=True)
        if status == 0:
            return Opened(True)
        err.seek(0)
        said = err.read(ERROR_CHARS * 4).decode(errors="replace").strip().splitlines()
    why = f"{name} exited with status {status}" if status > 0 else f"{name} was killed (signal {-status})"
    meaning = (meanings or {}).get(status)
    if meaning:
        why += f": {meaning}"
    if said:
        why += f" ({said[0][:ERROR_CHARS]})"
    return Opened(False, why)


def reap_later(proc: subprocess.Popen[bytes]) -> None:
    """Wait for ``proc`` on a thread of its own, so that it is no zombie once it ends."""
    threading.Thread(target=proc.wait, name=f"gpen-watch-reap-{proc.pid}", daemon=True).start()


def browser_command(url: str, environ: Mapping[str, str]) -> list[str] | None:
    """The user's own browser from $BROWSER, as Python's webbrowser and xdg-open read it: a list
    of command lines separated by the path separator, the first one found on the PATH, with the
    URL for its "%s" or after it; None when $BROWSER names none."""
    for line in environ.get("BROWSER", "").split(os.pathsep):
        try:
            argv = shlex.split(line)
        except ValueError:
            continue
        if not argv or shutil.which(argv[0]) is None:
            continue
        if any("%s" in a for a in argv[1:]):
            return [argv[0], *(a.replace("%s", url) for a in argv[1:])]
        return [*argv, url]
    return None
