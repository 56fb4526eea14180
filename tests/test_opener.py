"""Opening a URL or a folder for the user (platform.opener, LinuxPlatform.open_url/open_path): the
opener's exit status decides what is said, one that stays is reaped when it ends, and no opener is
left a zombie, in the tray (a long-lived process) as in the CLI. The openers here are stand-ins for
xdg-open on PATH: one that fails as xdg-open does when the browser refuses to start (status 4), one
that succeeds, and one that stays, as xdg-open's generic mode does while the browser it ran runs."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpen_watch.platform import opener
from gpen_watch.platform.linux import LinuxPlatform

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="xdg-open and /proc are Linux's")

FAILS = '#!/bin/sh\necho "$0 $1" >> "{log}"\necho "xdg-open: no method available for opening \'$1\'" >&2\nexit 4\n'
OPENS = '#!/bin/sh\necho "$0 $1" >> "{log}"\nexit 0\n'
# Stays until the test lets it go (a file appears), as xdg-open running a browser in the foreground.
STAYS = '#!/bin/sh\necho "$0 $1" >> "{log}"\nwhile [ ! -e "{go}" ]; do sleep 0.05; done\nexit 0\n'


def stand_in(folder: Path, script: str) -> Path:
    """An xdg-open of ours first on PATH; returns the file it writes each call into."""
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "calls.txt"
    exe = folder / "xdg-open"
    exe.write_text(script.format(log=log, go=folder / "go"), encoding="utf-8")
    exe.chmod(0o755)
    return log


@pytest.fixture
def openers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Path]:
    """``openers(script)``: that stand-in as this process's xdg-open (no $BROWSER), its call log."""
    monkeypatch.delenv("BROWSER", raising=False)
    monkeypatch.setattr(opener, "WAIT_S", 1.0)  # a lingering one is told apart sooner

    def use(script: str) -> Path:
        folder = tmp_path / f"bin{len(list(tmp_path.glob('bin*')))}"
        log = stand_in(folder, script)
        monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
        return log

    return use


def children() -> dict[int, str]:
    """This process's children, by pid, with their state ("Z": ended, never waited for)."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # "pid (comm) state ppid ...": the command may hold spaces and parentheses.
            state, ppid = stat.read_text().rpartition(")")[2].split()[:2]
        except (OSError, ValueError):
            continue
        if int(ppid) == os.getpid():
            found[int(stat.parent.name)] = state
    return found


def zombies() -> list[int]:
    return [pid for pid, state in children().items() if state == "Z"]


def wait_until(cond: Callable[[], Any], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_an_opener_that_fails_is_said_with_its_status_its_meaning_and_its_words(openers: Any) -> None:
    calls = openers(FAILS)
    opened = LinuxPlatform().open_url("http://127.0.0.1:8765/?token=abc")
    assert not opened.ok and not opened.lingering
    assert opened.why == (
        "xdg-open exited with status 4: the browser or application did not start "
        "(xdg-open: no method available for opening 'http://127.0.0.1:8765/?token=abc')"
    )
    assert calls.read_text().split()[1] == "http://127.0.0.1:8765/?token=abc"
    with pytest.raises(OSError, match="xdg-open exited with status 4"):
        LinuxPlatform().open_path(Path("/tmp"))
    assert zombies() == []


def test_an_opener_that_succeeds_is_waited_for(openers: Any) -> None:
    openers(OPENS)
    assert LinuxPlatform().open_url("http://127.0.0.1:8765/") == opener.Opened(True)
    LinuxPlatform().open_path(Path("/tmp"))  # no exception: it opened
    assert zombies() == []


def test_an_opener_that_stays_is_taken_as_opened_and_reaped_once_it_ends(
    openers: Any, tmp_path: Path
) -> None:
    calls = openers(STAYS)
    before = set(children())
    started = time.monotonic()
    opened = LinuxPlatform().open_url("http://127.0.0.1:8765/")
    assert opened == opener.Opened(True, lingering=True)
    assert time.monotonic() - started < 10  # waited for a bounded while, not for the browser
    staying = set(children()) - before
    assert calls.exists() and len(staying) == 1 and zombies() == []
    (calls.parent / "go").touch()  # the browser it ran quits: it ends and is waited for
    wait_until(lambda: not staying & set(children()), "the opener reaped")


def test_browser_names_the_users_own_browser(
    openers: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    openers(FAILS)  # xdg-open would fail: $BROWSER comes first, as Python's webbrowser has it
    seen = tmp_path / "seen.txt"
    browser = f"{sys.executable} -c \"import sys; open({str(seen)!r}, 'w').write(sys.argv[1])\" %s"
    monkeypatch.setenv("BROWSER", f"/nowhere/browser{os.pathsep}{browser}")
    assert LinuxPlatform().open_url("http://127.0.0.1:8765/") == opener.Opened(True)
    assert seen.read_text() == "http://127.0.0.1:8765/"
    assert opener.browser_command("u", {"BROWSER": "firefox --new-tab"}) in (
        None,
        ["firefox", "--new-tab", "u"],
    )
    monkeypatch.setenv("BROWSER", f"{sys.executable} -c 'raise SystemExit(3)'")
    assert (
        LinuxPlatform()
        .open_url("http://127.0.0.1:8765/")
        .why.startswith(f"{os.path.basename(sys.executable)} exited with status 3")
    )


def test_no_opener_at_all_is_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BROWSER", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert LinuxPlatform().open_url("http://127.0.0.1:8765/") == opener.Opened(
        False, "xdg-open is not installed (xdg-utils) and $BROWSER names no browser"
    )
