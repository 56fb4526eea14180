"""What the journal answers without changing anything: a job, the jobs in a state, the outputs
active jobs hold, the counts and recent failures the status shows, a job's history."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from gpen_watch.journal.connection import JournalConnection
from gpen_watch.journal.records import Event, Job, job_from_row
from gpen_watch.journal.states import (
    ACTIVE,
    FAILURES,
    FAULT_OURS,
    ORIGINAL_IN_PROGRESS,
    SETTLED,
    SUCCEEDED,
    Hidden,
    JobState,
    Original,
    sql_in,
)

# SQL fragments built from the named states (constants, never user text).
_ACTIVE = sql_in(ACTIVE)
_FAILURES = sql_in(FAILURES)
_SUCCEEDED = sql_in(SUCCEEDED)
# The runs whose result is in the outbox (a person can flag and rate them): done ones, and
# copies of another photo's result with a result of their own; a done run whose result lost a
# comparison (outbox.keep) has none any more.
HAS_RESULT = f"(state IN {_SUCCEEDED} AND output IS NOT NULL)"
# Failures read at a time while looking for those still to see to.
_OPEN_PAGE = 50


class JournalQueries(JournalConnection):
    """The journal's reads; ``Journal`` adds the writes."""

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
        return [job_from_row(r) for r in rows]

    def active_for_source(self, source: os.PathLike[str] | str) -> list[Job]:
        """Queued or running jobs for this inbox path (the watcher saw the file disappear)."""
        rows = self._read(
            f"SELECT * FROM jobs WHERE source = ? AND state IN {_ACTIVE} ORDER BY id",
            (os.fspath(source),),
        )
        return [job_from_row(r) for r in rows]

    def committing(self) -> list[Job]:
        """Active jobs that recorded a commit token (their output may already be published)."""
        rows = self._read(
            f"SELECT * FROM jobs WHERE state IN {_ACTIVE} AND commit_ino IS NOT NULL ORDER BY id"
        )
        return [job_from_row(r) for r in rows]

    def pending_originals(self) -> list[Job]:
        """Ended jobs whose original still has to be archived/kept/deleted/set aside (recovery)."""
        rows = self._read(
            f"SELECT * FROM jobs WHERE state IN {sql_in(SETTLED)}"
            f" AND (original IS NULL OR original IN {sql_in(ORIGINAL_IN_PROGRESS)}) ORDER BY id"
        )
        return [job_from_row(r) for r in rows]

    def waiting_originals(self) -> list[Job]:
        """Ended jobs whose original waits in the inbox for its folder to take it, oldest first."""
        return [
            job_from_row(r)
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
        row = self._read(
            f"SELECT COUNT(*) FROM jobs WHERE state = '{JobState.FAILED}' AND fault = '{FAULT_OURS}'"
        )
        return int(row[0][0])

    def recent_errors(self, n: int = 10) -> list[Job]:
        """The last ``n`` failed or unsupported jobs, newest first."""
        rows = self._read(
            f"SELECT * FROM jobs WHERE state IN {_FAILURES} ORDER BY finished DESC, id DESC LIMIT ?",
            (n,),
        )
        return [job_from_row(r) for r in rows]

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
        a photo without a face is done (copied to the outbox) but has had nothing restored. A redo
        is no photo more: it is counted apart (``redos_today``)."""
        row = self._read(
            "SELECT COALESCE(SUM(faces > 0), 0), COALESCE(SUM(COALESCE(faces, 0) = 0), 0),"
            f" COALESCE(SUM(faces), 0) FROM jobs WHERE state = '{JobState.DONE}' AND finished >= ?"
            " AND redo_of IS NULL",
            (self._midnight(),),
        )[0]
        return int(row[0]), int(row[1]), int(row[2])

    def redos_today(self) -> int:
        """Redos finished since local midnight (each restored a photo already done once)."""
        row = self._read(
            f"SELECT COUNT(*) FROM jobs WHERE state = '{JobState.DONE}' AND finished >= ? AND redo_of IS NOT NULL",
            (self._midnight(),),
        )
        return int(row[0][0])

    def redos_done(self) -> int:
        """Redos that ended well, ever (off the ``jobs_redo`` index: only redos are read)."""
        row = self._read(f"SELECT COUNT(*) FROM jobs WHERE redo_of IS NOT NULL AND state = '{JobState.DONE}'")
        return int(row[0][0])

    def open_failures(self, n: int = 5) -> list[Job]:
        """The last ``n`` failures still to see to, newest first, one per file: those on the Failed
        page (not retried or dismissed) that no later run of the same file (its path, or its
        content) has put right, for `status`'s "last errors". Read newest first off the
        (state, finished) index, a page at a time, until ``n`` are found."""
        found: list[Job] = []
        files: set[str] = set()
        key = (float("inf"), 0)
        while len(found) < n:
            rows = []
            for state in FAILURES:
                rows += self._read(
                    "SELECT * FROM jobs AS f INDEXED BY jobs_state_finished WHERE state = ? AND hidden IS NULL"
                    " AND finished <= ? AND (finished < ? OR id < ?)"
                    " AND NOT EXISTS (SELECT 1 FROM jobs AS later WHERE later.source = f.source"
                    f" AND later.id > f.id AND later.state IN {_SUCCEEDED})"
                    " AND NOT EXISTS (SELECT 1 FROM jobs AS later WHERE later.sha256 = f.sha256"
                    f" AND later.size = f.size AND later.id > f.id AND later.state IN {_SUCCEEDED})"
                    " ORDER BY finished DESC, id DESC LIMIT ?",
                    (str(state), key[0], key[0], key[1], _OPEN_PAGE),
                )
            if not rows:
                break
            rows.sort(key=lambda r: (r["finished"], r["id"]), reverse=True)
            rows = rows[:_OPEN_PAGE]
            for row in rows:
                if row["source"] not in files:
                    files.add(row["source"])
                    found.append(job_from_row(row))
                    if len(found) == n:
                        break
            key = (rows[-1]["finished"], rows[-1]["id"])
        return found

    def _midnight(self) -> float:
        now = datetime.fromtimestamp(self._clock())
        return now.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()

    def failures_shown(self, limit: int = 10_000) -> list[Job]:
        """Failures still on the Failed page (not retried or dismissed), oldest first."""
        rows = self._read(
            f"SELECT * FROM jobs WHERE state IN {_FAILURES} AND hidden IS NULL ORDER BY id LIMIT ?", (limit,)
        )
        return [job_from_row(r) for r in rows]

    def retried(self, source: os.PathLike[str] | str) -> list[Job]:
        """Failures of the file at ``source`` sent back to its inbox whose old error file is still
        to go (``outbox.retry``)."""
        rows = self._read(
            f"SELECT * FROM jobs WHERE source = ? AND hidden = '{Hidden.RETRIED}' ORDER BY id",
            (os.fspath(source),),
        )
        return [job_from_row(r) for r in rows]

    def named(self, name: str, states: tuple[JobState, ...], limit: int = 50) -> list[Job]:
        """Jobs in ``states`` whose file is called ``name`` as the user sees it (the name it was
        dropped as, its result's, or its set-aside copy's), or, for an absolute path, whose
        original, result or set-aside copy is that file; newest first."""
        args: tuple[str, ...]
        if os.path.isabs(name):
            where, args = "(source = ? OR output = ? OR original_path = ?)", (name, name, name)
        else:
            # A file name inside any folder: LIKE with its wildcards escaped.
            like = "%" + os.sep + name.replace("!", "!!").replace("%", "!%").replace("_", "!_")
            where = "(rel = ? OR rel LIKE ? ESCAPE '!' OR output LIKE ? ESCAPE '!' OR original_path LIKE ? ESCAPE '!')"
            args = (name, like, like, like)
        rows = self._read(
            f"SELECT * FROM jobs WHERE state IN {sql_in(states)} AND {where} ORDER BY id DESC LIMIT ?",
            (*args, limit),
        )
        return [job_from_row(r) for r in rows]

    def runs(self, job_id: int) -> list[Job]:
        """Every run of the photo ``job_id`` is one of: its first job and each redo after it
        (``redo_of`` links each to the run whose result it replaced), oldest first."""
        rows = self._read(
            "WITH RECURSIVE up(id, redo_of) AS (SELECT id, redo_of FROM jobs WHERE id = ?"
            " UNION SELECT j.id, j.redo_of FROM jobs AS j JOIN up ON j.id = up.redo_of),"
            " down(id) AS (SELECT id FROM up WHERE redo_of IS NULL"
            " UNION SELECT j.id FROM jobs AS j JOIN down ON j.redo_of = down.id)"
            " SELECT jobs.* FROM jobs JOIN down USING (id) ORDER BY jobs.id",
            (job_id,),
        )
        return [job_from_row(r) for r in rows]

    def current_run(self, job: Job) -> Job | None:
        """The newest run of ``job``'s photo whose result is in the outbox: a done run, or a
        copy's own copy of another photo's result."""
        rows = self._read(
            f"SELECT * FROM jobs WHERE (id = ? OR photo = ?) AND {HAS_RESULT} ORDER BY id DESC LIMIT 1",
            (job.photo_id, job.photo_id),
        )
        return job_from_row(rows[0]) if rows else None

    def results_of(self, job: Job) -> list[Job]:
        """The runs of ``job``'s photo whose result files are in the outbox now, oldest first: one,
        or two while a redo beside the other waits to be compared (outbox.keep). A run whose name a
        newer run took over (a redo replaces the result in place) has none of its own any more."""
        rows = self._read(
            f"SELECT * FROM jobs AS r WHERE (r.id = ? OR r.photo = ?) AND r.state IN {_SUCCEEDED}"
            " AND r.output IS NOT NULL AND NOT EXISTS (SELECT 1 FROM jobs AS n WHERE (n.id = ? OR n.photo = ?)"
            f" AND n.id > r.id AND n.output = r.output AND n.state IN {_SUCCEEDED}) ORDER BY r.id",
            (job.photo_id, job.photo_id, job.photo_id, job.photo_id),
        )
        return [job_from_row(r) for r in rows]

    def photo_dropped_again(self, job: Job) -> Job | None:
        """The run whose result is that of the photo ``job`` drops again (the same content under
        the same name in the same inbox, restored before, or given a copy then): of that photo's
        runs with a result, the one at its own name (the older while a redo beside it waits to be
        compared). None when no photo of that name and content has a result."""
        rows = self._read(
            "SELECT * FROM jobs WHERE id != ? AND inbox = ? AND rel = ? AND sha256 = ? AND size = ?"
            f" AND redo_of IS NULL AND (state = '{JobState.DONE}' OR (state = '{JobState.DUPLICATE}'"
            " AND output IS NOT NULL)) ORDER BY id DESC LIMIT 1",
            (job.id, os.fspath(job.inbox), os.fspath(job.rel), job.sha256, job.size),
        )
        results = self.results_of(job_from_row(rows[0])) if rows else []
        return results[0] if results else None

    def copy_group(self, job: Job) -> list[Job]:
        """The photo ``job`` is a run of, with every copy of it (the same photo dropped again under
        another name, given a copy of its result) or, when it is a copy, the photo it copied and
        its other copies: each one's newest run with a result, the first photo first. A redo of
        one is a redo of them all."""
        first = self.get(job.photo_id) or job
        root = first
        copied = (
            self.get(first.duplicate_of) if first.state == JobState.DUPLICATE and first.duplicate_of else None
        )
        if copied is not None:
            root = self.get(copied.photo_id) or copied
        copies = self._read(
            f"SELECT * FROM jobs WHERE sha256 = ? AND size = ? AND state = '{JobState.DUPLICATE}'"
            " AND output IS NOT NULL AND duplicate_of IN (SELECT id FROM jobs WHERE id = ? OR photo = ?)"
            " ORDER BY id",
            (root.sha256, root.size, root.id, root.id),
        )
        group = []
        for photo in (root, *(job_from_row(r) for r in copies)):
            run = self.current_run(photo)
            if run is not None:
                group.append(run)
        return group

    def history(self, job_id: int) -> list[Event]:
        rows = self._read("SELECT * FROM events WHERE job_id = ? ORDER BY id", (job_id,))
        return [Event(r["job_id"], r["time"], r["kind"], r["worker"], r["detail"]) for r in rows]

    def integrity_check(self) -> str:
        """SQLite's own check ("ok" when healthy)."""
        return str(self._read("PRAGMA integrity_check")[0][0])
