"""The jobs' way through the pool: claim queued jobs and hand them to the workers (``feed``), then
record what the workers answer (``on_event``): commit a result, set a failure aside, requeue what
the outbox refused.

Runs on the service loop's thread, which owns the pool and the journal's job transitions.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from pathlib import Path

from gpen_watch.base.errors import ErrorKind, OutputError
from gpen_watch.base.fsutil import remove_quietly
from gpen_watch.dispatch.pool import DONE, GAVE_UP, RETRY, PoolEvent, Task
from gpen_watch.journal.journal import VANISHED, Twin
from gpen_watch.journal.states import JobState, failure_state
from gpen_watch.outbox import commit, duplicates, naming
from gpen_watch.service.running import OUTBOX_RETRY_S, Running

log = logging.getLogger(__name__)


def feed(run: Running) -> None:
    """Claim as many queued jobs as the workers can take and hand them over."""
    journal, pool = run.journal, run.pool
    if run.stop.is_set():
        return
    _presence(run)
    standby = run.in_standby()  # looked at even while paused, for the status to say
    if run.paused or standby:
        return
    if run.hold_until:
        if time.monotonic() < run.hold_until:
            return
        run.hold_until = 0.0
    n = pool.capacity()
    if n <= 0 or not run.maybe_queued:
        return
    if run.presence.away_outboxes():
        return  # no result can be written: the photos wait, queued, until it is back (_presence)
    batch = journal.claim_batch(n, "pool", run.presence.away_inboxes())
    claimed = list(batch.jobs)
    for twin in batch.copies:
        if not _copy(run, twin):
            claimed.append(journal.require(twin.job.id))
    for twin in batch.repeats:
        if not _repeat(run, twin):
            claimed.append(journal.require(twin.job.id))
    # Held twins are claimed (as copies or repeats) once a job ends: see Running.job_ended.
    run.maybe_queued = len(batch.jobs) + len(batch.copies) + len(batch.repeats) == n
    tasks: list[Task] = []
    for job in claimed:
        if not os.path.lexists(job.source):
            if (why := run.presence.inbox_away(job.inbox)) is not None:
                # Not deleted: its inbox went away since the claim looked. It waits for it.
                journal.move(job.id, JobState.QUEUED, f"its inbox is away: {why}")
                run.maybe_queued = True
                continue
            journal.move(job.id, JobState.QUEUED, "file missing")
            journal.move(job.id, JobState.GONE, VANISHED)
            run.ended(None)
            log.info("%s: gone from the inbox before it was processed", job.source)
            continue
        try:
            file_job = commit.file_job(journal, job.id, run.cfg, away=run.presence.away)
            if run.views is not None:
                file_job.views = run.views.folder(job.id)
            tasks.append(Task(job.id, file_job))
        except (OutputError, OSError) as exc:
            _cannot_prepare(run, job.id, exc)
    if tasks:
        pool.submit(tasks)
        if run.problem and run.problem.startswith("outbox"):
            run.problem = None


def _presence(run: Running) -> None:
    """Look whether a folder went away or came back; when one is back, work resumes by itself."""
    changes = run.presence.check()
    if any(c.reason is None for c in changes):
        run.maybe_queued = True
        run.originals.retry_soon()
        if run.problem and run.problem.startswith("outbox"):
            run.problem, run.hold_until = None, 0.0  # what the outbox refused while it was away
    if run.held and not run.presence.away_outboxes():
        commit_held(run)


def commit_held(run: Running) -> None:
    """The results done while their outbox was away, committed now that it is back; one whose
    temp file went with the drive (or a restart of it) is restored again."""
    held, run.held = run.held, []
    for ev in held:
        if os.path.lexists(_tmp(ev)):
            on_event(run, ev)
        elif run.journal.move(ev.task.key, JobState.QUEUED, "its result was lost with the outbox's drive"):
            run.maybe_queued = True
            log.warning(
                "%s: its result was not on the outbox's drive when it came back: restored again",
                ev.task.job.src,
            )


def _tmp(ev: PoolEvent) -> Path:
    return Path(ev.result.dst if ev.result is not None and ev.result.dst else ev.task.job.dst)


def _outbox_away(run: Running, job_id: int) -> str | None:
    job = run.journal.require(job_id)
    return run.presence.outbox_away(naming.outbox_root(run.cfg, naming.find_inbox(run.cfg, job.inbox)))


def _hold(run: Running, ev: PoolEvent, why: str) -> None:
    """A result done while its outbox is away: kept for when it is back, never failed."""
    tmp = _tmp(ev)
    if os.path.lexists(tmp):
        # Written after the drive left, so into the bare mount point, which must stay empty.
        remove_quietly(tmp)
        if run.journal.move(ev.task.key, JobState.QUEUED, f"outbox away: {why}"):
            run.maybe_queued = True
        return
    run.held.append(ev)
    log.info("%s: done; its result waits for the outbox to be back (%s)", ev.task.job.src, why)


def _inbox_went(run: Running, ev: PoolEvent) -> bool:
    """Whether the job's inbox is away: then the job goes back to the queue, not to failed."""
    why = run.presence.inbox_away(run.journal.require(ev.task.key).inbox)
    if why is None:
        return False
    remove_quietly(_tmp(ev))
    if run.journal.move(ev.task.key, JobState.QUEUED, f"its inbox is away: {why}"):
        run.maybe_queued = True
        log.info("%s: its inbox went away while it was restored; it waits until it is back", ev.task.job.src)
    return True


def _cannot_prepare(run: Running, job_id: int, exc: OutputError | OSError) -> None:
    if not _environmental(exc):
        # Something about this one file (its output name): it fails, the rest go on.
        run.fail(job_id, str(exc), counted=False)
        return
    run.journal.move(job_id, JobState.QUEUED, f"outbox: {exc}")
    run.outbox_trouble(str(exc))


def _copy(run: Running, twin: Twin) -> bool:
    """Give a copy of a done photo its copy of the result; False: restore it instead."""
    job = twin.job
    why = _other_settings(run, twin, str(twin.first.source))
    if why:
        return not _restore_instead(run, twin, why)
    try:
        outcome = duplicates.copy_result(run.journal, twin, run.cfg, run.presence.away)
    except duplicates.FirstResultGone as exc:
        return not _restore_instead(
            run, twin, f"the result of {twin.first.source} cannot be copied ({exc}): restored afresh"
        )
    except (OutputError, OSError) as exc:
        _cannot_prepare(run, job.id, exc)
        return True
    except Exception as exc:
        log.exception("%s: could not copy the result of %s", job.source, twin.first.source)
        if run.journal.move(job.id, JobState.QUEUED, f"internal error: {exc}"):
            run.hold_until = time.monotonic() + OUTBOX_RETRY_S
        return True
    run.ended(outcome.original)
    if outcome.output is not None:
        if run.views is not None:
            run.views.copied(job.id, twin.first.id)
        log.info("%s: same content as %s; result %s", job.source, twin.first.source, outcome.output)
    return True


def _other_settings(run: Running, twin: Twin, first: str) -> str | None:
    """Why ``twin.job`` is restored with its own inbox's settings rather than take its twin's
    outcome (``first``: the twin, as the log names it); None when the settings are the same."""
    why = duplicates.settings_differ(run.cfg, twin.job, twin.first)
    return f"same content as {first}, but {why}" if why else None


def _restore_instead(run: Running, twin: Twin, why: str) -> bool:
    """Unlink ``twin.job`` from its twin so it is restored itself; False if it is not running."""
    log.info("%s: %s", twin.job.source, why)
    return run.journal.restore_instead(twin.job.id, why)


def _repeat(run: Running, twin: Twin) -> bool:
    """A photo that waited for a twin that failed: the same failure, not tried again, unless its
    inbox's settings differ from the twin's (they may be what failed). False: restore it instead."""
    why = _other_settings(run, twin, f"{twin.first.source}, which failed")
    if why:
        return not _restore_instead(run, twin, why)
    try:
        outcome = duplicates.repeat_failure(run.journal, twin, run.cfg, run.presence.away)
    except Exception as exc:
        log.exception("%s: could not record its failure", twin.job.source)
        if run.journal.move(twin.job.id, JobState.QUEUED, f"internal error: {exc}"):
            run.hold_until = time.monotonic() + OUTBOX_RETRY_S
        return True
    run.ended(outcome, failed=True)
    log.warning(
        "%s: same content as %s, which failed: %s", twin.job.source, twin.first.source, twin.first.error
    )
    return True


def on_event(run: Running, ev: PoolEvent) -> None:
    journal = run.journal
    if ev.kind in (DONE, GAVE_UP):
        run.job_ended()  # before the bookkeeping, which may raise: a held twin may go now
    try:
        if ev.kind in (DONE, GAVE_UP):
            # Before the result is recorded, so the record the job ends with names where it ran.
            journal.ran_on(ev.task.key, node_name(ev.node))
        if ev.kind == DONE:
            _on_result(run, ev)
        elif ev.kind == GAVE_UP and _inbox_went(run, ev):
            pass
        elif ev.kind == GAVE_UP:
            log.error("%s: %s", ev.task.job.src, ev.message)
            run.fail(ev.task.key, ev.message, tmp=ev.task.job.dst)
        elif (
            ev.kind == RETRY
            and ev.charged
            and run.presence.inbox_away(journal.require(ev.task.key).inbox) is None
        ):
            journal.charge_attempt(ev.task.key, ev.message, ev.worker)
            log.warning("%s: %s", ev.task.job.src, ev.message)
        elif ev.kind == RETRY:
            journal.log_event(ev.task.key, "retry", ev.message, ev.worker)
            log.warning("%s: %s", ev.task.job.src, ev.message)
    except OutputError as exc:
        if ev.kind == DONE and (why := _outbox_away(run, ev.task.key)) is not None:
            _hold(run, ev, why)  # the outbox left while the result was committed
            return
        # Disk full, outbox read-only or gone: the original stays in the inbox and the job
        # waits; new work is held back until the outbox takes writes again.
        remove_quietly(ev.task.job.dst)
        if journal.move(ev.task.key, JobState.QUEUED, f"outbox: {exc}"):
            run.outbox_trouble(str(exc))
    except Exception as exc:
        # One job's bookkeeping must not stop the service; the job is retried later.
        log.exception("%s: could not record the result", ev.task.job.src)
        remove_quietly(ev.task.job.dst)
        if journal.move(ev.task.key, JobState.QUEUED, f"internal error: {exc}"):
            run.maybe_queued = True
            run.hold_until = time.monotonic() + OUTBOX_RETRY_S


def _on_result(run: Running, ev: PoolEvent) -> None:
    journal, task, res = run.journal, ev.task, ev.result
    if res is None:
        raise ValueError(f"{task.job.src}: the pool reported a result without one")
    if res.ok and (why := _outbox_away(run, task.key)) is not None:
        _hold(run, ev, why)
        return
    if not res.ok and _inbox_went(run, ev):
        return
    if res.ok:
        if task.job.note:
            # The inbox's own settings that made this result differ from what the global ones give.
            res.notes.append(task.job.note)
        outcome = commit.commit(journal, task.key, res, run.cfg, run.presence.away)
        if outcome.output is None:
            return  # the job had already ended another way
        flagged = sum(c.flagged for c in res.checks)
        run.ended(outcome.original, faces=res.faces, redo=journal.require(task.key).is_redo, flagged=flagged)
        if run.views is not None:
            run.views.kept(task.key)
        notes = f" ({'; '.join(res.notes)})" if res.notes else ""
        if res.faces:
            log.info("restored %s -> %s, %d face(s)%s", task.job.src, outcome.output, res.faces, notes)
        elif res.found:  # faces found, none restored (as picked, strength 0, the faces setting)
            log.info(
                "no face restored in %s (%d found); written to %s%s",
                task.job.src,
                res.found,
                outcome.output,
                notes,
            )
        else:  # done, but not "restored": counted apart in status as well
            log.info("no face in %s; written to %s%s", task.job.src, outcome.output, notes)
        return
    if res.error_kind == ErrorKind.OUTBOX and (why := _outbox_away(run, task.key)) is not None:
        remove_quietly(res.dst or task.job.dst)
        if journal.move(task.key, JobState.QUEUED, f"outbox away: {why}"):
            run.maybe_queued = True  # claimed again once it is back (_presence)
        return
    if res.error_kind == ErrorKind.OUTBOX:
        # The outbox refused the write (full, read-only, gone): not this photo's fault. It waits
        # in the inbox, queued, and new work is held back until the outbox takes writes again.
        remove_quietly(res.dst or task.job.dst)
        if journal.move(task.key, JobState.QUEUED, f"outbox: {res.error}"):
            run.outbox_trouble(res.error or "cannot write")
        return
    kind = failure_state(res.error_kind)
    reason = res.error or "unknown error"
    run.fail(task.key, reason, kind, tmp=res.dst or task.job.dst, ours=res.error_kind == ErrorKind.BUG)
    log.warning("%s: %s: %s", task.job.src, kind, reason)


def node_name(node: str) -> str:
    """The journal's name for where a worker ran: a remote node's own "host (address)", and this
    machine's host name for its local workers (their ``node`` is ""), so that a job's record
    still says which machine it was once the cluster has changed."""
    return node or socket.gethostname()


def _environmental(exc: BaseException) -> bool:
    """An error of the outbox as a whole (the OS refused a write), not of one file's name."""
    return isinstance(exc, OSError) or isinstance(exc.__cause__, OSError)
