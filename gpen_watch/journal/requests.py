"""What a person asks of the journal beside the flow of photos: restore a done photo again with
other settings (a redo), and take a failure off the Failed page (retried or dismissed)."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from gpen_watch.journal.queries import HAS_RESULT, JournalQueries
from gpen_watch.journal.records import Job, describe_settings, job_from_row
from gpen_watch.journal.states import FAILURES, MAX_STARS, SUCCEEDED, Hidden, JobState, Mark, sql_in

_FAILURES = sql_in(FAILURES)
_SUCCEEDED = sql_in(SUCCEEDED)
# ``reviewed`` once a flag or rating is set: when the first was given, cleared with the last. An
# UPDATE's expressions read the row as it was, so the new flag or rating is passed in.
_REVIEWED = "reviewed = CASE WHEN {flag} IS NULL AND {stars} IS NULL THEN NULL ELSE COALESCE(reviewed, ?) END"
_FLAG_WORDS = {
    None: "flag cleared",
    Mark.ACCEPTED: "picked",
    Mark.REJECTED: "rejected",
    Mark.LOOK: "needs another look",
}


class UserRequests(JournalQueries):
    """The journal's writes for redo, retry and dismiss; ``Journal`` adds the photos' own flow."""

    def add_redo(self, of: Job, source: os.PathLike[str] | str, settings: dict[str, Any]) -> Job:
        """Queue a redo of the done job ``of``: restore the original at ``source`` (its archived
        copy, or the one kept in the inbox) again with ``settings`` on top of its inbox's, into
        ``of``'s result, which it replaces. The file must be what ``of`` restored (same content)."""
        return self.add_redos([(of, source)], settings)[0]

    def add_redos(
        self, runs: Sequence[tuple[Job, os.PathLike[str] | str]], settings: dict[str, Any]
    ) -> list[Job]:
        """``add_redo`` for each (done job, its original) of ``runs``, in one transaction: a bulk
        redo of hundreds of photos from the dashboard queues at once or not at all.

        Runs of one content (a photo and its copies under other names) are restored once: the
        first of them here is restored, and each later one is linked to it (``duplicate_of``) and
        given a copy of its result under its own name once it is done (``Journal.claim_batch``)."""
        queued = []
        leads: dict[tuple[str, int], int] = {}
        with self._write() as conn:
            for of, source in runs:
                lead = leads.get((of.sha256, of.size))
                cur = conn.execute(
                    "INSERT INTO jobs (source, inbox, rel, size, mtime, sha256, created, state, output,"
                    " redo_of, settings, photo, duplicate_of)"
                    f" VALUES (?, ?, ?, ?, ?, ?, ?, '{JobState.QUEUED}', ?, ?, ?, ?, ?)",
                    (
                        os.fspath(source),
                        os.fspath(of.inbox),
                        os.fspath(of.rel),
                        of.size,
                        of.mtime,
                        of.sha256,
                        self._clock(),
                        os.fspath(of.output) if of.output else None,
                        of.id,
                        json.dumps(settings, sort_keys=True),
                        of.photo_id,
                        lead,
                    ),
                )
                job_id = int(cur.lastrowid or 0)
                leads.setdefault((of.sha256, of.size), job_id)
                once = f"; the same photo as run {lead}, whose result it takes" if lead is not None else ""
                self._event(conn, job_id, "redo", f"of run {of.id}: {describe_settings(settings)}{once}")
                self._event(conn, of.id, "redo-asked", f"as run {job_id}: {describe_settings(settings)}")
                queued.append(self._added(conn, job_id))
        return queued

    def record_kept(self, kept: Job, other: Job, output: os.PathLike[str] | str, other_file: str) -> None:
        """A comparison decided (``outbox.keep``): ``kept``'s result is the photo's, at ``output``;
        ``other``'s is no longer a result of gpen-watch's (``other_file``: where its file stays,
        "" when it was removed). Results lists the kept run in place of the other."""
        with self._write(durable=True) as conn:
            photo = kept.photo_id
            conn.execute(
                f"UPDATE jobs SET listed = NULL WHERE (id = ? OR photo = ?) AND state IN {_SUCCEEDED}"
                " AND listed = 1",
                (photo, photo),
            )
            conn.execute("UPDATE jobs SET output = ?, listed = 1 WHERE id = ?", (os.fspath(output), kept.id))
            conn.execute("UPDATE jobs SET output = NULL WHERE id = ?", (other.id,))
            where = f"its file stays as {other_file}" if other_file else "its file was removed"
            self._event(conn, kept.id, "kept", f"over run {other.id}, whose result is not kept ({where})")
            self._event(conn, other.id, "not-kept", f"run {kept.id} was kept in its place; {where}")

    def set_mark(self, job_ids: Iterable[int], mark: Mark | None, note: str | None = None) -> int:
        """Flag the runs ``job_ids`` that have a result (None: clear the flag); how many were."""
        ids = list(job_ids)
        flag = None if mark is None else str(mark)
        with self._write() as conn:
            rows = conn.execute(
                f"UPDATE jobs SET mark = ?, mark_note = ?, {_REVIEWED.format(flag='?', stars='stars')}"
                f" WHERE {HAS_RESULT} AND id IN (SELECT value FROM json_each(?)) RETURNING id",
                (flag, note if mark == Mark.LOOK else None, flag, self._clock(), json.dumps(ids)),
            ).fetchall()
            what = _FLAG_WORDS[mark]
            for row in rows:
                self._event(
                    conn, row[0], "marked", what + (f": {note}" if note and mark == Mark.LOOK else "")
                )
            return len(rows)

    def set_stars(self, job_ids: Iterable[int], stars: int | None) -> int:
        """Rate the runs ``job_ids`` that have a result 1 to ``MAX_STARS`` stars (None or 0: no
        rating); how many were."""
        ids = list(job_ids)
        if stars is not None and not 0 <= stars <= MAX_STARS:
            raise ValueError(f"stars must be 0 to {MAX_STARS}, not {stars!r}")
        rating = stars or None
        with self._write() as conn:
            rows = conn.execute(
                f"UPDATE jobs SET stars = ?, {_REVIEWED.format(flag='mark', stars='?')}"
                f" WHERE {HAS_RESULT} AND id IN (SELECT value FROM json_each(?)) RETURNING id",
                (rating, rating, self._clock(), json.dumps(ids)),
            ).fetchall()
            what = (
                "rating cleared" if rating is None else f"rated {rating} star" + ("" if rating == 1 else "s")
            )
            for row in rows:
                self._event(conn, row[0], "marked", what)
            return len(rows)

    def set_reviewed(self, job_ids: Iterable[int]) -> int:
        """Note that the pages of ``job_ids`` were seen (once: the first time stays)."""
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE jobs SET reviewed = ? WHERE reviewed IS NULL AND id IN (SELECT value FROM json_each(?))",
                (self._clock(), json.dumps(list(job_ids))),
            )
            return cur.rowcount

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


def redo_lead(conn: sqlite3.Connection, row: sqlite3.Row) -> sqlite3.Row | None:
    """The redo whose result the queued redo ``row`` takes (``UserRequests.add_redos`` linked the
    redos of a photo and its copies asked together), if any, with the same content and settings."""
    if row["duplicate_of"] is None:
        return None
    lead: sqlite3.Row | None = conn.execute(
        "SELECT * FROM jobs WHERE id = ? AND redo_of IS NOT NULL AND sha256 = ? AND size = ? AND settings IS ?",
        (row["duplicate_of"], row["sha256"], row["size"], row["settings"]),
    ).fetchone()
    return lead
