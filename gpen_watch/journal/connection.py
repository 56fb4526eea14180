"""The journal's SQLite connection: opening it (creating and migrating the file when needed), and
the rules every call follows.

Threading: a journal holds one SQLite connection guarded by a lock, so any thread of the parent
may call any method; each call is one short transaction. Other processes (``gpen-watch status``)
may open the same file at the same time (WAL lets readers run beside the writer).

Durability (WAL mode): most writes use ``synchronous=NORMAL`` - a commit survives the process being
killed, and the database is never corrupted, but the last few commits may roll back on power loss
or an OS crash. That is harmless for adds, claims, requeues and events: the files are still in the
inbox and the start-up scan finds them again. The writes that come right before something
irreversible on disk (``begin_commit`` before the output is linked into place, ``finish`` and
failures before the original is moved or deleted, ``set_original``) use ``synchronous=FULL``: the
WAL is fsynced at commit, which also makes every earlier commit durable. So after any crash the
journal is never behind the folders in a way that would redo a job or lose track of an original.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from gpen_watch.base.errors import GpenWatchError
from gpen_watch.journal import schema
from gpen_watch.journal.records import Job, job_from_row
from gpen_watch.platform import paths


def default_path() -> Path:
    return paths.state_dir() / "journal.sqlite3"


def connect(path: Path, readonly: bool) -> sqlite3.Connection:
    """The journal file at ``path``, opened (created and migrated unless ``readonly``)."""
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
    return conn


class JournalConnection:
    """One journal file's connection, its lock and its clock; ``Journal`` builds on it."""

    def __init__(self, conn: sqlite3.Connection, path: Path, clock: Callable[[], float] = time.time) -> None:
        self._conn = conn
        self._lock = threading.RLock()
        self.path = path
        # Wall-clock (epoch seconds): times are shown to users and compared across restarts.
        self._clock = clock

    def close(self) -> None:
        with self._lock:
            self._conn.close()

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
        return job_from_row(row) if row else None
