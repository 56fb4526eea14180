"""The outbox's subfolders that the service makes for a job (mirroring the inbox's), and their
removal when the job fails and leaves one empty: the outbox then shows no folder that never got
a result. A folder the service did not make (the user's own, one from before) is never removed.

The journal remembers each folder a job's ``commit.prepare`` made (an event of kind ``MADE``), so
this holds across a restart. The service's main thread both prepares jobs and ends them, so no
job's folder is made between the checks here and the removal.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from gpen_watch.base.errors import OutboxUnavailable
from gpen_watch.journal.journal import Job, Journal
from gpen_watch.outbox import naming
from gpen_watch.platform import presence

MADE = "made folder"


def make_output_dir(
    journal: Journal, job_id: int, directory: Path, root: Path, away: presence.Away = presence.present
) -> None:
    """``naming.ensure_dir``, noting in the journal each folder of it that did not exist."""
    if (why := away(root)) is not None:
        # An outbox the service has seen is never made again here: on a drive that left, that
        # would make it in the bare mount point. (One never seen, in a test or a tool, is made.)
        raise OutboxUnavailable(f"{root}: the outbox is away: {why}") from FileNotFoundError(
            errno.ENOENT, why, os.fspath(root)
        )
    missing = [folder for folder in _below(directory, root) if not os.path.lexists(folder)]
    naming.ensure_dir(directory, root)
    for folder in reversed(missing):
        journal.log_event(job_id, MADE, os.fspath(folder))


def remove_left_empty(journal: Journal, job: Job, root: Path) -> None:
    """Remove the folder of ``job``'s reserved output, then its parents up to ``root`` (kept),
    while each is empty, was made by the service, and holds no active job's reserved output."""
    if job.output is None or not naming.inside(job.output, root):
        return
    reserved = journal.active_outputs()
    for folder in _below(job.output.parent, root):
        if not journal.has_event(MADE, os.fspath(folder)):
            return
        if any(naming.inside(out, folder) for out in reserved):
            return
        try:
            os.rmdir(folder)  # refuses a folder that is not empty
        except OSError:
            return


def _below(directory: Path, root: Path) -> list[Path]:
    """``directory`` and its parents strictly below ``root``, deepest first."""
    root = Path(os.path.abspath(root))
    folders = []
    current = Path(os.path.abspath(directory))
    while current != root and naming.inside(current, root):
        folders.append(current)
        current = current.parent
    return folders
