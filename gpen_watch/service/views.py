"""Where each photo's views live (the previews and face crops the dashboard shows), and keeping
them within dashboard.views_mb, sized to the batch.

The workers write a job's views (restore/stages/views.py, or a remote worker's through
dispatch.payload.unpack) into ``views_dir(root, job_id)`` while they hold the pixels; the service
only names the folder, and after each commit drops the oldest jobs' views beyond the limit. Sizes
are counted once at start and then per committed job, never by walking the whole tree per photo.

The limit gives way to the batch: a batch is reviewed once it is through, so the views of the
batch under way and of the one before it (every photo committed since the queue was last empty
before it) are all kept, however far past dashboard.views_mb, while the disk keeps ``FREE_FLOOR``
free; only when it would not do they go, the oldest first. A batch begins with the first photo
committed after the queue was empty. Where the protected batches begin is kept in ``KEEP_FILE``,
so that a restart does not drop them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from gpen_watch.base.fsutil import replace_folder, write_text_atomic
from gpen_watch.config import Config
from gpen_watch.journal import Journal
from gpen_watch.journal.states import ACTIVE, JobState

log = logging.getLogger(__name__)

# The folder beside the journal's SQLite file that holds one folder of views per job.
VIEWS_FOLDER = "views"
# The views' list of the faces found (restore/stages/views.py; its keys in docs/architecture.md).
FACES_FILE = "faces.json"
# Where the batches whose views are kept whole begin (job ids), beside the jobs' folders.
KEEP_FILE = "batches.json"
# What the disk keeps free before the views of the newest batches give way to views_mb.
FREE_FLOOR = 2 << 30


def views_root(journal_path: Path) -> Path:
    """The views folder of the journal at ``journal_path``: beside its SQLite file."""
    return Path(journal_path).parent / VIEWS_FOLDER


def views_dir(root: Path, job_id: int) -> Path:
    """The folder of job ``job_id``'s views under ``root``: named by the job id alone, so that a
    request naming a job can never reach another path (a number that is no job's names a folder
    that does not exist). ValueError for anything but an int."""
    if isinstance(job_id, bool) or not isinstance(job_id, int):
        raise ValueError(f"not a job id: {job_id!r}")
    return root / str(job_id)


class ViewsKeeper:
    """The views of the newest jobs, kept within ``limit_bytes`` (dashboard.views_mb)."""

    def __init__(
        self,
        root: Path,
        limit_bytes: int,
        ended_well: Callable[[int], bool] | None = None,
        batches: Batches | None = None,
    ) -> None:
        """``ended_well``: whether the journal has job N as done; what earlier runs left for any
        other job goes (a journal started afresh numbers its jobs from 1 again). ``batches``: what
        the journal says of the queue and of a job (None: no batch is kept beyond the limit)."""
        self.root = root
        self.limit_bytes = limit_bytes
        # Job id -> bytes of its views, oldest first.
        self._sizes: OrderedDict[int, int] = OrderedDict()
        self.total = 0
        self._reads = batches
        # The first job of the batch under way (or the last one) and of the batch before it, and
        # whether the queue was busy after the last commit (the next one is then the same batch).
        self.batches: tuple[int | None, int | None] = (None, None)
        self._in_batch = False
        root.mkdir(parents=True, exist_ok=True)
        self._scan(ended_well or (lambda _job_id: True))
        self._load_batches()
        self._prune()

    @classmethod
    def for_config(cls, cfg: Config, journal_path: Path, journal: Journal) -> ViewsKeeper | None:
        """The keeper the settings ask for, for the journal at ``journal_path``; None when no
        views are written (dashboard.enabled false, or dashboard.views_mb 0)."""
        if not cfg.dashboard.enabled or cfg.dashboard.views_mb <= 0:
            return None
        root = views_root(journal_path)
        try:
            return cls(root, cfg.dashboard.views_mb << 20, ended_well_in(journal), BatchReads(journal))
        except OSError as exc:  # the views are extras: the photos are restored without them
            log.warning("no photo views this run: cannot use %s (%s)", root, exc.strerror or exc)
            return None

    def folder(self, job_id: int) -> Path:
        """Where the worker writes job ``job_id``'s views (FileJob.views)."""
        return views_dir(self.root, job_id)

    def faces_found(self, job_id: int) -> int | None:
        """How many faces the detector found in job ``job_id``'s photo, as its views list them (the
        numbers a redo picks faces by); None when its views are not kept (dropped beyond the
        limit, never written) or cannot be read."""
        try:
            meta = json.loads((self.folder(job_id) / FACES_FILE).read_text(encoding="utf-8"))
            return len(meta["faces"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def kept(self, job_id: int) -> None:
        """Job ``job_id`` is committed: count its views (if the worker wrote any) and drop the
        oldest jobs' views beyond the limit (those of the newest two batches only for the disk)."""
        size = _tree_size(self.folder(job_id))
        self.total -= self._sizes.pop(job_id, 0)
        if size:
            self._sizes[job_id] = size
            self.total += size
        self._follow_batch(job_id)
        self._prune()

    def _follow_batch(self, job_id: int) -> None:
        if self._reads is None:
            return
        was = (self.batches, self._in_batch)
        if not self._in_batch and not self._reads.is_redo(job_id):
            # The first photo committed since the queue was empty: a new batch. A redo is not one:
            # it is the review of a batch, whose views it must not push out.
            self.batches = (job_id, self.batches[0])
        self._in_batch = self._reads.busy()
        if (self.batches, self._in_batch) != was:
            self._save_batches()

    def protected(self, job_id: int) -> bool:
        """Whether job ``job_id``'s views are of the batch under way or the one before it."""
        first = self.batches[1] if self.batches[1] is not None else self.batches[0]
        return first is not None and job_id >= first

    def copied(self, job_id: int, first_id: int) -> None:
        """Job ``job_id`` got a copy of job ``first_id``'s result (the same photo dropped again):
        it gets a copy of that job's views too, if they are still kept."""
        source = self.folder(first_id)
        if first_id not in self._sizes or not source.is_dir():
            return
        try:
            files = {
                p.relative_to(source).as_posix(): p.read_bytes() for p in source.rglob("*") if p.is_file()
            }
            replace_folder(self.folder(job_id), files)
        except OSError as exc:  # pruned meanwhile, or the disk refused: the copy has no views
            log.debug("views of run %d not copied to run %d: %s", first_id, job_id, exc)
            return
        self.kept(job_id)

    def _scan(self, ended_well: Callable[[int], bool]) -> None:
        """Count what earlier runs left, oldest first; remove the temp folders of a worker killed
        while writing (a dot name: no service reads them) and the views of jobs not done."""
        found: list[tuple[float, int, int]] = []
        for entry in os.scandir(self.root):
            if entry.name.startswith(".") or (entry.name.isdigit() and not ended_well(int(entry.name))):
                shutil.rmtree(entry.path, ignore_errors=True)
            elif entry.name.isdigit() and entry.is_dir(follow_symlinks=False):
                found.append((entry.stat().st_mtime, int(entry.name), _tree_size(Path(entry.path))))
        for _mtime, job_id, size in sorted(found):
            self._sizes[job_id] = size
            self.total += size

    def _prune(self) -> None:
        if self.total <= self.limit_bytes:
            return
        for job_id in [j for j in self._sizes if not self.protected(j)]:
            if self.total <= self.limit_bytes:
                return
            self._drop(job_id)
        # Only the newest batches' are left, past the limit: they give way to the disk alone.
        while self.total > self.limit_bytes and self._sizes and _disk_free(self.root) < FREE_FLOOR:
            self._drop(next(iter(self._sizes)))

    def _drop(self, job_id: int) -> None:
        self.total -= self._sizes.pop(job_id)
        shutil.rmtree(self.folder(job_id), ignore_errors=True)
        log.debug("views of run %d dropped to stay within %d MB", job_id, self.limit_bytes >> 20)

    def _load_batches(self) -> None:
        try:
            data = json.loads((self.root / KEEP_FILE).read_text(encoding="utf-8"))
            current, before = data["batches"]
            self.batches = (_job_id(current), _job_id(before))
            self._in_batch = bool(data.get("in_batch"))
        except (OSError, ValueError, KeyError, TypeError):
            self.batches, self._in_batch = (None, None), False

    def _save_batches(self) -> None:
        data = {"batches": list(self.batches), "in_batch": self._in_batch}
        try:
            write_text_atomic(self.root / KEEP_FILE, json.dumps(data))
        except OSError as exc:  # the views are extras: kept within the limit after a restart
            log.debug("cannot write %s: %s", self.root / KEEP_FILE, exc)


def ended_well_in(journal: Journal) -> Callable[[int], bool]:
    """Whether ``journal`` has a job as done (restored, or a copy of a done one's result)."""

    def ended_well(job_id: int) -> bool:
        job = journal.get(job_id)
        return job is not None and job.state in (JobState.DONE, JobState.DUPLICATE)

    return ended_well


class Batches(Protocol):
    """What the keeper asks to tell one batch from the next."""

    def busy(self) -> bool: ...

    def is_redo(self, job_id: int) -> bool: ...


@dataclass(frozen=True)
class BatchReads:
    """``Batches`` as the service's journal answers them."""

    journal: Journal

    def busy(self) -> bool:
        """Whether a photo is waiting or being restored (two reads off the state index)."""
        return any(self.journal.jobs(str(state), limit=1) for state in ACTIVE)

    def is_redo(self, job_id: int) -> bool:
        job = self.journal.get(job_id)
        return job is not None and job.is_redo


def _job_id(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _disk_free(folder: Path) -> int:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return 0  # cannot tell: the limit holds


def _tree_size(folder: Path) -> int:
    """Bytes of the files under ``folder`` (0 when there is none); one photo's views are a few
    dozen files at most."""
    total = 0
    try:
        for dirpath, _dirs, files in os.walk(folder):
            for name in files:
                with contextlib.suppress(OSError):  # removed meanwhile
                    total += os.lstat(os.path.join(dirpath, name)).st_size
    except OSError:
        return 0
    return total
