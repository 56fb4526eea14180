"""The jobs' way through the pool: claim queued jobs and hand them to the workers (``feed``), then
record what the workers answer (``on_event``): commit a result, set a failure aside, requeue what
the outbox refused.

Runs on the service loop's thread, which owns the pool and the journal's job transitions.
"""

from __future__ import annotations

import logging
import os
import time

from gpen_watch.dispatch.pool import DONE, GAVE_UP, RETRY, PoolEvent, Task
from gpen_watch.errors import OutputError
from gpen_watch.fsutil import remove_quietly
from gpen_watch.journal.states import JobState
from gpen_watch.outbox import commit, failed, originals
from gpen_watch.service.running import OUTBOX_RETRY_S, Running

log = logging.getLogger(__name__)


def feed(run: Running) -> None:
    """Claim as many queued jobs as the workers can take and hand them over."""
    journal, pool = run.journal, run.pool
    if run.paused or run.stop.is_set():
        return
    if run.hold_until:
        if time.monotonic() < run.hold_until:
            return
        run.hold_until = 0.0
    n = pool.capacity()
    if n <= 0 or not run.maybe_queued:
        return
    batch = journal.claim_batch(n, "pool")
    for dup in batch.duplicates:
        # A twin that waited for the same photo dropped at the same moment: now a duplicate of
        # it, handled exactly as a drop after the first was done.
        log.info("%s: %s", dup.job.source, dup.message)
        try:
            run.originals.note(originals.dispose_original(journal, dup.job.id, run.cfg))
        except Exception:
            log.exception(
                "%s: could not dispose of the original (the next start tries again)", dup.job.source
            )
    claimed = batch.jobs
    # Held twins are claimed (or found duplicates) once a job ends: see Running.job_ended.
    run.maybe_queued = len(claimed) == n
    tasks: list[Task] = []
    for job in claimed:
        if not os.path.lexists(job.source):
            journal.requeue(job.id, "file missing")
            journal.mark_gone(job.id)
            run.job_ended()
            log.info("%s: gone from the inbox before it was processed", job.source)
            continue
        try:
            tasks.append(Task(job.id, commit.file_job(journal, job.id, run.cfg)))
        except (OutputError, OSError) as exc:
            if not _environmental(exc):
                # Something about this one file (its output name): it fails, the rest go on.
                run.originals.note(failed.fail(journal, job.id, str(exc), run.cfg))
                run.job_ended()
                continue
            journal.requeue(job.id, f"outbox: {exc}")
            run.outbox_trouble(str(exc))
    if tasks:
        pool.submit(tasks)
        if run.problem and run.problem.startswith("outbox"):
            run.problem = None


def on_event(run: Running, ev: PoolEvent) -> None:
    journal = run.journal
    if ev.kind in (DONE, GAVE_UP):
        run.job_ended()
    try:
        if ev.kind == DONE:
            _on_result(run, ev)
        elif ev.kind == GAVE_UP:
            run.tp.failed += 1
            log.error("%s: %s", ev.task.job.src, ev.message)
            run.originals.note(failed.fail(journal, ev.task.key, ev.message, run.cfg, tmp=ev.task.job.dst))
        elif ev.kind == RETRY:
            journal.log_event(ev.task.key, "retry", ev.message, ev.worker)
            log.warning("%s: %s", ev.task.job.src, ev.message)
    except OutputError as exc:
        # Disk full, outbox read-only or gone: the original stays in the inbox and the job
        # waits; new work is held back until the outbox takes writes again.
        remove_quietly(ev.task.job.dst)
        if journal.requeue(ev.task.key, f"outbox: {exc}"):
            run.outbox_trouble(str(exc))
    except Exception as exc:
        # One job's bookkeeping must not stop the service; the job is retried later.
        log.exception("%s: could not record the result", ev.task.job.src)
        remove_quietly(ev.task.job.dst)
        if journal.requeue(ev.task.key, f"internal error: {exc}"):
            run.maybe_queued = True
            run.hold_until = time.monotonic() + OUTBOX_RETRY_S


def _on_result(run: Running, ev: PoolEvent) -> None:
    journal, task, res = run.journal, ev.task, ev.result
    if res is None:
        raise ValueError(f"{task.job.src}: the pool reported a result without one")
    if res.ok:
        outcome = commit.commit(journal, task.key, res, run.cfg)
        if outcome.output is None:
            return  # the job had already ended another way
        run.originals.note(outcome.original)
        run.tp.record(res.faces)
        notes = f" ({'; '.join(res.notes)})" if res.notes else ""
        if res.faces:
            log.info("restored %s -> %s, %d face(s)%s", task.job.src, outcome.output, res.faces, notes)
        else:  # done, but not "restored": counted apart in status as well
            log.info("no face in %s; written to %s%s", task.job.src, outcome.output, notes)
        return
    if res.error_kind == "outbox":
        # The outbox refused the write (full, read-only, gone): not this photo's fault. It waits
        # in the inbox, queued, and new work is held back until the outbox takes writes again.
        remove_quietly(res.dst or task.job.dst)
        if journal.requeue(task.key, f"outbox: {res.error}"):
            run.outbox_trouble(res.error or "cannot write")
        return
    kind = JobState.UNSUPPORTED if res.error_kind == "unsupported" else JobState.FAILED
    reason = res.error or "unknown error"
    run.tp.failed += 1
    run.originals.note(
        failed.fail(journal, task.key, reason, run.cfg, kind=kind, tmp=res.dst or task.job.dst)
    )
    log.warning("%s: %s: %s", task.job.src, kind, reason)


def _environmental(exc: BaseException) -> bool:
    """An error of the outbox as a whole (the OS refused a write), not of one file's name."""
    return isinstance(exc, OSError) or isinstance(exc.__cause__, OSError)
