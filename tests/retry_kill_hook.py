"""A real process SIGKILLed at one step of a retry's file moves (``outbox.retry.send_back``).

``install(kill_at, log)`` wraps every step ``send_back`` takes: the journal's record of the retry,
each link, copy, flush and removal (a copy counts twice: before it starts, and half way through,
where the kill leaves a half-written temp copy). The step ``kill_at()`` names (its number, or its
name), read as each retry starts, writes its name to ``log`` and SIGKILLs the process; a retry that ends with fewer steps writes "completed N".
Only steps on the thread running ``send_back`` count, so the service's other threads are left alone.

``serve()`` is `gpen-watch` with the hook installed, for a service started as
``python -c "import retry_kill_hook; retry_kill_hook.serve()" run ...``: each retry reads its
step from the file ``GW_RETRY_KILL_AT`` names (0 or no file: no kill), so one service can be
armed for the next round while it runs.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpen_watch.journal.journal import Journal
from gpen_watch.outbox import retry


class _Counter(threading.local):
    armed = False
    steps = 0
    kill_at: int | str = 0  # the step's number, or the name of the step to kill at


_here = _Counter()
_log = Path(os.devnull)


def _step(name: str) -> bool:
    """Count a step; True when it is the one to kill at (the caller kills, perhaps half way)."""
    if not _here.armed:
        return False
    _here.steps += 1
    return _here.kill_at in (_here.steps, name)


def _kill(name: str) -> None:
    with open(_log, "a") as f:
        f.write(f"killed {_here.steps} {name}\n")
        f.flush()
        os.fsync(f.fileno())
    os.kill(os.getpid(), signal.SIGKILL)


def _counted(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*a: Any, **kw: Any) -> Any:
        if _step(name):
            _kill(name)
        return fn(*a, **kw)

    return wrapper


def _copy2(real: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(src: Any, dst: Any, **kw: Any) -> Any:
        if _step("copy"):
            _kill("copy")
        if _step("copy half way"):
            data = Path(src).read_bytes()
            with open(dst, "wb") as f:
                f.write(data[: len(data) // 2])
                f.flush()
                os.fsync(f.fileno())
            _kill("copy half way")
        return real(src, dst, **kw)

    return wrapper


def install(kill_at: Callable[[], int | str], log: Path) -> None:
    global _log
    _log = log
    for name in ("link_no_clobber", "fsync_dir", "fsync_file", "remove_quietly"):
        setattr(retry, name, _counted(name, getattr(retry, name)))
    os.unlink = _counted("unlink", os.unlink)
    shutil.copy2 = _copy2(shutil.copy2)
    Journal.hide = _counted("journal.hide", Journal.hide)  # type: ignore[method-assign]
    real_send_back = retry.send_back

    def send_back(*a: Any, **kw: Any) -> Path:
        _here.armed, _here.steps, _here.kill_at = True, 0, kill_at()
        try:
            return real_send_back(*a, **kw)
        finally:
            _here.armed = False
            if _here.kill_at:
                with open(_log, "a") as f:
                    f.write(f"completed {_here.steps}\n")

    retry.send_back = send_back


def _kill_at_from_file() -> int:
    path = os.environ.get("GW_RETRY_KILL_AT")
    try:
        return int(Path(path).read_text() or 0) if path else 0
    except FileNotFoundError:
        return 0


def serve() -> None:
    install(_kill_at_from_file, Path(os.environ["GW_RETRY_KILL_LOG"]))
    from gpen_watch.cli import entry

    entry()
