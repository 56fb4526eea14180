"""The output name a job holds and its commit token: the journal's writes that keep a job's
result safe across a crash without moving its state (``Journal.finish`` then does)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from gpen_watch.journal.queries import JournalQueries
from gpen_watch.journal.states import ACTIVE, sql_in

_ACTIVE = sql_in(ACTIVE)


def json_or_null(value: Mapping[str, Any] | None) -> str | None:
    return json.dumps(dict(value)) if value else None


class OutputWrites(JournalQueries):
    """``Journal``'s writes of a job's output name and commit token."""

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

    def begin_commit(
        self,
        job_id: int,
        output: os.PathLike[str] | str,
        ino: int,
        size: int,
        faces: int = 0,
        timings: dict[str, float] | None = None,
        notes: Sequence[str] = (),
        used: Mapping[str, Any] | None = None,
    ) -> bool:
        """Durably record that the fsynced temp file (inode ``ino``, ``size`` bytes) is about to be
        linked to ``output``, with the worker's result (``used``: the settings it was restored
        with), so recovery can finish the job after a crash.

        Returns False when the job is no longer active (finished or ended by another path): the
        caller must then discard its temp file instead of publishing it.
        """
        with self._write(durable=True) as conn:
            cur = conn.execute(
                "UPDATE jobs SET output = ?, commit_ino = ?, commit_size = ?, faces = ?, timings = ?, notes = ?,"
                f" used = ? WHERE id = ? AND state IN {_ACTIVE}",
                (
                    os.fspath(output),
                    ino,
                    size,
                    faces,
                    json.dumps(timings or {}),
                    json.dumps(list(notes)),
                    json_or_null(used),
                    job_id,
                ),
            )
            if cur.rowcount:
                self._event(conn, job_id, "committing", os.fspath(output))
            return cur.rowcount == 1
