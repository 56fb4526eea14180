"""The durable job journal: every file that enters an inbox becomes a row here.

Long on purpose: every SQL statement of the journal is in this one class, so the rules below
(one short transaction per call, which writes are durable) hold in one place.

Threading: a ``Journal`` holds one SQLite connection guarded by a lock, so any thread of the parent
may call any method; each call is one short transaction. Other processes (``gpen-watch status``)
may open the same file at the same time (WAL lets readers run beside the writer).

Durability (WAL mode): most writes use ``synchronous=NORMAL`` - a commit survives the process being
killed, and the database is never corrupted, but the last few commits may roll back on power loss
or an OS crash. That is harmless for adds, claims, requeues and events: the files are still in the
inbox and the start-up scan finds them again. The writes that come right before something
irreversible on disk (``begin_commit`` before the output is linked into place, ``finish`` and
``fail`` before the original is moved or deleted, ``set_original``) use ``synchronous=FULL``: the
WAL is fsynced at commit, which also makes every earlier commit durable. So after any crash the
journal is never behind the folders in a way that would redo a job or lose track of an original.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import stat as stat_mod
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from gpen_watch.base.errors import GpenWatchError
from gpen_watch.base.fsutil import READ_NOFOLLOW_FLAGS
from gpen_watch.journal import schema
from gpen_watch.journal.states import (
    ACTIVE,
    FAILURES,
    ORIGINAL_IN_PLACE,
    ORIGINAL_IN_PROGRESS,
    SETTLED,
    JobState,
    Original,
    sql_in,
)
from gpen_watch.platform import paths

HASH_CHUNK = 1 << 20
# SQL fragments built from the named states (constants, never user text).
_ACTIVE = sql_in(ACTIVE)
_FAILURES = sql_in(FAILURES)
# jobs.fault of a failure that was a bug of gpen-watch or a library, not the photo's (schema v4).
_OURS = "ours"


def default_path() -> Path:
    return paths.state_dir() / "journal.sqlite3"


def hash_file(path: os.PathLike[str] | str) -> str:
    """sha256 of a file's content, read in 1 MiB chunks.

    Opens without following symlinks and without blocking (a FIFO swapped in after the caller's
    lstat is refused, not waited on); anything but a regular file raises OSError.
    """
    fd = os.open(path, READ_NOFOLLOW_FLAGS)
    with open(fd, "rb", buffering=0) as f:
        if not stat_mod.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path}: not a regular file")
        digest = hashlib.sha256()
        buf = bytearray(HASH_CHUNK)
        view = memoryview(buf)
        while n := f.readinto(buf):
            digest.update(view[:n])
    return digest.hexdigest()


@dataclass(frozen=True)
class Job:
    id: int
    source: Path
    inbox: Path
    rel: Path
    size: int
    mtime: float
    sha256: str
    state: JobState
    attempts: int
    worker: str | None
    created: float
    started: float | None
    finished: float | None
    output: Path | None
    faces: int | None
    timings: dict[str, float]
    error: str | None
    notes: list[str]
    duplicate_of: int | None
    commit_ino: int | None
    commit_size: int | None
    original: Original | None
    original_path: Path | None
    # Where a worker restored it, or last tried to (schema version 3): None when no worker did.
    node: str | None = None


@dataclass(frozen=True)
class Event:
    job_id: int
    time: float
    kind: str
    worker: str | None
    detail: str | None


@dataclass(frozen=True)
class AddResult:
    """What ``Journal.add`` did.

    status "new": a queued job was created (``job``). "duplicate": the content matches a done job
    (``duplicate_of``); the queued ``job`` is linked to it and gets a copy of its output under its
    own name when claimed (``Claim.copies``); ``message`` says so for the user. "known": this very
    file already has a job (queued, running, or ended with the file left in place) - nothing to
    do, ``job`` is that job.
    """

    status: Literal["new", "duplicate", "known"]
    job: Job
    duplicate_of: Job | None = None
    message: str = ""
    # Queued jobs for the same path whose content was replaced by this drop (now state gone).
    superseded: list[int] = field(default_factory=list)

    @property
    def is_new(self) -> bool:
        return self.status == "new"


@dataclass(frozen=True)
class Twin:
    """A claimed job whose content is that of ``first``, an earlier job that has ended."""

    job: Job
    first: Job


@dataclass(frozen=True)
class Claim:
    """What ``Journal.claim_batch`` did.

    ``jobs``: now running, for a worker. ``copies``: now running, content of a done job: they get
    a copy of its output (``outbox.duplicates``), no worker. ``repeats``: now running, content of
    a job that failed while they waited for it: they fail with its reason, no worker. ``held``:
    queued jobs passed over because a job with the same content is running or ahead of them.
    """

    jobs: list[Job]
    copies: list[Twin]
    repeats: list[Twin]
    held: int


def _duplicate_message(done: sqlite3.Row) -> str:
    return f"same content as {done['source']}: its result {done['output']} is copied under this name"


def _path(value: str | None) -> Path | None:
    return None if value is None else Path(value)


def _job(row: sqlite3.Row) -> Job:
    return Job(
        id=row["id"],
        source=Path(row["source"]),
        inbox=Path(row["inbox"]),
        rel=Path(row["rel"]),
        size=row["size"],
        mtime=row["mtime"],
        sha256=row["sha256"],
        state=JobState(row["state"]),
        attempts=row["attempts"],
        worker=row["worker"],
        created=row["created"],
        started=row["started"],
        finished=row["finished"],
        output=_path(row["output"]),
        faces=row["faces"],
        timings=json.loads(row["timings"]) if row["timings"] else {},
        error=row["error"],
        notes=json.loads(row["notes"]) if row["notes"] else [],
        duplicate_of=row["duplicate_of"],
        commit_ino=row["commit_ino"],
        commit_size=row["commit_size"],
        original=None if row["original"] is None else Original(row["original"]),
        original_path=_path(row["original_path"]),
        node=row["node"],
    )


class Journal:
    """The job journal. Open with ``Journal.open(path)``; close with ``close()`` or ``with``."""

    def __init__(self, conn: sqlite3.Connection, path: Path, clock: Callable[[], float] = time.time) -> None:
        self._conn = conn
        self._lock = threading.RLock()
        self.path = path
        # Wall-clock (epoch seconds): times are shown to users and compared across restarts.
        self._clock = clock

    # --- opening ------------------------------------------------------------------------------

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
        try:
            if readonly:
                conn = sqlite3.connect(
                    f"{path.resolve().as_uri()}?mode=ro",
                    uri=True,
                    timeout=10.0,
                    isolation_level=None,
                    check_same_thread=False,
                )
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(path, timeout=10.0, isolation_level=None, check_same_thread=False)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA busy_timeout = 10000")
            if not readonly:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise GpenWatchError(
                        f"{path}: cannot use WAL mode (got {mode}); put the journal on a local disk"
                    )
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.execute("PRAGMA foreign_keys = ON")
                schema.migrate(conn, path)
            else:
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                if version != schema.VERSION:
                    raise GpenWatchError(f"{path}: journal schema {version}, expected {schema.VERSION}")
        except sqlite3.DatabaseError as exc:
            raise GpenWatchError(
                f"{path}: cannot open the journal ({exc}); if it is damaged, stop gpen-watch and move "
                "the file aside - files still in the inboxes are picked up again"
            ) from exc
        return cls(conn, path, clock)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- transactions -------------------------------------------------------------------------

    @contextlib.contextmanager
    def _write(self, durable: bool = False) -> Iterator[sqlite3.Connection]:
        """One write transaction; ``durable`` fsyncs the WAL at commit (see the module docstring)."""
        with self._lock:
            conn = self._conn
            if durable:
                conn.execute("PRAGMA synchronous = FULL")
            try:
                # IMMEDIATE takes the write lock up front: read-then-update steps cannot interleave.
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                except BaseException:
                    if conn.in_transaction:  # an SQLite error may already have rolled it back
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            finally:
                if durable:
                    conn.execute("PRAGMA synchronous = NORMAL")

    def _read(self, sql: str, args: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, args).fetchall()

    def _event(
        self,
        conn: sqlite3.Connection,
        job_id: int,
        kind: str,
        detail: str | None = None,
        worker: str | None = None,
    ) -> None:
        conn.execute(
            "INSERT INTO events (job_id, time, kind, worker, detail) VALUES (?, ?, ?, ?, ?)",
            (job_id, self._clock(), kind, worker, detail),
        )

    @staticmethod
    def _get(conn: sqlite3.Connection, job_id: int) -> Job | None:
        row = conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return _job(row) if row else None

    # --- entering -----------------------------------------------------------------------------

    def add(
        self,
        source: os.PathLike[str] | str,
        inbox: os.PathLike[str] | str,
        rel: os.PathLike[str] | str,
        size: int,
        mtime: float,
        sha256: str,
    ) -> AddResult:
        """Record a settled file. See ``AddResult`` for the three outcomes.

        A file is identified by content (sha256 + size): the same photo renamed or dropped again is
        a duplicate of the finished job. The same path seen again with the same content is "known"
        while its job is active or its original was left in place (keep policy, read-only inbox),
        so rescans never create jobs twice. A queued job whose file was overwritten with new
        content is superseded (state gone) by the new one.
        """
        src, now = os.fspath(source), self._clock()
        with self._write() as conn:
            superseded: list[int] = []
            for row in conn.execute(
                "SELECT * FROM jobs WHERE source = ? ORDER BY id DESC", (src,)
            ).fetchall():
                same = row["sha256"] == sha256 and row["size"] == size
                if row["state"] in ACTIVE and same:
                    return AddResult("known", _job(row))
                if row["state"] == "queued":
                    conn.execute(
                        f"UPDATE jobs SET state = '{JobState.GONE}', finished = ?, error = ? WHERE id = ?",
                        (now, "replaced by new content before it was processed", row["id"]),
                    )
                    self._event(conn, row["id"], "superseded", "file replaced by new content")
                    superseded.append(row["id"])
                elif (
                    row["state"] in SETTLED
                    and same
                    and (row["original"] is None or row["original"] in ORIGINAL_IN_PLACE)
                ):
                    return AddResult("known", _job(row))

            done = self._done_with(conn, sha256, size)
            values = (src, os.fspath(inbox), os.fspath(rel), size, mtime, sha256, now)
            if done is not None:
                # Queued like any drop, linked to the done job: claim_batch hands it out as a copy.
                message = _duplicate_message(done)
                cur = conn.execute(
                    "INSERT INTO jobs (source, inbox, rel, size, mtime, sha256, created, state, duplicate_of)"
                    f" VALUES (?, ?, ?, ?, ?, ?, ?, '{JobState.QUEUED}', ?)",
                    (*values, done["id"]),
                )
                job_id = int(cur.lastrowid or 0)
                self._event(conn, job_id, "duplicate", message)
                return AddResult("duplicate", self._get(conn, job_id), _job(done), message, superseded)  # type: ignore[arg-type]
            cur = conn.execute(
                "INSERT INTO jobs (source, inbox, rel, size, mtime, sha256, created, state)"
                f" VALUES (?, ?, ?, ?, ?, ?, ?, '{JobState.QUEUED}')",
                values,
            )
            job_id = int(cur.lastrowid or 0)
            self._event(conn, job_id, "added", f"{size} bytes, sha256 {sha256[:12]}")
            return AddResult("new", self._get(conn, job_id), None, "", superseded)  # type: ignore[arg-type]

    # --- running ------------------------------------------------------------------------------

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
        """Queued jobs oldest first, fetched a page at a time (the caller may update between pages)."""
        last, page = 0, max(4 * n, 64)
        while True:
            rows = conn.execute(
                f"SELECT * FROM jobs WHERE state = '{JobState.QUEUED}' AND id > ? ORDER BY id LIMIT ?",
                (last, page),
            ).fetchall()
            yield from rows
            if len(rows) < page:
                return
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

    def claim_batch(self, n: int, worker: str) -> Claim:
        """Move up to ``n`` oldest queued jobs to running for ``worker`` (attempts + 1), atomically,
        holding back and resolving jobs with the same content.

        Two files with the same content (sha256 + size) are never restored at once: a queued job
        whose content matches a running job, or an older queued one, stays queued (``held``).
        Once a job with that content is done, the next ones that come up are claimed as
        ``copies`` of it (linked by ``duplicate_of``), exactly as ``add`` links a drop after the
        first was done. If the first fails instead (or is unsupported), those that waited for it
        are claimed as ``repeats`` of its failure; if it is gone, the next one is restored as usual.
        Copies and repeats count towards ``n``.
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
                content = (row["sha256"], row["size"])
                if content in busy:
                    held += 1
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
            pairs = [(self._get(conn, i), _job(first), is_copy) for i, first, is_copy in twins]
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
        conn.execute(
            f"UPDATE jobs SET state = '{JobState.RUNNING}', attempts = attempts + ?, worker = ?, started = ?,"
            " duplicate_of = ? WHERE id = ?",
            (1 if duplicate_of is None else 0, worker, now, duplicate_of, job_id),
        )
        attempt = conn.execute("SELECT attempts FROM jobs WHERE id = ?", (job_id,)).fetchone()[0]
        what = (
            f"attempt {attempt} on {worker}"
            if duplicate_of is None
            else f"same content as job {duplicate_of}"
        )
        self._event(conn, job_id, "claimed", what, worker)

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

    def reserve_output(self, job_id: int, output: os.PathLike[str] | str) -> bool:
        """Record the output name chosen for an active job, unless another active job holds it.

        The name then stays with the job across requeues and restarts (it is not re-chosen).
        Returns False when the name is taken (choose the next one) or the job is not active.
        """
        out = os.fspath(output)
        with self._write() as conn:
            taken = conn.execute(
                f"SELECT 1 FROM jobs WHERE output = ? AND id <> ? AND state IN {_ACTIVE}",
                (out, job_id),
            ).fetchone()
            if taken:
                return False
            cur = conn.execute(
                f"UPDATE jobs SET output = ? WHERE id = ? AND state IN {_ACTIVE}", (out, job_id)
            )
            if cur.rowcount:
                self._event(conn, job_id, "output-reserved", out)
            return cur.rowcount == 1

    def output_reserved(self, output: os.PathLike[str] | str, exclude_job: int | None = None) -> bool:
        """Whether an active job other than ``exclude_job`` has reserved ``output``."""
        rows = self._read(
            f"SELECT 1 FROM jobs WHERE output = ? AND id <> ? AND state IN {_ACTIVE} LIMIT 1",
            (os.fspath(output), -1 if exclude_job is None else exclude_job),
        )
        return bool(rows)

    def active_outputs(self) -> list[Path]:
        """The output names that active jobs have reserved."""
        rows = self._read(f"SELECT output FROM jobs WHERE state IN {_ACTIVE} AND output IS NOT NULL")
        return [Path(r[0]) for r in rows]

    def has_event(self, kind: str, detail: str) -> bool:
        """Whether any job's history holds an event of ``kind`` with exactly ``detail``."""
        return bool(self._read("SELECT 1 FROM events WHERE kind = ? AND detail = ? LIMIT 1", (kind, detail)))

    def begin_commit(
        self,
        job_id: int,
        output: os.PathLike[str] | str,
        ino: int,
        size: int,
        faces: int = 0,
        timings: dict[str, float] | None = None,
        notes: Sequence[str] = (),
    ) -> bool:
        """Durably record that the fsynced temp file (inode ``ino``, ``size`` bytes) is about to be
        linked to ``output``, with the worker's result, so recovery can finish the job after a crash.

        Returns False when the job is no longer active (finished or ended by another path): the
        caller must then discard its temp file instead of publishing it.
        """
        with self._write(durable=True) as conn:
            cur = conn.execute(
                "UPDATE jobs SET output = ?, commit_ino = ?, commit_size = ?, faces = ?, timings = ?, notes = ?"
                f" WHERE id = ? AND state IN {_ACTIVE}",
                (
                    os.fspath(output),
                    ino,
                    size,
                    faces,
                    json.dumps(timings or {}),
                    json.dumps(list(notes)),
                    job_id,
                ),
            )
            if cur.rowcount:
                self._event(conn, job_id, "committing", os.fspath(output))
            return cur.rowcount == 1

    def finish(
        self,
        job_id: int,
        output: os.PathLike[str] | str,
        faces: int = 0,
        timings: dict[str, float] | None = None,
        notes: Sequence[str] = (),
    ) -> bool:
        """Mark an active job done with its final output (durable). False if it was not active.

        A job linked to a done one (``duplicate_of``: its output is a copy) ends as duplicate.
        """
        now = self._clock()
        with self._write(durable=True) as conn:
            cur = conn.execute(
                f"UPDATE jobs SET state = CASE WHEN duplicate_of IS NULL THEN '{JobState.DONE}'"
                f" ELSE '{JobState.DUPLICATE}' END, finished = ?, output = ?, faces = ?, timings = ?, notes = ?,"
                f" error = NULL WHERE id = ? AND state IN {_ACTIVE}",
                (now, os.fspath(output), faces, json.dumps(timings or {}), json.dumps(list(notes)), job_id),
            )
            if cur.rowcount:
                self._event(conn, job_id, "finished", f"{faces} face(s) -> {os.fspath(output)}")
            return cur.rowcount == 1

    def end_as_duplicate(self, job_id: int, note: str) -> bool:
        """End an active copy whose result already exists under its own name (it was dropped
        again under the same name): duplicate, no output of its own (durable)."""
        with self._write(durable=True) as conn:
            cur = conn.execute(
                f"UPDATE jobs SET state = '{JobState.DUPLICATE}', finished = ?, notes = ?, output = NULL"
                f" WHERE id = ? AND state IN {_ACTIVE} AND duplicate_of IS NOT NULL",
                (self._clock(), json.dumps([note]), job_id),
            )
            if cur.rowcount:
                self._event(conn, job_id, "duplicate", note)
            return cur.rowcount == 1

    def fail(self, job_id: int, reason: str, kind: JobState = JobState.FAILED, *, ours: bool = False) -> bool:
        """End an active job as failed or unsupported with a reason for the user (durable).

        ``ours``: gpen-watch or a library failed on the photo, not the photo itself (``bug_failures``).
        """
        if kind not in FAILURES:
            raise ValueError(f"kind must be failed or unsupported, not {kind!r}")
        now = self._clock()
        with self._write(durable=True) as conn:
            cur = conn.execute(
                f"UPDATE jobs SET state = ?, finished = ?, error = ?, fault = ? WHERE id = ? AND state IN {_ACTIVE}",
                (kind, now, reason, _OURS if ours else None, job_id),
            )
            if cur.rowcount:
                self._event(conn, job_id, kind, reason)
            return cur.rowcount == 1

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

    def requeue(self, job_id: int, reason: str) -> bool:
        """Put a running job back in the queue (worker crashed, timed out, service stopping)."""
        with self._write() as conn:
            cur = conn.execute(
                f"UPDATE jobs SET state = '{JobState.QUEUED}' WHERE id = ? AND state = '{JobState.RUNNING}'",
                (job_id,),
            )
            if cur.rowcount:
                self._event(conn, job_id, "requeued", reason)
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
                    conn.execute(
                        f"UPDATE jobs SET state = '{JobState.FAILED}', finished = ?, error = ?, fault = NULL"
                        " WHERE id = ?",
                        (now, why, row["id"]),
                    )
                    self._event(conn, row["id"], "failed", why)
                else:
                    conn.execute(f"UPDATE jobs SET state = '{JobState.QUEUED}' WHERE id = ?", (row["id"],))
                    self._event(conn, row["id"], "requeued", reason)
                    requeued += 1
            return requeued

    def mark_gone(self, job_id: int, reason: str = "file disappeared before it was processed") -> bool:
        """A queued job's file was deleted or moved away: end it as gone. No-op for other states."""
        with self._write() as conn:
            cur = conn.execute(
                f"UPDATE jobs SET state = '{JobState.GONE}', finished = ?, error = ? WHERE id = ? AND state = '{JobState.QUEUED}'",
                (self._clock(), reason, job_id),
            )
            if cur.rowcount:
                self._event(conn, job_id, "gone", reason)
            return cur.rowcount == 1

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

    # --- reading ------------------------------------------------------------------------------

    def get(self, job_id: int) -> Job | None:
        with self._lock:
            return self._get(self._conn, job_id)

    def require(self, job_id: int) -> Job:
        """The job with this id; KeyError if there is none (a caller's bug, not a user's)."""
        job = self.get(job_id)
        if job is None:
            raise KeyError(f"no job {job_id} in {self.path}")
        return job

    def jobs(self, state: str, limit: int | None = None) -> list[Job]:
        """Jobs in ``state``, oldest first."""
        if state not in tuple(JobState):
            raise ValueError(f"unknown state {state!r}")
        rows = self._read(
            "SELECT * FROM jobs WHERE state = ? ORDER BY id LIMIT ?", (state, -1 if limit is None else limit)
        )
        return [_job(r) for r in rows]

    def active_for_source(self, source: os.PathLike[str] | str) -> list[Job]:
        """Queued or running jobs for this inbox path (the watcher saw the file disappear)."""
        rows = self._read(
            f"SELECT * FROM jobs WHERE source = ? AND state IN {_ACTIVE} ORDER BY id",
            (os.fspath(source),),
        )
        return [_job(r) for r in rows]

    def committing(self) -> list[Job]:
        """Active jobs that recorded a commit token (their output may already be published)."""
        rows = self._read(
            f"SELECT * FROM jobs WHERE state IN {_ACTIVE} AND commit_ino IS NOT NULL ORDER BY id"
        )
        return [_job(r) for r in rows]

    def pending_originals(self) -> list[Job]:
        """Ended jobs whose original still has to be archived/kept/deleted/set aside (recovery)."""
        rows = self._read(
            f"SELECT * FROM jobs WHERE state IN {sql_in(SETTLED)}"
            f" AND (original IS NULL OR original IN {sql_in(ORIGINAL_IN_PROGRESS)}) ORDER BY id"
        )
        return [_job(r) for r in rows]

    def waiting_originals(self) -> list[Job]:
        """Ended jobs whose original waits in the inbox for its folder to take it, oldest first."""
        return [
            _job(r)
            for r in self._read(f"SELECT * FROM jobs WHERE original = '{Original.WAITING}' ORDER BY id")
        ]

    def counts(self) -> dict[str, int]:
        """Jobs per state (every state present, zero when none)."""
        result = {str(state): 0 for state in JobState}
        for row in self._read("SELECT state, COUNT(*) FROM jobs GROUP BY state"):
            result[row[0]] = row[1]
        return result

    def bug_failures(self) -> int:
        """Failed jobs that failed because of a bug in gpen-watch or a library (``fail(ours=True)``)."""
        row = self._read(f"SELECT COUNT(*) FROM jobs WHERE state = '{JobState.FAILED}' AND fault = '{_OURS}'")
        return int(row[0][0])

    def recent_errors(self, n: int = 10) -> list[Job]:
        """The last ``n`` failed or unsupported jobs, newest first."""
        rows = self._read(
            f"SELECT * FROM jobs WHERE state IN {_FAILURES} ORDER BY finished DESC, id DESC LIMIT ?",
            (n,),
        )
        return [_job(r) for r in rows]

    def done_since(self, since: float) -> tuple[int, int]:
        """(images, faces) finished since ``since`` (epoch seconds)."""
        row = self._read(
            f"SELECT COUNT(*), COALESCE(SUM(faces), 0) FROM jobs WHERE state = '{JobState.DONE}' AND finished >= ?",
            (since,),
        )[0]
        return int(row[0]), int(row[1])

    def done_today(self) -> int:
        """Images finished since local midnight."""
        return self.done_since(self._midnight())[0]

    def today(self) -> tuple[int, int, int]:
        """(images with restored faces, images without a face, faces) finished since local midnight:
        a photo without a face is done (copied to the outbox) but has had nothing restored."""
        row = self._read(
            "SELECT COALESCE(SUM(faces > 0), 0), COALESCE(SUM(COALESCE(faces, 0) = 0), 0),"
            f" COALESCE(SUM(faces), 0) FROM jobs WHERE state = '{JobState.DONE}' AND finished >= ?",
            (self._midnight(),),
        )[0]
        return int(row[0]), int(row[1]), int(row[2])

    def _midnight(self) -> float:
        now = datetime.fromtimestamp(self._clock())
        return now.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()

    def history(self, job_id: int) -> list[Event]:
        rows = self._read("SELECT * FROM events WHERE job_id = ? ORDER BY id", (job_id,))
        return [Event(r["job_id"], r["time"], r["kind"], r["worker"], r["detail"]) for r in rows]

    def integrity_check(self) -> str:
        """SQLite's own check ("ok" when healthy)."""
        return str(self._read("PRAGMA integrity_check")[0][0])
