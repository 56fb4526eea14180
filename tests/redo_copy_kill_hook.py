"""A real service SIGKILLed at one step of giving a copy's redo its photo's redone result
(``outbox.duplicates.copy_result`` for a redo).

The steps, in the order they come: ``start`` (the copy's redo claimed, nothing written), ``copied``
(the result copied to the copy's temp name and flushed, no commit token yet), ``token`` (the commit
token recorded, the copy's old result still in place), ``replaced`` (the new result in place, the
run not yet done) and ``finished`` (the run done, its original not yet recorded).

``serve()`` is `gpen-watch` with the hook installed, for a service started as
``python -c "import redo_copy_kill_hook; redo_copy_kill_hook.serve()" run ...``: the file
``GW_REDO_KILL_AT`` names holds the step to kill at; the hook empties it before it kills, so the
service started again runs on, and appends "killed STEP" to the file ``GW_REDO_KILL_LOG`` names.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpen_watch.journal.journal import Journal
from gpen_watch.outbox import duplicates

STEPS = ("start", "copied", "token", "replaced", "finished")


class _Inside(threading.local):
    redo = False  # in copy_result for a redo, on this thread


_here = _Inside()


def _at(step: str) -> None:
    if not _here.redo:
        return
    at = Path(os.environ["GW_REDO_KILL_AT"])
    try:
        armed = at.read_text().strip()
    except FileNotFoundError:
        return
    if armed != step:
        return
    with open(at, "w") as f:  # disarmed before the kill: the restarted service runs on
        f.flush()
        os.fsync(f.fileno())
    with open(os.environ["GW_REDO_KILL_LOG"], "a") as f:
        f.write(f"killed {step}\n")
        f.flush()
        os.fsync(f.fileno())
    os.kill(os.getpid(), signal.SIGKILL)


def _before(step: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*a: Any, **kw: Any) -> Any:
        _at(step)
        return fn(*a, **kw)

    return wrapper


def _after(step: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*a: Any, **kw: Any) -> Any:
        out = fn(*a, **kw)
        _at(step)
        return out

    return wrapper


def install() -> None:
    real = duplicates.copy_result

    def copy_result(journal: Journal, twin: Any, *a: Any, **kw: Any) -> Any:
        _here.redo = twin.job.is_redo
        try:
            _at("start")
            return real(journal, twin, *a, **kw)
        finally:
            _here.redo = False

    duplicates.copy_result = copy_result
    duplicates._copy_if_ours = _after("copied", duplicates._copy_if_ours)
    duplicates.dispose_original = _before("finished", duplicates.dispose_original)
    Journal.begin_commit = _after("token", Journal.begin_commit)  # type: ignore[method-assign]
    Journal.finish = _before("replaced", Journal.finish)  # type: ignore[method-assign]


def serve() -> None:
    install()
    from gpen_watch.cli import entry

    entry()
