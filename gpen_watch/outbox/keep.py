"""Keeping one of a photo's two results: a redo beside the photo's result (``redo.BESIDE``) leaves
two files to compare; the one kept becomes the photo's result at the photo's name, and the other
is removed, or stays in the outbox under a name of its own as a file of the user's
(output.unkept_result). No file is ever written over but the one the user chose to replace.

A keep is written down before its first step (``keep-pending.json`` beside the journal, flushed to
disk), each file step checks by inode whether it is done already, and the journal is told last; so
``finish_pending``, at start-up, finishes a keep a crash cut short, whichever step it stopped at.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from gpen_watch.base.errors import GpenWatchError
from gpen_watch.base.fsutil import write_text_atomic
from gpen_watch.catalog.registry import model_label
from gpen_watch.config import Config, SettingsUsed, inbox_config
from gpen_watch.journal.journal import Job, Journal
from gpen_watch.outbox import durable, naming

log = logging.getLogger(__name__)

PENDING = "keep-pending.json"


class KeepRefused(GpenWatchError):
    """These two runs cannot be decided between now; the message says why."""


@dataclass(frozen=True)
class Keep:
    """One decision, as written down before its first step."""

    kept: int
    other: int
    kept_from: str  # where the kept result is now
    to: str  # where it is at the end: the photo's name
    other_from: str  # where the other result is now
    other_to: str  # where the other's file stays ("": removed)
    kept_ino: int
    other_ino: int


def plan(journal: Journal, cfg: Config, kept_id: int, other_id: int) -> Keep:
    """The keep of run ``kept_id`` over run ``other_id``, or KeepRefused with the reason."""
    kept, other = journal.get(kept_id), journal.get(other_id)
    if kept is None or other is None or kept.id == other.id:
        raise KeepRefused("name two runs of one photo, the one to keep and the other")
    live = {r.id: r for r in journal.results_of(kept)}
    if kept.id not in live or other.id not in live:
        raise KeepRefused(
            f"{kept.rel.name}: runs {kept.id} and {other.id} are not two results of this photo in the "
            "outbox now (one was kept already, or replaced by a newer run)"
        )
    first, second = sorted((kept, other), key=lambda j: j.id)  # the photo's result, the one beside
    assert first.output is not None and second.output is not None
    own = inbox_config(cfg, naming.find_inbox(cfg, kept.inbox)).output.unkept_result
    kept_ino, other_ino = _inode(kept), _inode(other)
    if kept is first:
        other_to = str(other.output) if own == "keep" else ""
    else:
        other_to = (
            str(naming.free_name(first.output.parent, _beside_name(first), journal.output_reserved))
            if own == "keep"
            else ""
        )
    return Keep(
        kept.id,
        other.id,
        str(kept.output),
        str(first.output),
        str(other.output),
        other_to,
        kept_ino,
        other_ino,
    )


def keep(journal: Journal, cfg: Config, kept_id: int, other_id: int) -> Keep:
    """Keep run ``kept_id``'s result over run ``other_id``'s (``plan``), then do it."""
    finish_pending(journal)  # one an error cut short first: its record would be written over
    decided = plan(journal, cfg, kept_id, other_id)
    pending = pending_path(journal)
    write_text_atomic(pending, json.dumps(asdict(decided)), fsync=True)
    _apply(journal, decided)
    pending.unlink(missing_ok=True)
    return decided


def finish_pending(journal: Journal) -> Keep | None:
    """Finish the keep a crash cut short, if one was (start-up recovery)."""
    pending = pending_path(journal)
    try:
        decided = Keep(**json.loads(pending.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError) as exc:
        log.error("%s: cannot read the keep a crash cut short (%s); left as it is", pending, exc)
        return None
    _apply(journal, decided)
    pending.unlink(missing_ok=True)
    log.info("finished keeping run %d over run %d after a restart", decided.kept, decided.other)
    return decided


def pending_path(journal: Journal) -> Path:
    return Path(journal.path).parent / PENDING


def _apply(journal: Journal, k: Keep) -> None:
    kept_from, to, other_from = Path(k.kept_from), Path(k.to), Path(k.other_from)
    if kept_from != to:
        # The result beside is kept: it takes the photo's name; the other's file first takes a
        # name of its own where it is to stay (a second link: nothing is lost if a step fails).
        if k.other_to and _holds(to, k.other_ino) and not _holds(Path(k.other_to), k.other_ino):
            os.link(to, k.other_to)  # never over a file: FileExistsError if one came meanwhile
            durable.fsync_dir(to.parent)
        if _holds(kept_from, k.kept_ino):
            os.replace(kept_from, to)
            durable.fsync_dir(to.parent)
    elif not k.other_to and _holds(other_from, k.other_ino):
        os.unlink(other_from)  # the photo's own result is kept: the one beside goes
        durable.fsync_dir(other_from.parent)
    kept, other = journal.require(k.kept), journal.require(k.other)
    if kept.output != to or other.output is not None:
        journal.record_kept(kept, other, to, k.other_to)


def _holds(path: Path, ino: int) -> bool:
    try:
        return os.lstat(path).st_ino == ino
    except OSError:
        return False


def _inode(job: Job) -> int:
    assert job.output is not None
    try:
        st = os.lstat(job.output)
    except OSError:
        raise KeepRefused(
            f"{job.rel.name}: the result of run {job.id} is not where gpen-watch left it ({job.output}); "
            "nothing was changed"
        ) from None
    return st.st_ino


def _beside_name(job: Job) -> str:
    """The name the photo's result stays under when the other is kept: "portrait (GPEN-BFR-512).jpg"."""
    assert job.output is not None
    used = SettingsUsed.from_json(job.used)
    label = model_label(used.model) if used is not None else f"run {job.id}"
    return naming.truncate_name(f"{job.output.stem} ({label}){job.output.suffix}")
