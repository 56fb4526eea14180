"""Jobs a worker on another machine can run: the original's bytes instead of its path.

A ``FileJob`` names files on the service's machine, which a remote worker cannot open. ``pack``
turns it into a ``PhotoJob`` (the original's bytes, its name, the output settings); the remote side
runs it in a private ``Scratch`` folder through the same engine call as a local worker and sends
back a ``PhotoResult`` (the encoded output's bytes and the engine's metadata: faces, timings,
notes, format). ``unpack`` writes those bytes to the job's temp name on the service's machine, so
the outbox commit (fsync, rename, then archive the original) is the same for every worker.

Local workers keep paths: they read the inbox and write the outbox's temp name themselves, which
saves two copies of every photo through a pipe (docs/benchmarks.md has the figures).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path

from gpen_watch.base.errors import ErrorKind, OutboxUnavailable
from gpen_watch.base.fsutil import replace_folder, require_device
from gpen_watch.config import RestoreConfig
from gpen_watch.restore.api import FileJob, FileResult

log = logging.getLogger(__name__)

# The engine's output inside a scratch folder; the format comes from the job, not this name.
_OUT_NAME = "out.tmp"
# The engine's views folder inside a scratch folder.
_VIEWS_NAME = "views"


@dataclass(frozen=True)
class PhotoJob:
    name: str  # the original's file name (no folder): the engine and its messages see this name
    data: bytes
    format: str = "same"
    jpeg_quality: int = 95
    scale: float = 1.0
    # The photo's inbox profile (FileJob.restore): a remote worker restores it with those settings.
    restore: RestoreConfig | None = None
    # Whether the service wants the photo's views (FileJob.views): sent back in PhotoResult.views.
    views: bool = False
    # The faces picked for a redo (FileJob.face_ids).
    face_ids: tuple[int, ...] | None = None
    # Whose settings ``restore`` holds (FileJob.settings_label).
    settings_label: str = ""


@dataclass
class PhotoResult:
    result: FileResult  # src is Path(name); dst is None
    data: bytes | None = None  # the encoded output, when result.ok
    # The photo's views by their names in the views folder ("faces/0.before.jpg"), when asked for.
    views: dict[str, bytes] = field(default_factory=dict)


def pack(job: FileJob) -> PhotoJob:
    """Read the original; OSError when it cannot be read (see ``unreadable``)."""
    with open(job.src, "rb") as f:
        data = f.read()
    return PhotoJob(
        Path(job.src).name,
        data,
        job.format,
        job.jpeg_quality,
        job.scale,
        job.restore,
        views=job.views is not None,
        face_ids=job.face_ids,
        settings_label=job.settings_label,
    )


def unreadable(job: FileJob, exc: OSError) -> FileResult:
    """The result of a job whose original could not be read on the service's machine."""
    why = exc.strerror or str(exc)
    return FileResult(
        job.src, False, error=f"{job.src}: cannot read the file ({why})", error_kind=ErrorKind.FAILED
    )


def unpack(out: PhotoResult, job: FileJob) -> FileResult:
    """The remote result as a local worker would have reported it: its output at ``job.dst``.

    The write never replaces a file (the temp name is the job's own, removed before each
    attempt); a folder that refuses it makes an "outbox" failure, which the service treats as the
    outbox's trouble, not the photo's.
    """
    res = replace(out.result, src=job.src, dst=None)
    if not res.ok:
        return res
    if out.data is None:
        res.ok, res.error, res.error_kind = False, "the worker sent no output", ErrorKind.FAILED
        return res
    try:
        require_device(job.dst.parent, job.dst_device)  # never into a bare mount point
    except OutboxUnavailable as exc:
        res.ok, res.error, res.error_kind = False, str(exc), ErrorKind.OUTBOX
        return res
    try:
        fd = os.open(job.dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o644)
    except OSError as exc:
        res.ok, res.error, res.error_kind = (
            False,
            f"{job.dst}: cannot write the result: {exc}",
            ErrorKind.OUTBOX,
        )
        return res
    try:
        with open(fd, "wb", closefd=True) as f:
            f.write(out.data)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(job.dst)
        res.ok, res.error, res.error_kind = (
            False,
            f"{job.dst}: cannot write the result: {exc}",
            ErrorKind.OUTBOX,
        )
        return res
    res.dst = job.dst
    if job.views is not None and out.views:
        try:
            replace_folder(job.views, out.views)
        except (OSError, ValueError) as exc:  # the views are extras: the photo is done without them
            log.warning("%s: could not write its views to %s: %s", job.src, job.views, exc)
    return res


class Scratch:
    """The remote side's folder for the photos it holds: one subfolder per job, gone once sent."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self._names: dict[Path, str] = {}

    def job(self, key: int, photo: PhotoJob) -> FileJob:
        """Write the photo's bytes under its own name, for the engine to read like any file."""
        folder = self.root / str(key)
        shutil.rmtree(folder, ignore_errors=True)  # an earlier attempt of the same job
        folder.mkdir()
        # The name came over the network: keep only its last part, never a path.
        src = folder / (Path(photo.name).name or "photo")
        src.write_bytes(photo.data)
        self._names[src] = photo.name
        return FileJob(
            src,
            folder / _OUT_NAME,
            photo.format,
            photo.jpeg_quality,
            photo.scale,
            restore=photo.restore,
            views=folder / _VIEWS_NAME if photo.views else None,
            face_ids=photo.face_ids,
            settings_label=photo.settings_label,
        )

    def result(self, result: FileResult) -> PhotoResult:
        """Read the engine's output back and drop the job's folder."""
        src = Path(result.src)
        name = self._names.pop(src, src.name)
        try:
            data = None
            views: dict[str, bytes] = {}
            if result.ok and result.dst is not None:
                data = Path(result.dst).read_bytes()
                views = _read_views(src.parent / _VIEWS_NAME)
        finally:  # also when the output cannot be read back: the job's folder goes either way
            self.discard(src)
        return PhotoResult(replace(result, src=Path(name), dst=None), data, views)

    def discard(self, src: Path) -> None:
        """Drop the folder of the job whose original is ``src`` (nothing outside this scratch)."""
        self._names.pop(src, None)
        if src.parent.parent == self.root:
            shutil.rmtree(src.parent, ignore_errors=True)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def _read_views(folder: Path) -> dict[str, bytes]:
    """The files of a views folder by their names in it ("faces/0.before.jpg"); {} without one."""
    if not folder.is_dir():
        return {}
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }
