"""The journal's SQLite schema and its migrations.

The version lives in ``PRAGMA user_version``. Each entry of ``MIGRATIONS`` takes the database from
version ``i`` to ``i + 1``; a new release appends a step and never edits an old one, so a journal
written by any earlier version opens. A journal from a *newer* version is refused rather than
guessed at.
"""

from __future__ import annotations

import sqlite3

from gpen_watch.base.errors import GpenWatchError

# The job states version 1 allows (gpen_watch.journal.states.JobState names them). Spelt out here
# because a migration is history: a new state is a new migration, never an edit of this one.
V1_STATES = ("queued", "running", "done", "failed", "unsupported", "duplicate", "gone")

_V1 = f"""
CREATE TABLE jobs (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    source        TEXT    NOT NULL,          -- absolute path of the file in the inbox
    inbox         TEXT    NOT NULL,          -- the inbox folder it arrived in
    rel           TEXT    NOT NULL,          -- path relative to the inbox (subfolder mirroring)
    size          INTEGER NOT NULL,
    mtime         REAL    NOT NULL,
    sha256        TEXT    NOT NULL,
    state         TEXT    NOT NULL CHECK (state IN ({", ".join(repr(s) for s in V1_STATES)})),
    attempts      INTEGER NOT NULL DEFAULT 0,
    worker        TEXT,
    created       REAL    NOT NULL,
    started       REAL,
    finished      REAL,
    -- Output path: reserved when the job is dispatched, kept once done (never re-chosen).
    output        TEXT,
    faces         INTEGER,
    timings       TEXT,                      -- JSON object, seconds per stage
    error         TEXT,
    notes         TEXT,                      -- JSON list of strings for the user
    duplicate_of  INTEGER REFERENCES jobs(id),
    -- Commit token: inode and size of the fsynced temp output, recorded before it is linked into
    -- place. After a crash, a final file with this inode and size is known to be ours and complete.
    commit_ino    INTEGER,
    commit_size   INTEGER,
    -- What happened to the original after the job ended: NULL (not yet), an in-progress marker
    -- ('archiving', 'deleting', 'setting-aside') or an outcome ('archived', 'kept', 'deleted',
    -- 'set-aside', 'left', 'missing', 'replaced').
    original      TEXT,
    original_path TEXT                       -- where it went (archive or failed/ path)
);
CREATE INDEX jobs_state  ON jobs(state, id);
CREATE INDEX jobs_hash   ON jobs(sha256, size);
CREATE INDEX jobs_source ON jobs(source);
CREATE INDEX jobs_output ON jobs(output);
CREATE INDEX jobs_finished ON jobs(finished);

CREATE TABLE events (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id  INTEGER NOT NULL REFERENCES jobs(id),
    time    REAL    NOT NULL,
    kind    TEXT    NOT NULL,                -- added, claimed, requeued, finished, failed, ...
    worker  TEXT,
    detail  TEXT
);
CREATE INDEX events_job ON events(job_id, id);
"""

# Version 2: a duplicate gets its own output, a copy of the first one's (outbox.duplicates), and a
# job that waited for a twin that failed repeats its failure; both are linked by duplicate_of. Under
# version 1 a duplicate's output column named the first one's file: those rows keep their link and
# lose the borrowed name, so that ``output`` always means a job's own file.
_V2 = """
UPDATE jobs SET output = NULL
    WHERE state = 'duplicate' AND duplicate_of IS NOT NULL
    AND output = (SELECT first.output FROM jobs AS first WHERE first.id = jobs.duplicate_of);
"""

# Version 3: the node that restored the photo (or last tried to), for a service whose workers run
# on a cluster's machines too: the host name for this machine's workers, "host (address)" for a
# remote node's. NULL for jobs from before, and for jobs no worker touched (copies, repeats).
_V3 = """
ALTER TABLE jobs ADD COLUMN node TEXT;
"""

# Version 4: whose fault a failure was. 'ours' when gpen-watch or a library it uses failed on the
# photo (an exception that says nothing of the file): `status` counts those apart from the photos
# that are damaged. NULL for every other job and for jobs from before.
_V4 = """
ALTER TABLE jobs ADD COLUMN fault TEXT;
"""

# Version 5: the jobs of one state by finish time, newest first, for the dashboard's Results and
# Failed pages: a page of them reads its rows off this index instead of sorting every done job.
_V5 = """
CREATE INDEX jobs_state_finished ON jobs(state, finished);
"""

# Version 6: a failure the user sent through again ('retried': its file is back in its inbox and
# its old error file goes once the new try ends; 'retry-ended': it went) or took off the Failed
# page ('dismissed'). NULL: a failure still shown, and every other job.
_V6 = """
ALTER TABLE jobs ADD COLUMN hidden TEXT;
"""

# Version 7: a redo (`gpen-watch redo`, a photo's page): a new job that restores a done job's
# original again with other settings and replaces its result. ``redo_of`` names the job whose
# result it replaces; ``settings`` holds what it changes, as JSON: dotted setting names, and
# "face_ids" for the faces picked on the page. NULL for every other job.
_V7 = """
ALTER TABLE jobs ADD COLUMN redo_of INTEGER REFERENCES jobs(id);
ALTER TABLE jobs ADD COLUMN settings TEXT;
CREATE INDEX jobs_redo ON jobs(redo_of);
"""

# Version 8: review. ``photo`` names a redo's photo by its first run (NULL on a first run, which is
# its own photo). ``listed`` is 1 on the runs Results holds: each photo's newest done run, and each
# failure still on the Failed page. Triggers keep it as states and ``hidden`` change, so the rule
# lives here once and a filtered page of 100,000 runs reads partial indexes of those runs alone
# instead of asking, row by row, whether a later run replaced each. ``mark`` is what a person said
# of a run on the dashboard ('accepted', or 'look' for "needs another look", with ``mark_note``),
# and ``reviewed`` when its page was seen; a redo is a new result and starts unmarked.
RELIST = """
UPDATE jobs SET listed = CASE
    WHEN state IN ('failed', 'unsupported') AND hidden IS NULL THEN 1
    WHEN state = 'done' AND NOT EXISTS (SELECT 1 FROM jobs AS r WHERE r.photo = COALESCE(jobs.photo, jobs.id)
        AND r.state = 'done' AND r.id > jobs.id) THEN 1
    END;
"""
_V8 = f"""
ALTER TABLE jobs ADD COLUMN photo INTEGER REFERENCES jobs(id);
ALTER TABLE jobs ADD COLUMN listed INTEGER;
ALTER TABLE jobs ADD COLUMN mark TEXT;
ALTER TABLE jobs ADD COLUMN mark_note TEXT;
ALTER TABLE jobs ADD COLUMN reviewed REAL;
WITH RECURSIVE chain(id, root) AS (
    SELECT id, id FROM jobs WHERE redo_of IS NULL
    UNION ALL SELECT j.id, chain.root FROM jobs AS j JOIN chain ON j.redo_of = chain.id
)
UPDATE jobs SET photo = (SELECT root FROM chain WHERE chain.id = jobs.id) WHERE redo_of IS NOT NULL;
CREATE INDEX jobs_photo ON jobs(photo, state, id) WHERE photo IS NOT NULL;
{RELIST}
CREATE TRIGGER jobs_listed_done AFTER UPDATE OF state ON jobs WHEN NEW.state = 'done' BEGIN
    UPDATE jobs SET listed = NULL WHERE (id = COALESCE(NEW.photo, NEW.id) OR photo = COALESCE(NEW.photo, NEW.id))
        AND state = 'done' AND id < NEW.id AND listed = 1;
    UPDATE jobs SET listed = 1 WHERE id = NEW.id AND NOT EXISTS (SELECT 1 FROM jobs AS r
        WHERE r.photo = COALESCE(NEW.photo, NEW.id) AND r.state = 'done' AND r.id > NEW.id);
END;
CREATE TRIGGER jobs_listed_failed AFTER UPDATE OF state, hidden ON jobs
    WHEN NEW.state IN ('failed', 'unsupported') BEGIN
    UPDATE jobs SET listed = CASE WHEN NEW.hidden IS NULL THEN 1 END WHERE id = NEW.id;
END;
CREATE INDEX jobs_listed_finished ON jobs(finished, id) WHERE listed = 1;
CREATE INDEX jobs_listed_rel ON jobs(rel COLLATE NOCASE, id) WHERE listed = 1;
CREATE INDEX jobs_listed_faces ON jobs(COALESCE(faces, 0), finished, id) WHERE listed = 1;
-- Every column a filter reads: a count of the matches reads this index alone, not the rows.
CREATE INDEX jobs_listed_filter ON jobs(rel COLLATE NOCASE, state, faces, redo_of, mark, reviewed, inbox, finished)
    WHERE listed = 1;
"""

# Version 9: culling. ``stars`` is a rating of 1 to 5 a person gave a run (NULL: none), beside its
# flag (``mark``: 'accepted' for a pick, 'rejected', or 'look'); ``reviewed`` now says when the run
# was first given a flag or stars, and is cleared with the last of them. A copy of a done photo
# under a name of its own (a duplicate with an output) is a photo of Results too: ``listed`` holds
# it as it holds a done run, and a redo of it unlists it as a redo unlists the run it replaces. A
# copy with no output of its own (the same name dropped again) is not listed: its photo is.
_V9 = """
ALTER TABLE jobs ADD COLUMN stars INTEGER;
DROP TRIGGER jobs_listed_done;
CREATE TRIGGER jobs_listed_done AFTER UPDATE OF state ON jobs WHEN NEW.state IN ('done', 'duplicate') BEGIN
    UPDATE jobs SET listed = NULL WHERE (id = COALESCE(NEW.photo, NEW.id) OR photo = COALESCE(NEW.photo, NEW.id))
        AND state IN ('done', 'duplicate') AND id < NEW.id AND listed = 1;
    UPDATE jobs SET listed = 1 WHERE id = NEW.id AND output IS NOT NULL AND NOT EXISTS (SELECT 1 FROM jobs AS r
        WHERE r.photo = COALESCE(NEW.photo, NEW.id) AND r.state = 'done' AND r.id > NEW.id);
END;
UPDATE jobs SET listed = 1 WHERE state = 'duplicate' AND output IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM jobs AS r WHERE r.photo = jobs.id AND r.state = 'done');
DROP INDEX jobs_listed_filter;
CREATE INDEX jobs_listed_filter ON jobs(rel COLLATE NOCASE, state, faces, redo_of, mark, reviewed, stars, inbox,
    finished) WHERE listed = 1;
"""

# Version 10: the settings a run was really restored with (``config.SettingsUsed`` as JSON: its
# model, strength, faces, upscale and the format written), recorded with its result: the settings
# in effect change with a reload, and a run's page names what that run used. NULL: not recorded.
_V10 = """
ALTER TABLE jobs ADD COLUMN used TEXT;
"""

# Version 11: photos sent through the HTTP API (`gpen-watch submit`, the dashboard's upload, the
# send-to entries). Each is a job like any drop, its settings in ``jobs.settings`` (as a redo's
# are); this table says who sent it (``client``: an API token's id, or "dashboard" for the
# service's own login token), in which ``batch``, under which Idempotency-Key (``key``; NULL: none),
# what exactly was asked (``request``: a hash of the name, inbox, settings and content, so a key
# reused for another request is told apart) and the temp file it came in as (``upload``), which
# the start-up recovery renames into the inbox if a crash came between the record and the rename.
_V11 = """
CREATE TABLE submissions (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id   INTEGER NOT NULL REFERENCES jobs(id),
    client   TEXT    NOT NULL,
    batch    TEXT    NOT NULL,
    key      TEXT,
    request  TEXT    NOT NULL,
    size     INTEGER NOT NULL,
    created  REAL    NOT NULL,
    upload   TEXT
);
CREATE UNIQUE INDEX submissions_key ON submissions(client, key) WHERE key IS NOT NULL;
CREATE INDEX submissions_batch ON submissions(client, batch, id);
CREATE INDEX submissions_job ON submissions(job_id);
CREATE INDEX submissions_created ON submissions(client, created);
"""

# Version 12: the faces a run checked (journal.faces, docs/identity.md): one row a face it restored
# or left as it was because it was already sharp, by its number on the photo's page, with its detail
# measure, identity distance, whether that was over the run's restore.identity_threshold, and the
# original face's descriptor (128 float32, little-endian) for grouping a batch by person. On the
# run, how many faces were flagged and the largest distance (NULL: none checked), indexed over the
# runs Results lists for its "may not look like the same person" filter and its order by them.
_V12 = """
CREATE TABLE faces (
    job_id     INTEGER NOT NULL REFERENCES jobs(id),
    idx        INTEGER NOT NULL,
    restored   INTEGER NOT NULL,
    detail     REAL,
    distance   REAL,
    flagged    INTEGER NOT NULL DEFAULT 0,
    descriptor BLOB,
    PRIMARY KEY (job_id, idx)
);
ALTER TABLE jobs ADD COLUMN flagged INTEGER;
ALTER TABLE jobs ADD COLUMN identity REAL;
CREATE INDEX jobs_listed_identity ON jobs(identity, id) WHERE listed = 1;
CREATE INDEX jobs_listed_flagged ON jobs(finished, id) WHERE listed = 1 AND flagged > 0;
"""

# Version 13: Results filters and orders by the identity check (docs/dashboard.md). The filter index
# holds ``flagged`` too, so a count of "may not look like the same person" reads that index alone,
# as every other filter's does; the order "largest identity change first" reads an index of the
# same key it sorts by, runs with no face measured last (-1), newest first among equals.
_V13 = """
DROP INDEX jobs_listed_filter;
CREATE INDEX jobs_listed_filter ON jobs(rel COLLATE NOCASE, state, faces, redo_of, mark, reviewed, stars, inbox,
    finished, flagged) WHERE listed = 1;
DROP INDEX jobs_listed_identity;
CREATE INDEX jobs_listed_identity ON jobs(COALESCE(identity, -1), finished, id) WHERE listed = 1;
"""

MIGRATIONS: list[str] = [_V1, _V2, _V3, _V4, _V5, _V6, _V7, _V8, _V9, _V10, _V11, _V12, _V13]
VERSION = len(MIGRATIONS)


def migrate(conn: sqlite3.Connection, path: object) -> None:
    """Bring the database at ``conn`` to ``VERSION``; each step is one transaction."""
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    if current > VERSION:
        raise GpenWatchError(
            f"{path}: journal was written by a newer gpen-watch (schema {current}, this one knows "
            f"{VERSION}); upgrade gpen-watch or move the file aside to start a fresh journal"
        )
    for version in range(current, VERSION):
        # executescript commits first; wrap the step so a crash mid-migration leaves the old version.
        conn.executescript(
            "BEGIN IMMEDIATE;\n" + MIGRATIONS[version] + f"\nPRAGMA user_version = {version + 1};\nCOMMIT;"
        )
