"""The journal's writes: every file that enters an inbox becomes a job here, and every move of a
job (``states.TRANSITIONS``) is made here, by ``Journal._move``.

The package holds the rest: the records it hands out (``records``), the connection and its
durability rules (``connection``), the reads (``queries``), the named states and the moves a job
may make (``states``) and the schema (``schema``), and the writes that move no state: a job's
output name and commit token (``outputs``), what a photo sent through the API adds
(``submissions``). This stays one module because every write that moves a state is one short
transaction around ``_move``; split by kind, the rule that only ``_move`` changes a state would
live in several files.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from gpen_watch.journal.connection import connect, default_path
from gpen_watch.journal.faces import FaceWrites
from gpen_watch.journal.outputs import OutputWrites, json_or_null
from gpen_watch.journal.people import PeopleQueries
from gpen_watch.journal.records import (
    AddResult,
    Claim,
    Event,
    Job,
    Twin,
    duplicate_message,
    hash_file,
    job_from_row,
)
from gpen_watch.journal.requests import UserRequests, redo_lead
from gpen_watch.journal.states import (
    ACTIVE,
    FAILURES,
    FAULT_OURS,
    ORIGINAL_IN_PLACE,
    SETTLED,
    JobState,
    Original,
    TransitionError,
    check_move,
    sql_in,
)
from gpen_watch.journal.submissions import SentFile, Submission, SubmissionWrites
from gpen_watch.journal.submissions import record as record_submission

# The journal's records, for callers that import them from here.
__all__ = ["AddResult", "Claim", "Event", "Job", "Journal", "Twin", "default_path", "hash_file"]

# SQL fragments built from the named states (constants, never user text).
_ACTIVE = sql_in(ACTIVE)
_FAILURES = sql_in(FAILURES)
# Why a queued job ended as gone when its file left the inbox (``Journal.move`` to gone).
VANISHED = "file disappeared before it was processed"


class Journal(UserRequests, OutputWrites, SubmissionWrites, FaceWrites, PeopleQueries):
    """The job journal. Open with ``Journal.open(path)``; close with ``close()`` or ``with``."""

    @classmethod
    def open(
        cls,
        path: os.PathLike[str] | str | None = None,
        *,
        readonly: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> Journal:
        """Open (creating and migrating when needed) the journal at ``path`` (default: state dir)."""
        path = Path(path) if path is not None else default_path()
        return cls(connect(path, readonly), path, clock)

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- entering -----------------------------------------------------------------------------

    def add(
        self,
        source: os.PathLike[str] | str,
        inbox: os.PathLike[str] | str,
        rel: os.PathLike[str] | str,
        size: int,
        mtime: float,
        sha256: str,
        *,
        settings: Mapping[str, Any] | None = None,
        submission: Submission | None = None,
    ) -> AddResult:
        """Record a settled file. See ``AddResult`` for the three outcomes.

        A file is identified by content (sha256 + size): the same photo renamed or dropped again is
        a duplicate of the finished job. The same path seen again with the same content is "known"
        while its job is active or its original was left in place (keep policy, read-only inbox),
        so rescans never create jobs twice. A queued job whose file was overwritten with new
        content is superseded (state gone) by the new one.

        A photo sent through the API comes with its own ``settings`` (dotted names, over its
        inbox's) and its ``submission``, recorded in the same transaction as its job.
        """
        src, now = os.fspath(source), self._clock()
        own = json.dumps(dict(settings), sort_keys=True) if settings else None
        with self._write(durable=submission is not None) as conn:
            result = self._add(conn, src, inbox, rel, size, mtime, sha256, now, own)
            if submission is not None:
                record_submission(conn, result.job.id, submission, size, now)
            return result

    def add_sent(self, files: Sequence[SentFile]) -> list[AddResult]:
        """``add`` for photos sent through the API, each with its settings and submission, in one
        durable transaction: the service loop records the photos of a turn together."""
        now = self._clock()
        out = []
        with self._write(durable=True) as conn:
            for f in files:
                own = json.dumps(dict(f.settings), sort_keys=True) if f.settings else None
                result = self._add(
                    conn, os.fspath(f.source), f.inbox, f.rel, f.size, f.mtime, f.sha256, now, own
                )
                record_submission(conn, result.job.id, f.submission, f.size, now)
                out.append(result)
        return out

    def _add(
        self,
        conn: sqlite3.Connection,
        src: str,
        inbox: os.PathLike[str] | str,
        rel: os.PathLike[str] | str,
        size: int,
        mtime: float,
        sha256: str,
        now: float,
        settings: str | None,
    ) -> AddResult:
        superseded: list[int] = []
        for row in conn.execute("SELECT * FROM jobs WHERE source = ? ORDER BY id DESC", (src,)).fetchall():
            same = row["sha256"] == sha256 and row["size"] == size
            if row["state"] in ACTIVE and same:
                return AddResult("known", job_from_row(row))
            if row["state"] == JobState.QUEUED:
                self._move(
                    conn,
                    row["id"],
                    JobState.GONE,
                    ("superseded", "file replaced by new content"),
                    sets={"finished": now, "error": "replaced by new content before it was processed"},
                )
                superseded.append(row["id"])
            elif (
                row["state"] in SETTLED
                and same
                and (row["original"] is None or row["original"] in ORIGINAL_IN_PLACE)
            ):
                return AddResult("known", job_from_row(row))

        done = self._done_with(conn, sha256, size)
        values = (src, os.fspath(inbox), os.fspath(rel), size, mtime, sha256, now, settings)
        if done is not None:
            # Queued like any drop, linked to the done job: claim_batch hands it out as a copy.
            message = duplicate_message(done)
            cur = conn.execute(
                "INSERT INTO jobs (source, inbox, rel, size, mtime, sha256, created, settings, state,"
                f" duplicate_of) VALUES (?, ?, ?, ?, ?, ?, ?, ?, '{JobState.QUEUED}', ?)",
                (*values, done["id"]),
            )
            job_id = int(cur.lastrowid or 0)
            self._event(conn, job_id, "duplicate", message)
            return AddResult("duplicate", self._added(conn, job_id), job_from_row(done), message, superseded)
        cur = conn.execute(
            "INSERT INTO jobs (source, inbox, rel, size, mtime, sha256, created, settings, state)"
            f" VALUES (?, ?, ?, ?, ?, ?, ?, ?, '{JobState.QUEUED}')",
            values,
        )
        job_id = int(cur.lastrowid or 0)
        self._event(conn, job_id, "added", f"{size} bytes, sha256 {sha256[:12]}")
        return AddResult("new", self._added(conn, job_id), None, "", superseded)

    @staticmethod
    def _done_with(conn: sqlite3.Connection, sha256: str, size: int) -> sqlite3.Row | None:
        """The first done job with this content, if any (what a drop of it duplicates)."""
        row: sqlite3.Row | None = conn.execute(
            f"SELECT * FROM jobs WHERE sha256 = ? AND size = ? AND state = '{JobState.DONE}' ORDER BY id LIMIT 1",
            (sha256, size),
        ).fetchone()
        return row

    @staticmethod
    def _queued_rows(conn: sqlite3.Connection, n: int) -> Iterator[sqlite3.Row]:
        """Queued jobs, redos first (someone is waiting for each), then the rest oldest first,
        fetched a page at a time (the caller may update between pages)."""
        for redo in (True, False):
            last, page = 0, max(4 * n, 64)
            which = "IS NOT NULL" if redo else "IS NULL"
            while True:
                rows = conn.execute(
                    f"SELECT * FROM jobs WHERE state = '{JobState.QUEUED}' AND id > ? AND redo_of {which}"
                    " ORDER BY id LIMIT ?",
                    (last, page),
                ).fetchall()
                yield from rows
                if len(rows) < page:
                    break
                last = rows[-1]["id"]

    @staticmethod
    def _failed_first(conn: sqlite3.Connection, row: sqlite3.Row) -> sqlite3.Row | None:
        """The job with this queued job's content that failed while it waited, if any.

        Only a failure that ended after this drop arrived counts: the copy waited for that very
        attempt. A photo dropped again after its failure was recorded is the user's retry.
        """
        failed: sqlite3.Row | None = conn.execute(
            f"SELECT * FROM jobs WHERE sha256 = ? AND size = ? AND state IN {_FAILURES} AND id < ?"
            " AND finished >= ? ORDER BY id DESC LIMIT 1",
            (row["sha256"], row["size"], row["id"], row["created"]),
        ).fetchone()
        return failed

    def claim_batch(self, n: int, worker: str, skip_inboxes: Collection[str] = ()) -> Claim:
        """Move up to ``n`` oldest queued jobs to running for ``worker`` (attempts + 1), atomically,
        holding back and resolving jobs with the same content.

        Two files with the same content (sha256 + size) are never restored at once: a queued job
        whose content matches a running job, or an older queued one, stays queued (``held``).
        Once a job with that content is done, the next ones that come up are claimed as
        ``copies`` of it (linked by ``duplicate_of``), exactly as ``add`` links a drop after the
        first was done. If the first fails instead (or is unsupported), those that waited for it
        are claimed as ``repeats`` of its failure; if it is gone, the next one is restored as usual.
        A redo is restored, never a copy of another result, except a redo ``add_redos`` linked to
        the redo of the same photo asked with it (a copy's, with its photo's): it waits for that
        one and is claimed as a copy of its result; if that one failed or went, it is restored.
        Copies and repeats count towards ``n``. Jobs of ``skip_inboxes`` (inboxes on a drive or
        share that is away) stay queued, untouched.
        """
        if n <= 0:
            return Claim([], [], [], 0)
        now = self._clock()
        with self._write() as conn:
            busy = {
                (r[0], r[1])
                for r in conn.execute(
                    f"SELECT sha256, size FROM jobs WHERE state = '{JobState.RUNNING}' AND duplicate_of IS NULL"
                ).fetchall()
            }
            ids: list[int] = []
            twins: list[tuple[int, sqlite3.Row, bool]] = []  # (job id, first, done?)
            held = 0
            for row in self._queued_rows(conn, n):
                if len(ids) + len(twins) >= n:
                    break
                if row["inbox"] in skip_inboxes:
                    continue
                content = (row["sha256"], row["size"])
                if content in busy:
                    held += 1
                    continue
                if row["redo_of"] is not None:
                    # Restored again on purpose: never a copy of the result it replaces. Two
                    # redos of one photo run one after the other (busy), the later one last. A
                    # copy's redo asked with its photo's (``add_redos``) takes that one's result.
                    lead = redo_lead(conn, row)
                    if lead is not None and lead["state"] in ACTIVE:
                        held += 1  # (its inbox is away, or it is not claimed yet: it waits)
                        continue
                    if lead is not None and lead["state"] == JobState.DONE and lead["output"] is not None:
                        twins.append((row["id"], lead, True))
                        continue
                    busy.add(content)  # no result to take (it failed, or went): restored itself
                    ids.append(row["id"])
                    continue
                done = self._done_with(conn, row["sha256"], row["size"])
                first = done if done is not None else self._failed_first(conn, row)
                if first is not None:
                    # Nothing to restore: a younger twin in this batch is one too, not held.
                    twins.append((row["id"], first, done is not None))
                    continue
                busy.add(content)  # a younger twin waits for this one, whatever becomes of it
                ids.append(row["id"])
            for job_id in ids:
                self._claim(conn, job_id, worker, now)
            for job_id, first, _ in twins:
                self._claim(conn, job_id, worker, now, duplicate_of=first["id"])
            jobs = [j for j in (self._get(conn, i) for i in ids) if j is not None]
            pairs = [(self._get(conn, i), job_from_row(first), is_copy) for i, first, is_copy in twins]
            return Claim(
                jobs,
                [Twin(j, f) for j, f, is_copy in pairs if j is not None and is_copy],
                [Twin(j, f) for j, f, is_copy in pairs if j is not None and not is_copy],
                held,
            )

    def _claim(
        self, conn: sqlite3.Connection, job_id: int, worker: str, now: float, duplicate_of: int | None = None
    ) -> None:
        # A twin is not an attempt: no worker sees it (restore_instead counts one if it comes to that).
        attempt = conn.execute("SELECT attempts FROM jobs WHERE id = ?", (job_id,)).fetchone()[0]
        attempt += 1 if duplicate_of is None else 0
        what = (
            f"attempt {attempt} on {worker}"
            if duplicate_of is None
            else f"same content as run {duplicate_of}"
        )
        self._move(
            conn,
            job_id,
            JobState.RUNNING,
            ("claimed", what),
            sets={"attempts": attempt, "worker": worker, "started": now, "duplicate_of": duplicate_of},
            worker=worker,
        )

    def restore_instead(self, job_id: int, reason: str) -> bool:
        """A running copy whose first result cannot be copied (gone, or changed since): it loses
        its link and is restored itself. False if the job is not running."""
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE jobs SET duplicate_of = NULL, attempts = attempts + 1"
                f" WHERE id = ? AND state = '{JobState.RUNNING}'",
                (job_id,),
            )
            if cur.rowcount:
                self._event(conn, job_id, "restore-instead", reason)
            return cur.rowcount == 1

    def finish(
        self,
        job_id: int,
        output: os.PathLike[str] | str,
        faces: int = 0,
        timings: dict[str, float] | None = None,
        notes: Sequence[str] = (),
        used: Mapping[str, Any] | None = None,
    ) -> bool:
        """Mark an active job done with its final output (durable). False if it was not active.

        A job linked to a done one (``duplicate_of``: its output is a copy) ends as duplicate; a
        redo linked so (a copy's, given its photo's redone result) ends done, as every redo does.
        """
        now = self._clock()
        with self._write(durable=True) as conn:
            row = conn.execute("SELECT duplicate_of, redo_of FROM jobs WHERE id = ?", (job_id,)).fetchone()
            copy = row is not None and row[0] is not None and row[1] is None
            to = JobState.DUPLICATE if copy else JobState.DONE
            return self._move(
                conn,
                job_id,
                to,
                ("finished", f"{faces} face(s) -> {os.fspath(output)}"),
                sets={
                    "finished": now,
                    "output": os.fspath(output),
                    "faces": faces,
                    "timings": json.dumps(timings or {}),
                    "notes": json.dumps(list(notes)),
                    "used": json_or_null(used),
                    "error": None,
                },
            )

    def end_as_duplicate(self, job_id: int, note: str, of: int | None = None) -> bool:
        """End an active copy whose result already exists under its own name (it was dropped
        again under the same name): duplicate, no output of its own (durable), linked to ``of``,
        the run whose result that is, where given (a copy's name dropped again is that copy's)."""
        with self._write(durable=True) as conn:
            sets: dict[str, object] = {"finished": self._clock(), "notes": json.dumps([note]), "output": None}
            if of is not None:
                sets["duplicate_of"] = of
            return self._move(
                conn,
                job_id,
                JobState.DUPLICATE,
                ("duplicate", note),
                sets=sets,
                also="duplicate_of IS NOT NULL",
            )

    def fail(self, job_id: int, reason: str, kind: JobState = JobState.FAILED, *, ours: bool = False) -> bool:
        """End an active job as failed or unsupported with a reason for the user (durable).

        ``ours``: gpen-watch or a library failed on the photo, not the photo itself (``bug_failures``).
        """
        if kind not in FAILURES:
            raise ValueError(f"kind must be failed or unsupported, not {kind!r}")
        return self.move(job_id, kind, reason, ours=ours)

    def ran_on(self, job_id: int, node: str) -> None:
        """Record the node whose worker ended this job (its result or its last crash)."""
        with self._write() as conn:
            conn.execute("UPDATE jobs SET node = ? WHERE id = ?", (node, job_id))

    def charge_attempt(self, job_id: int, reason: str, worker: str | None = None) -> bool:
        """A running job's worker died while restoring it (a local process, or a remote node or its
        actor): that try counts, and the pool runs the job again without a new claim. False if the
        job is not running."""
        with self._write() as conn:
            cur = conn.execute(
                f"UPDATE jobs SET attempts = attempts + 1 WHERE id = ? AND state = '{JobState.RUNNING}'",
                (job_id,),
            )
            if cur.rowcount:
                self._event(conn, job_id, "retry", reason, worker)
            return cur.rowcount == 1

    def move(self, job_id: int, to: JobState, reason: str, *, ours: bool = False) -> bool:
        """Move a job to ``to`` for ``reason``, from any state the table (``states.TRANSITIONS``)
        allows; False when the job is in none of them (it moved or ended another way).

        queued: a running job goes back to the queue (worker crashed, timed out, service stopping).
        gone: a queued job's file was deleted or moved away. failed, unsupported: an active job ends
        with ``reason`` for the user (durable); ``ours``: gpen-watch or a library failed on the
        photo, not the photo itself (``bug_failures``). A job ends done only with its output
        (``finish``), or as a duplicate of a done one (``finish``, ``end_as_duplicate``).
        """
        to = JobState(to)  # a caller may hold the state's text ("unsupported")
        if to == JobState.QUEUED:
            with self._write() as conn:
                return self._move(conn, job_id, to, ("requeued", reason))
        if to == JobState.GONE:
            with self._write() as conn:
                sets: dict[str, object] = {"finished": self._clock(), "error": reason}
                return self._move(conn, job_id, to, ("gone", reason), sets=sets)
        if to in FAILURES:
            with self._write(durable=True) as conn:
                sets = {"finished": self._clock(), "error": reason, "fault": FAULT_OURS if ours else None}
                return self._move(conn, job_id, to, (str(to), reason), sets=sets)
        raise TransitionError(f"a job moves to {to} only with its output (Journal.finish)")

    def _move(
        self,
        conn: sqlite3.Connection,
        job_id: int,
        to: JobState,
        event: tuple[str, str],
        *,
        sets: Mapping[str, object] | None = None,
        only_from: Iterable[JobState] | None = None,
        also: str = "",
        worker: str | None = None,
    ) -> bool:
        """The one statement that changes a job's state: to ``to`` from the states the table allows
        (``only_from``: fewer of them), setting the columns of ``sets`` (names of ours, never user
        text), where ``also`` (a further SQL condition of ours) holds; the ``event`` (kind, detail)
        goes into its history. False when the job was in none of those states."""
        frm = check_move(to, only_from)
        columns = "".join(f", {name} = ?" for name in (sets or {}))
        where = f" AND {also}" if also else ""
        cur = conn.execute(
            f"UPDATE jobs SET state = ?{columns} WHERE id = ? AND state IN {sql_in(frm)}{where}",
            (to, *(sets or {}).values(), job_id),
        )
        if cur.rowcount:
            self._event(conn, job_id, *event, worker)
        return cur.rowcount == 1

    def requeue_running(self, reason: str, max_attempts: int | None = None) -> int:
        """Requeue every running job (at start-up: left running by a crash). Returns how many.

        With ``max_attempts``, a job that already had that many attempts fails instead (a file that
        brings the whole service down must not do so forever). Run ``outbox.recovery.recover`` first:
        it finishes jobs whose output was already published.
        """
        now = self._clock()
        with self._write(durable=True) as conn:
            rows = conn.execute(
                f"SELECT id, attempts FROM jobs WHERE state = '{JobState.RUNNING}'"
            ).fetchall()
            requeued = 0
            for row in rows:
                if max_attempts is not None and row["attempts"] >= max_attempts:
                    why = f"gave up after {row['attempts']} attempt(s); last: {reason}"
                    sets = {"finished": now, "error": why, "fault": None}
                    self._move(conn, row["id"], JobState.FAILED, ("failed", why), sets=sets)
                else:
                    self._move(conn, row["id"], JobState.QUEUED, ("requeued", reason))
                    requeued += 1
            return requeued

    def set_original(self, job_id: int, action: Original, path: os.PathLike[str] | str | None = None) -> None:
        """Record what happened (or is about to happen) to the original file (durable)."""
        where = None if path is None else os.fspath(path)
        with self._write(durable=True) as conn:
            conn.execute(
                "UPDATE jobs SET original = ?, original_path = ? WHERE id = ?", (action, where, job_id)
            )
            self._event(conn, job_id, "original", action + (f": {where}" if where else ""))

    def log_event(self, job_id: int, kind: str, detail: str | None = None, worker: str | None = None) -> None:
        """Add a free-form history entry (e.g. "oom: retrying at scale 0.5")."""
        with self._write() as conn:
            self._event(conn, job_id, kind, detail, worker)
