"""Moving an original out of the inbox, collision-safe and recorded in the journal before and after.

Shared by the archive (``originals.dispose_original``) and failed/ (``failed.set_aside``). A move
that the destination refuses for a reason that can clear (full, read-only, no permission, gone,
I/O error) leaves the original in the inbox as "waiting" (``originals.retry_waiting`` tries again);
any other refusal leaves it where it is ("left"). The original is only touched if it is still the
file the job restored (same size and mtime); otherwise it was replaced by a newer file, which is a
job of its own.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpen_watch.base.errors import OutputError
from gpen_watch.base.fsutil import FOLDER_REFUSES
from gpen_watch.journal.journal import Job, Journal
from gpen_watch.journal.states import Original
from gpen_watch.outbox import durable, naming
from gpen_watch.platform import presence

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OriginalOutcome:
    """What happened to the original: archived, kept, deleted, set-aside (in failed/), left (could
    not be moved: ``detail`` says why), waiting (still in the inbox: ``folder`` refused it for a
    reason that can clear, ``detail``; retried later), missing (no longer there), replaced (a
    different file is there now)."""

    action: Original
    path: Path | None = None
    detail: str = ""
    folder: Path | None = None


def source_state(job: Job, away: presence.Away = presence.present) -> str:
    """ "same" if the inbox file is still the one this job took, else "missing" or "changed", or
    "away" when it is not there because its inbox's drive or share is (``away``, ``platform.presence``)."""
    try:
        st = os.lstat(job.source)
    except FileNotFoundError:
        return "away" if away(job.inbox) is not None else "missing"
    if not stat.S_ISREG(st.st_mode) or st.st_size != job.size or st.st_mtime != job.mtime:
        return "changed"
    return "same"


# Called with the original's new path once it is there, before the journal records the move as
# done: what must sit beside it (failed/'s error file) is then redone after a crash, with the move.
Arrived = Callable[[Path], None]


def resume_move(
    journal: Journal, job: Job, marker: Original, action: Original, arrived: Arrived | None = None
) -> OriginalOutcome | None:
    """Finish a move that a crash interrupted (journal says ``marker`` with its destination)."""
    if job.original != marker or job.original_path is None:
        return None
    dest, src = job.original_path, job.source
    if os.path.lexists(dest):
        if os.path.lexists(src) and os.path.samefile(src, dest):
            os.unlink(src)  # linked into place, old name not yet removed
            durable.fsync_dir(src.parent)
        if not os.path.lexists(src):
            if arrived is not None:
                arrived(dest)
            journal.set_original(job.id, action, dest)
            return OriginalOutcome(action, dest)
    return None


def move_original(
    journal: Journal,
    job: Job,
    directory: Path,
    root: Path,
    marker: Original,
    action: Original,
    taken: Callable[[Path], bool] | None = None,
    arrived: Arrived | None = None,
    away: presence.Away = presence.present,
) -> OriginalOutcome:
    """Move the original into ``directory`` (under ``root``) collision-safe, recording before and after.

    ``taken`` rules out further names (failed/ also needs ``<name>.error.txt`` free); ``arrived``
    is called with the new path before the move is recorded as done. If the file
    cannot be moved it stays where it is: "waiting" when the destination refused it for a reason
    that can clear (``FOLDER_REFUSES``: ``retry_waiting`` tries again), otherwise "left" with the
    reason (a read-only inbox the original cannot leave, a name the folder cannot hold).
    """
    resumed = resume_move(journal, job, marker, action, arrived)
    if resumed is not None:
        return resumed
    state = source_state(job, away)
    if state == "away":
        # Not deleted: it is on a drive or share that left. It waits, and is moved once it is back.
        why = f"its inbox {job.inbox} is away: {away(job.inbox)}"
        if job.original != Original.WAITING:
            journal.set_original(job.id, Original.WAITING, directory)
            journal.log_event(job.id, "original-waiting", why)
            log.warning("%s: %s; it is moved once the inbox is back", job.source, why)
        return OriginalOutcome(Original.WAITING, job.source, why, folder=root)
    if state != "same":
        what = Original.MISSING if state == "missing" else Original.REPLACED
        journal.set_original(job.id, what)
        return OriginalOutcome(what)
    try:
        naming.ensure_dir(directory, root)
        planned = naming.free_name(directory, naming.truncate_name(job.source.name), taken)
        journal.set_original(job.id, marker, planned)
        dest = durable.move_no_clobber(job.source, directory, planned.name, job.id, taken=taken)
    except (OSError, OutputError) as exc:
        reason = refusal_reason(exc)
        why = f"could not move it to {directory}: {reason}"
        if _folder_trouble(exc, job.source):
            was_waiting = job.original == Original.WAITING
            journal.set_original(job.id, Original.WAITING, directory)
            if not was_waiting:  # a retry that fails again adds nothing to the history
                journal.log_event(job.id, "original-waiting", why)
                log.warning(
                    "%s: %s; it waits in the inbox and is moved once the folder works", job.source, why
                )
            return OriginalOutcome(Original.WAITING, job.source, reason, folder=root)
        journal.set_original(job.id, Original.LEFT)
        journal.log_event(job.id, "original-left", why)
        log.warning("%s: %s; left in place", job.source, why)
        return OriginalOutcome(Original.LEFT, job.source, why)
    if arrived is not None:
        arrived(dest)
    journal.set_original(job.id, action, dest)
    return OriginalOutcome(action, dest)


def _os_error(exc: BaseException) -> OSError | None:
    if isinstance(exc, OSError):
        return exc
    return exc.__cause__ if isinstance(exc.__cause__, OSError) else None


def refusal_reason(exc: BaseException) -> str:
    os_exc = _os_error(exc)
    if os_exc is not None and os_exc.strerror:
        return os_exc.strerror
    return str(exc)


def _folder_trouble(exc: BaseException, source: Path) -> bool:
    """Whether the destination folder refused the move for a reason that can clear.

    Removing the original from the inbox is not the destination's trouble (a read-only inbox): such
    an original is left, as the keep policy would leave it. A name the folder can never hold, or a
    folder that leads out of its root, is not retried either.
    """
    os_exc = _os_error(exc)
    if os_exc is None or os_exc.errno not in FOLDER_REFUSES:
        return False
    return not (os_exc.filename == os.fspath(source) and os_exc.filename2 is None)
