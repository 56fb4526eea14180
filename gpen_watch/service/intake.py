"""What the watcher found, into the journal: each settled file becomes a job, a duplicate, or a
refusal set aside at once; a file that vanished ends its job as gone.

Runs on the service loop's thread; the watcher's threads only queue the items (``Service.arrived``).
"""

from __future__ import annotations

import logging
import queue
from pathlib import Path
from typing import TYPE_CHECKING

from gpen_watch.journal import hash_file
from gpen_watch.journal.journal import VANISHED, AddResult
from gpen_watch.journal.states import JobState, failure_state
from gpen_watch.outbox import duplicates
from gpen_watch.service.running import Running
from gpen_watch.watch.watcher import Arrival

if TYPE_CHECKING:
    from gpen_watch.imaging.errors import ImageInputError

log = logging.getLogger(__name__)

# Arrivals recorded per turn of the loop, so a thousand dropped files do not hold up results.
MAX_ARRIVALS_PER_TURN = 200


def take_arrivals(
    run: Running, arrivals: queue.Queue[Arrival | Path], limit: int = MAX_ARRIVALS_PER_TURN
) -> None:
    for _ in range(limit):
        try:
            item = arrivals.get_nowait()
        except queue.Empty:
            return
        try:
            if isinstance(item, Arrival):
                add(run, item)
            else:
                for job in run.journal.active_for_source(item):
                    if run.presence.inbox_away(job.inbox) is not None:
                        # Its drive or share left: nothing was deleted, it waits for it.
                        log.debug("%s: not there while its inbox is away; kept queued", item)
                        continue
                    if run.journal.move(job.id, JobState.GONE, VANISHED):
                        log.info("%s: removed from the inbox before it was processed", item)
        except Exception:
            log.exception("could not record %s", item)


def add(run: Running, a: Arrival) -> None:
    journal = run.journal
    try:
        sha = hash_file(a.path)
    except OSError as exc:
        log.debug("%s: not taken (%s)", a.path, exc)
        return
    added = journal.add(a.path, a.inbox.path, a.rel, a.size, a.mtime, sha)
    recorded(run, a.path, added, a.supported)


def recorded(run: Running, path: Path, added: AddResult, supported: bool = True) -> None:
    """What follows a file's record in the journal, for a drop and a photo sent through the API
    alike: a copy of a done photo waits for its claim, a file of a type never read and one the
    engine would refuse from its header are set aside at once, the rest is queued."""
    if added.status == "known":
        return
    if added.status == "duplicate":
        first = added.duplicate_of
        why = duplicates.settings_differ(run.cfg, added.job, first) if first is not None else None
        if first is not None and why:
            log.info("%s: same content as %s, but %s", path, first.source, why)
        else:
            log.info("%s: %s", path, added.message)
        run.maybe_queued = True  # the copy is made when it is claimed (jobs.feed)
        return
    if not supported:
        why = f"unsupported file type ({path.suffix or 'no extension'}): not a photo gpen-watch can read"
        run.fail(added.job.id, why, JobState.UNSUPPORTED, counted=False)
        log.warning("%s: set aside: %s", path, why)
        return
    rejected = refusal(run, path)
    if rejected is not None:
        # What the worker would answer, wording and kind included, without waiting for one.
        kind = failure_state(rejected.kind)
        run.fail(added.job.id, rejected.reason, kind)
        log.warning("%s: %s: %s", path, kind, rejected.reason)
        return
    run.maybe_queued = True
    log.info("queued %s", path)


def refusal(run: Running, path: Path) -> ImageInputError | None:
    """The engine's refusal of ``path`` from its header (an ImageInputError), or None."""
    if not run.header_checks:
        return None
    # Pillow and OpenCV load here on the first arrival, not at start (torch never does).
    from gpen_watch.imaging.load import header_refusal

    try:
        return header_refusal(path, run.cfg.restore.max_megapixels)
    except Exception:
        log.exception("%s: could not check the header; queued for a worker", path)
        return None
