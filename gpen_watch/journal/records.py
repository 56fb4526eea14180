"""What the journal records and hands out: a job's row as a ``Job``, its history's ``Event``s, what
``Journal.add`` and ``Journal.claim_batch`` did, and the content hash that tells one photo from
another."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import stat as stat_mod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gpen_watch.base.fsutil import READ_NOFOLLOW_FLAGS
from gpen_watch.journal.states import Hidden, JobState, Mark, Original

HASH_CHUNK = 1 << 20


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
    # Off the Failed page, and why (schema version 6); None for every job still shown there.
    hidden: Hidden | None = None
    # A redo (schema version 7): the job whose result it replaces, and what it changes (dotted
    # setting names, and "face_ids"); None and {} for every other job.
    redo_of: int | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    # Review (schema version 8): a redo's first run (None on a first run), the person's flag and
    # its note, and when the run was first flagged or rated (before schema 9: when its page was seen).
    photo: int | None = None
    mark: Mark | None = None
    mark_note: str | None = None
    reviewed: float | None = None
    # Culling (schema version 9): a rating of 1 to 5 beside the flag (None: none).
    stars: int | None = None
    # The settings the run was restored with, as its result said (schema version 10: the JSON of
    # config.SettingsUsed); {} when not recorded.
    used: dict[str, Any] = field(default_factory=dict)
    # The identity check (schema version 12, docs/identity.md): how many of its faces may not look
    # like the same person, and the largest identity distance; None when no face was measured.
    flagged: int | None = None
    identity: float | None = None

    @property
    def is_redo(self) -> bool:
        return self.redo_of is not None

    @property
    def photo_id(self) -> int:
        """The photo this run is of, named by its first run's id."""
        return self.photo if self.photo is not None else self.id


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


def describe_settings(settings: dict[str, Any]) -> str:
    """A redo's settings for the history: "restore.strength=0.5, faces 0, 2"."""
    parts = [f"{k}={v}" for k, v in sorted(settings.items()) if k not in ("face_ids", "beside")]
    if "face_ids" in settings:
        ids = settings["face_ids"]
        parts.append("faces " + ", ".join(map(str, ids)) if ids else "no face restored")
    if settings.get("beside"):
        parts.append("its result beside the other to compare")
    return ", ".join(parts) or "the inbox's settings"


def duplicate_message(done: sqlite3.Row) -> str:
    return f"same content as {done['source']}: its result {done['output']} is copied under this name"


def _path(value: str | None) -> Path | None:
    return None if value is None else Path(value)


def job_from_row(row: sqlite3.Row) -> Job:
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
        hidden=None if row["hidden"] is None else Hidden(row["hidden"]),
        redo_of=row["redo_of"],
        settings=json.loads(row["settings"]) if row["settings"] else {},
        photo=row["photo"],
        mark=None if row["mark"] is None else Mark(row["mark"]),
        mark_note=row["mark_note"],
        reviewed=row["reviewed"],
        stars=row["stars"],
        used=json.loads(row["used"]) if row["used"] else {},
        flagged=row["flagged"],
        identity=row["identity"],
    )
