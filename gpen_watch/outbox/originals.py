"""What becomes of an original after its job ended: archived, kept or deleted after success (per
``output.originals``), set aside in failed/ after a failure, and retried while its folder refuses it.

An original is only ever touched after its result is durable in the outbox (``commit``) or its
failure is recorded (``failed``). Deleting is the one step that cannot be undone, so it deletes
only the exact content that was restored (same sha256).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpen_watch.base.errors import OutputError
from gpen_watch.config import Config, inbox_config
from gpen_watch.journal.journal import Job, Journal, hash_file
from gpen_watch.journal.states import ORIGINAL_FINAL, SUCCEEDED, Original
from gpen_watch.outbox import durable, failed, naming
from gpen_watch.outbox.moves import OriginalOutcome, move_original, refusal_reason, source_state
from gpen_watch.platform import presence

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Waiting:
    """Originals still waiting for ``folder`` after a ``retry_waiting`` pass, and why."""

    folder: Path
    reason: str
    count: int


def dispose_original(
    journal: Journal, job_id: int, cfg: Config, away: presence.Away = presence.present
) -> OriginalOutcome:
    """Apply ``output.originals`` to a done (or duplicate) job's original. Idempotent."""
    job = journal.require(job_id)
    if job.original is not None and job.original in ORIGINAL_FINAL:
        return OriginalOutcome(job.original, job.original_path)
    if job.state not in SUCCEEDED:
        raise ValueError(f"job {job_id} is {job.state}; originals are handled only after success")
    if job.is_redo:  # restored again from where the first run left it: it stays there
        journal.set_original(job.id, Original.KEPT, job.source)
        return OriginalOutcome(Original.KEPT, job.source)
    inbox = naming.find_inbox(cfg, job.inbox)
    policy = inbox_config(cfg, inbox).output.originals
    # A waiting original waits for the archive (only moves wait): that move is what is retried.
    if job.original in (Original.ARCHIVING, Original.WAITING) or (
        policy == "archive" and job.original is None
    ):
        root = naming.archive_root(cfg, inbox)
        return move_original(
            journal,
            job,
            naming.mirror_dir(root, job.rel.parent),
            root,
            Original.ARCHIVING,
            Original.ARCHIVED,
            away=away,
        )
    if job.original == Original.DELETING or (policy == "delete" and job.original is None):
        return _delete_original(journal, job, away)
    journal.set_original(job.id, Original.KEPT, job.source)
    return OriginalOutcome(Original.KEPT, job.source)


def _delete_original(journal: Journal, job: Job, away: presence.Away) -> OriginalOutcome:
    state = source_state(job, away)
    if state == "away":  # on a drive or share that left: not deleted by us, and not missing
        why = f"not deleted: its inbox {job.inbox} was away"
        journal.set_original(job.id, Original.LEFT)
        journal.log_event(job.id, "original-left", why)
        return OriginalOutcome(Original.LEFT, job.source, why)
    if state == "missing":
        action = Original.DELETED if job.original == Original.DELETING else Original.MISSING
        journal.set_original(job.id, action)
        return OriginalOutcome(action)
    # Deleting is the one step that cannot be undone: only the exact content that was restored.
    try:
        same = state == "same" and hash_file(job.source) == job.sha256
    except OSError:
        same = False
    if not same:
        journal.set_original(job.id, Original.REPLACED)
        return OriginalOutcome(Original.REPLACED)
    journal.set_original(job.id, Original.DELETING, job.source)
    try:
        os.unlink(job.source)
    except OSError as exc:
        why = f"could not delete it: {exc.strerror or exc}"
        journal.set_original(job.id, Original.LEFT)
        journal.log_event(job.id, "original-left", why)
        return OriginalOutcome(Original.LEFT, job.source, why)
    durable.fsync_dir(job.source.parent)
    journal.set_original(job.id, Original.DELETED)
    return OriginalOutcome(Original.DELETED)


def destination_root(cfg: Config, job: Job) -> Path:
    """The folder a job's original goes to: the archive after success, failed/ otherwise."""
    inbox = naming.find_inbox(cfg, job.inbox)
    if job.state in SUCCEEDED:
        return naming.archive_root(cfg, inbox)
    return naming.failed_root(naming.outbox_root(cfg, inbox))


def handle_original(
    journal: Journal, job_id: int, cfg: Config, away: presence.Away = presence.present
) -> OriginalOutcome:
    """Archive/keep/delete a done or duplicate job's original, set a failed one's aside."""
    job = journal.require(job_id)
    if job.state in SUCCEEDED:
        return dispose_original(journal, job_id, cfg, away)
    return failed.set_aside(journal, job_id, cfg, away)


def retry_waiting(
    journal: Journal,
    cfg: Config,
    on_outcome: Callable[[OriginalOutcome], None] | None = None,
    away: presence.Away = presence.present,
) -> tuple[int, list[Waiting]]:
    """Try again to move the originals waiting for their folder (oldest first).

    Returns how many were dealt with (moved, left, or found missing or replaced) and, per folder
    that still refuses, the reason and how many wait for it. After one refusal a folder is not
    tried again in the same pass: a thousand originals waiting for a full disk cost one attempt,
    not a thousand. The photos' results are already in the outbox; nothing is restored again.
    ``on_outcome`` hears of each original dealt with (the service counts those left in the inbox).
    """
    handled = 0
    blocked: dict[Path, list[Any]] = {}
    for job in journal.waiting_originals():
        root = destination_root(cfg, job)
        if root in blocked:
            blocked[root][1] += 1
            continue
        try:
            outcome = handle_original(journal, job.id, cfg, away)
        except (OSError, OutputError) as exc:
            outcome = OriginalOutcome(Original.WAITING, job.source, refusal_reason(exc), folder=root)
            log.warning("run %d: could not handle the original %s: %s", job.id, job.source, exc)
        if outcome.action == Original.WAITING:
            blocked[root] = [outcome.detail, 1]
        else:
            handled += 1
            log.info("%s: %s %s", job.source, outcome.action, outcome.path or "")
            if on_outcome is not None:
                on_outcome(outcome)
    return handled, [Waiting(folder, reason, n) for folder, (reason, n) in blocked.items()]
