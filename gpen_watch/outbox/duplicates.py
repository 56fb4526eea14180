"""Results for byte-identical copies: every name dropped in gets a result under its own name, and
the work is done once.

A copy of a done photo (``Claim.copies``) gets a copy of the first one's output, under the name its
own drop would have had (its subfolder, the name template, the extension of the format actually
written), committed exactly as a worker's output is (temp name, commit token, no overwrite), so a
crash at any point is finished or undone by ``recovery`` as for any job. The journal links it to
the first (``duplicate_of``) and it ends as ``duplicate``.

A real copy, not a hard link, even on the same file system: outputs are the user's files and get
edited in place (retouching, metadata tools), and an edit of one name must not change the other.
The first output is copied only while it is still what the service wrote (same inode and size as
its commit token); if it was removed or replaced since, the copy is restored afresh instead.

The same name dropped again (same inbox, same subfolder) gets no second file: its result is
already there under that name. The job ends as duplicate without an output of its own.

A copy that waited for a first that failed (``Claim.repeats``) fails with the same reason and
kind, its original set aside with its own error file; it is not tried again.

A redo of a photo and its copies is restored once too: the copies' redos wait for the photo's
(``Journal.add_redos`` links them) and each is given a copy of its result the same way, over the
copy's own result (one rename, as a redo replaces a result), under the copy's own name. Each copy's
redo is a job of its own with its commit token, so a stop part way leaves each copy with its old
result or the new one, and the start-up recovery and the next claim finish the rest.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from gpen_watch.base.errors import OutputError
from gpen_watch.base.fsutil import READ_NOFOLLOW_FLAGS, remove_quietly
from gpen_watch.config import Config, SettingsUsed
from gpen_watch.journal.journal import Job, Journal, Twin
from gpen_watch.journal.states import failure_state
from gpen_watch.outbox import commit, durable, failed, naming
from gpen_watch.outbox.moves import OriginalOutcome
from gpen_watch.outbox.originals import dispose_original
from gpen_watch.platform import presence

# Why a photo is restored itself though a result of its content is there: the settings in
# effect changed (a reload) since that result was made.
AGAIN = "that one was restored with settings changed since"
# ... or the photo came with settings of its own (sent through the API) that give another result.
SENT_OWN = "it was sent with settings of its own"


class FirstResultGone(Exception):
    """The first one's output is not there as the service wrote it (removed, replaced, edited)."""


def settings_differ(cfg: Config, job: Job, first: Job) -> str | None:
    """Why a photo of ``job``'s inbox would not come out as ``first``'s result did, the end of a
    sentence ("its inbox's settings differ: restored with its own"), so that it is restored
    itself rather than given a copy; None when it would (the name is each inbox's own either way).
    ``first``'s own record of its settings decides where it has one: the settings in effect may
    have changed since it was restored (a reload); else the two inboxes' settings now."""
    try:
        own = commit.own_config(cfg, job)
        other = commit.own_config(cfg, first)
    except OutputError as exc:
        return f"its own settings cannot be compared ({exc}): restored itself"
    same = own.restore == other.restore and (own.output.format, own.output.jpeg_quality) == (
        other.output.format,
        other.output.jpeg_quality,
    )
    if job.settings and not job.is_redo and not same:
        return f"{SENT_OWN}: restored with them"
    if not same:
        return "its inbox's settings differ: restored with its own"
    used = SettingsUsed.from_json(first.used)
    if used is not None and used.key:
        # The same settings on both sides now, but the first run's record may say otherwise.
        now = SettingsUsed.of(own.restore, own.output.format, own.output.jpeg_quality)
        if now.key != used.key:
            return f"{AGAIN}: restored with the settings in effect now"
    return None


def copy_result(
    journal: Journal, twin: Twin, cfg: Config, away: presence.Away = presence.present
) -> commit.CommitOutcome:
    """Give ``twin.job`` a copy of ``twin.first``'s output and finish it as a duplicate.

    Raises FirstResultGone when there is nothing trustworthy to copy (the caller restores the
    photo instead), OutputError when the outbox refuses the write (the caller requeues it).
    """
    job, first = twin.job, twin.first
    if first.output is None:
        raise FirstResultGone(f"run {first.id} has no output")
    again = None if job.is_redo else journal.photo_dropped_again(job)
    if again is not None and again.output is not None:
        # The same name dropped again (a photo's, or a copy's): its result is already there
        # under that name, as its newest run left it (a redo replaces it in place).
        _check_ours(again.output, again.commit_ino, again.commit_size)
        journal.end_as_duplicate(job.id, f"dropped again: its result is {again.output}", of=again.id)
        outcome = commit.CommitOutcome(again.output, dispose_original(journal, job.id, cfg, away))
        return _ended(journal, job, outcome)
    final, tmp = commit.prepare(journal, job.id, cfg, away=away)
    try:
        _copy_if_ours(first.output, tmp, first.commit_ino, first.commit_size)
        st = os.stat(tmp)
    except FirstResultGone:
        remove_quietly(tmp)
        raise
    except OSError as exc:
        remove_quietly(tmp)
        raise OutputError(f"{tmp}: cannot write a copy of {first.output}: {exc.strerror or exc}") from exc
    note = (
        f"redone with {first.rel} (the same photo, the same settings): a copy of its result, run {first.id}"
        if job.is_redo
        else f"same content as {first.source}: a copy of its result {first.output.name}"
    )
    notes = [note, *first.notes]
    # The extension follows what the first one's output is (the content decided its format).
    name = naming.truncate_name(os.path.splitext(final.name)[0] + first.output.suffix)
    job = journal.require(job.id)
    placed = commit.place_output(
        journal, job, tmp, st, faces=first.faces or 0, timings={}, notes=notes, name=name, used=first.used
    )
    if placed is None:
        remove_quietly(tmp)
        return commit.CommitOutcome(None)
    # A copy of the first one's result: restored with the settings that one was.
    journal.finish(job.id, placed, first.faces or 0, {}, notes, first.used)
    outcome = commit.CommitOutcome(placed, dispose_original(journal, job.id, cfg, away))
    return _ended(journal, job, outcome)


def _ended(journal: Journal, job: Job, outcome: commit.CommitOutcome) -> commit.CommitOutcome:
    """A copy ended well: a failure of its file retried (its bytes since a photo already done)
    loses its old error file in failed/, as when a retry is restored."""
    failed.clear_retried(journal, journal.require(job.id))
    return outcome


def repeat_failure(
    journal: Journal, twin: Twin, cfg: Config, away: presence.Away = presence.present
) -> OriginalOutcome | None:
    """End ``twin.job`` with ``twin.first``'s failure (same reason, same kind) and set it aside."""
    first = twin.first
    kind = failure_state(first.state)
    reason = f"{first.error or 'unknown error'} (same content as {first.source}: not tried a second time)"
    return failed.fail(journal, twin.job.id, reason, cfg, kind=kind, away=away)


def _check_ours(path: Path, ino: int | None, size: int | None) -> None:
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise FirstResultGone(f"{path}: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(st.st_mode) or (st.st_ino, st.st_size) != (ino, size):
        raise FirstResultGone(f"{path} was replaced or changed since it was written")


def _copy_if_ours(src: Path, dst: Path, ino: int | None, size: int | None) -> None:
    """Copy ``src`` to a new file ``dst`` (fsynced) if it is the regular file the commit token names."""
    try:
        fd = os.open(src, READ_NOFOLLOW_FLAGS)
    except OSError as exc:
        raise FirstResultGone(f"{src}: {exc.strerror or exc}") from exc
    with open(fd, "rb") as source:
        st = os.fstat(source.fileno())
        if not stat.S_ISREG(st.st_mode) or (st.st_ino, st.st_size) != (ino, size):
            raise FirstResultGone(f"{src} was replaced or changed since it was written")
        with open(dst, "xb") as out:
            shutil.copyfileobj(source, out, 1 << 20)
    durable.fsync_file(dst)
