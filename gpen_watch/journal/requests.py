"""What a person asks of the journal beside the flow of photos: restore a done photo again with
other settings (a redo), and take a failure off the Failed page (retried or dismissed)."""

from __future__ import annotations

import json
import os
import sqlite3
from typing import Any

from gpen_watch.journal.queries import JournalQueries
from gpen_watch.journal.records import Job, describe_settings, job_from_row
from gpen_watch.journal.states import FAILURES, Hidden, JobState, sql_in

_FAILURES = sql_in(FAILURES)


class UserRequests(JournalQueries):
    """The journal's writes for redo, retry and dismiss; ``Journal`` adds the photos' own flow."""

    def add_redo(self, of: Job, source: os.PathLike[str] | str, settings: dict[str, Any]) -> Job:
        """Queue a redo of the done job ``of``: restore the original at ``source`` (its archived
        copy, or the one kept in the inbox) again with ``settings`` on top of its inbox's, into
        ``of``'s result, which it replaces. The file must be what ``of`` restored (same content)."""
        src = os.fspath(source)
        with self._write() as conn:
            cur = conn.execute(
                "INSERT INTO jobs (source, inbox, rel, size, mtime, sha256, created, state, output,"
                f" redo_of, settings) VALUES (?, ?, ?, ?, ?, ?, ?, '{JobState.QUEUED}', ?, ?, ?)",
                (
                    src,
                    os.fspath(of.inbox),
                    os.fspath(of.rel),
                    of.size,
                    of.mtime,
                    of.sha256,
                    self._clock(),
                    os.fspath(of.output) if of.output else None,
                    of.id,
                    json.dumps(settings, sort_keys=True),
                ),
            )
            job_id = int(cur.lastrowid or 0)
            self._event(conn, job_id, "redo", f"of job {of.id}: {describe_settings(settings)}")
            self._event(conn, of.id, "redo-asked", f"as job {job_id}: {describe_settings(settings)}")
            return self._added(conn, job_id)

    def hide(self, job_id: int, why: Hidden, detail: str) -> bool:
        """Take a failure off the Failed page (or move it on from RETRIED); False if it is no
        failure (a retry or dismissal of a job that did not fail is refused by its caller)."""
        with self._write(durable=True) as conn:
            cur = conn.execute(
                f"UPDATE jobs SET hidden = ? WHERE id = ? AND state IN {_FAILURES}", (str(why), job_id)
            )
            if cur.rowcount:
                self._event(conn, job_id, str(why), detail)
            return cur.rowcount == 1

    def _added(self, conn: sqlite3.Connection, job_id: int) -> Job:
        job = self._get(conn, job_id)
        assert job is not None, "a job just inserted is there"
        return job

    def unhide(self, job_id: int, detail: str) -> None:
        """Put a failure back on the Failed page (a retry that never moved its file)."""
        with self._write(durable=True) as conn:
            conn.execute("UPDATE jobs SET hidden = NULL WHERE id = ?", (job_id,))
            self._event(conn, job_id, "shown-again", detail)

    def retries_pending(self) -> list[Job]:
        """Failures marked retried whose new try has not ended (few: each ends at that try)."""
        return [
            job_from_row(r)
            for r in self._read(f"SELECT * FROM jobs WHERE hidden = '{Hidden.RETRIED}' ORDER BY id")
        ]
