"""Photos sent through the HTTP API: who sent each, in which batch, under which Idempotency-Key.

A photo sent is a job like any drop (``Journal.add`` records both in one transaction); the
``submissions`` table (schema version 11) only adds what the API answers by: the same key from the
same client gives the same photo, a batch lists its photos, a client's bytes of the last day are
counted against its limit. The reads serve the dashboard's read-only connection as well as the
service's.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpen_watch.journal.queries import JournalQueries
from gpen_watch.journal.records import Job, job_from_row
from gpen_watch.journal.states import ACTIVE, ORIGINAL_IN_PLACE, SETTLED, JobState, sql_in

# The client name of the service's own login token (the dashboard's page, `gpen-watch submit` on
# this machine); an API token's client name is its id.
OWNER = "dashboard"


@dataclass(frozen=True)
class Submission:
    """What ``Journal.add`` records beside the job of a photo sent through the API."""

    client: str
    batch: str
    key: str | None
    request: str  # a hash of what was asked: name, inbox, settings, content
    upload: Path  # the temp file in the inbox it came in as


@dataclass(frozen=True)
class SentFile:
    """A photo sent through the API, to record (``Journal.add_sent``): the file it is about to be
    in the inbox, its own settings and its submission."""

    source: Path
    inbox: Path
    rel: Path
    size: int
    mtime: float
    sha256: str
    settings: Mapping[str, Any]
    submission: Submission


@dataclass(frozen=True)
class Submitted:
    """A photo sent through the API, with the job it became."""

    id: int
    job: Job
    client: str
    batch: str
    key: str | None
    request: str
    size: int
    created: float
    upload: Path | None


def record(conn: sqlite3.Connection, job_id: int, sub: Submission, size: int, now: float) -> None:
    """The submission row of ``job_id``, in the caller's transaction."""
    conn.execute(
        "INSERT INTO submissions (job_id, client, batch, key, request, size, created, upload)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (job_id, sub.client, sub.batch, sub.key, sub.request, size, now, os.fspath(sub.upload)),
    )


_SELECT = (
    "SELECT s.id AS s_id, s.client AS s_client, s.batch AS s_batch, s.key AS s_key, s.request AS s_request,"
    " s.size AS s_size, s.created AS s_created, s.upload AS s_upload, j.*"
    " FROM submissions AS s JOIN jobs AS j ON j.id = s.job_id"
)


def _submitted(row: sqlite3.Row) -> Submitted:
    return Submitted(
        id=row["s_id"],
        job=job_from_row(row),
        client=row["s_client"],
        batch=row["s_batch"],
        key=row["s_key"],
        request=row["s_request"],
        size=row["s_size"],
        created=row["s_created"],
        upload=Path(row["s_upload"]) if row["s_upload"] else None,
    )


class SubmissionQueries(JournalQueries):
    """The reads of photos sent through the API."""

    def submission_by_key(self, client: str, key: str) -> Submitted | None:
        rows = self._read(_SELECT + " WHERE s.client = ? AND s.key = ?", (client, key))
        return _submitted(rows[0]) if rows else None

    def submission_of(self, job_id: int) -> Submitted | None:
        """The submission a job came from (None: a drop, or a redo of one)."""
        rows = self._read(_SELECT + " WHERE s.job_id = ? ORDER BY s.id LIMIT 1", (job_id,))
        return _submitted(rows[0]) if rows else None

    def batch_photos(self, client: str, batch: str, after: int = 0, limit: int = 1000) -> list[Submitted]:
        """The photos ``client`` sent in ``batch``, in the order sent, from after submission ``after``."""
        rows = self._read(
            _SELECT + " WHERE s.client = ? AND s.batch = ? AND s.id > ? ORDER BY s.id LIMIT ?",
            (client, batch, after, limit),
        )
        return [_submitted(r) for r in rows]

    def batch_counts(self, client: str, batch: str) -> dict[str, int]:
        """How many of a batch's photos are in each job state (by their first run)."""
        rows = self._read(
            "SELECT j.state, COUNT(*) FROM submissions AS s JOIN jobs AS j ON j.id = s.job_id"
            " WHERE s.client = ? AND s.batch = ? GROUP BY j.state",
            (client, batch),
        )
        return {str(r[0]): int(r[1]) for r in rows}

    def bytes_sent(self, client: str, since: float) -> int:
        """The bytes of the photos ``client`` sent since ``since`` (its daily limit counts these)."""
        rows = self._read(
            "SELECT COALESCE(SUM(size), 0) FROM submissions WHERE client = ? AND created >= ?",
            (client, since),
        )
        return int(rows[0][0])

    def source_in_use(self, source: os.PathLike[str] | str) -> bool:
        """Whether a job holds this inbox path: active, or ended with its file left in place (a
        new file there would be taken for it, not become a photo of its own)."""
        rows = self._read(
            f"SELECT 1 FROM jobs WHERE source = ? AND (state IN {sql_in(ACTIVE)} OR (state IN {sql_in(SETTLED)}"
            f" AND (original IS NULL OR original IN {sql_in(ORIGINAL_IN_PLACE)}))) LIMIT 1",
            (os.fspath(source),),
        )
        return bool(rows)

    def uploads_to_finish(self) -> list[Submitted]:
        """Queued photos whose file is not in the inbox yet (a crash between the record and the
        rename): their temp file, if still there, is renamed in at start."""
        rows = self._read(
            _SELECT + f" WHERE j.state = '{JobState.QUEUED}' AND s.upload IS NOT NULL ORDER BY s.id"
        )
        return [s for s in (_submitted(r) for r in rows) if not os.path.lexists(s.job.source)]


class SubmissionWrites(SubmissionQueries):
    """The writes beside ``Journal.add``: where a sent photo's file went, once it is there."""

    def placed(self, job_id: int, source: os.PathLike[str] | str, rel: os.PathLike[str] | str) -> bool:
        """The queued job's file is in the inbox at ``source`` (another name than the one recorded
        when a file took that one meanwhile); its temp name is forgotten. False: not queued."""
        with self._write(durable=True) as conn:
            cur = conn.execute(
                f"UPDATE jobs SET source = ?, rel = ? WHERE id = ? AND state = '{JobState.QUEUED}'",
                (os.fspath(source), os.fspath(rel), job_id),
            )
            conn.execute("UPDATE submissions SET upload = NULL WHERE job_id = ?", (job_id,))
            if cur.rowcount:
                self._event(conn, job_id, "placed", os.fspath(source))
            return cur.rowcount == 1
