"""A photo's bytes from a request's body into a temp file in its inbox, streamed, never held whole.

The body is read as it comes, hashed on the way (SHA-256, which the journal identifies photos by)
and written a megabyte at a time on a thread of the API's own, then flushed to disk. A body larger
than the limit, one that stops (nothing for ``idle_s``), one slower than the floor once its first
seconds are over, and one cut off before its Content-Length are refused with a sentence, and the
temp file is removed: nothing of it is kept, and the client may send it again. The temp name is
hidden and partial (``outbox.sent``), so the watcher never takes it.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import os
import time
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from gpen_watch.base.fsutil import remove_quietly
from gpen_watch.dashboard.api.limits import MB
from gpen_watch.dashboard.api.names import Refusal

WRITE_CHUNK = 1 << 20
# An upload's first seconds are not held to the rate floor (a connection warming up).
GRACE_S = 10.0


@dataclass(frozen=True)
class Received:
    path: Path
    size: int
    sha256: str


@dataclass(frozen=True)
class Pace:
    max_bytes: int
    idle_s: float
    min_bytes_per_s: float  # 0: no floor
    grace_s: float = GRACE_S


async def receive(request: web.Request, dest: Path, pace: Pace, io: Executor) -> Received:
    """Stream the body into ``dest`` (a new file); Refusal with the temp file removed."""
    loop = asyncio.get_running_loop()
    fd = await loop.run_in_executor(io, _create, dest)
    digest = hashlib.sha256()
    size, buf = 0, bytearray()
    start = time.monotonic()
    expected = request.content_length
    try:
        while True:
            chunk = await _next_chunk(request, pace, size, start)
            if not chunk:
                break
            size += len(chunk)
            if size > pace.max_bytes:
                raise Refusal(
                    413,
                    f"the photo is larger than {pace.max_bytes / MB:g} MB, the largest taken (api.max_file_mb)",
                )
            buf += chunk
            if len(buf) >= WRITE_CHUNK:
                data, buf = bytes(buf), bytearray()
                await loop.run_in_executor(io, _write, fd, data, digest)
        if expected is not None and size != expected:
            raise Refusal(400, _cut_off(size, expected))
        open_fd, fd = fd, -1  # _finish closes it, whatever happens
        await loop.run_in_executor(io, _finish, open_fd, bytes(buf), digest)
    except BaseException as exc:
        await loop.run_in_executor(io, _discard, fd, dest)
        if isinstance(exc, Refusal):
            raise
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise Refusal(
                507, f"the inbox's disk is full ({exc.strerror}); nothing of the photo was kept"
            ) from None
        if isinstance(
            exc, (ConnectionError, asyncio.IncompleteReadError, web.HTTPException)
        ) or _payload_error(exc):
            raise Refusal(400, _cut_off(size, expected)) from None
        raise
    if size == 0:
        remove_quietly(dest)
        raise Refusal(400, "the photo is empty (0 bytes); send the file's content as the request's body")
    return Received(dest, size, digest.hexdigest())


async def _next_chunk(request: web.Request, pace: Pace, size: int, start: float) -> bytes:
    """The next piece of the body (b"" at its end); Refusal when the client is too slow."""
    elapsed = time.monotonic() - start
    wait = pace.idle_s
    if pace.min_bytes_per_s > 0:
        # The floor is broken once elapsed passes max(grace, size / rate): wait no longer than that.
        wait = min(wait, max(pace.grace_s, size / pace.min_bytes_per_s) - elapsed + 0.05)
    try:
        return await asyncio.wait_for(request.content.readany(), max(wait, 0.05))
    except asyncio.TimeoutError:
        elapsed = time.monotonic() - start
        if pace.min_bytes_per_s > 0 and elapsed > pace.grace_s and size < pace.min_bytes_per_s * elapsed:
            raise Refusal(
                408,
                f"the upload was cut off: {size} bytes in {elapsed:.0f} s, slower than "
                f"{pace.min_bytes_per_s / 1000:g} KB/s (api.min_upload_kbs); nothing of it was kept",
            ) from None
        raise Refusal(
            408,
            f"the upload was cut off: nothing arrived for {pace.idle_s:g} s (api.upload_idle_s); nothing of it was kept",
        ) from None


def _cut_off(size: int, expected: int | None) -> str:
    of = f" of {expected}" if expected is not None else ""
    return f"the upload ended after {size}{of} bytes; nothing of it was kept: send it again"


def _payload_error(exc: BaseException) -> bool:
    # aiohttp's own error for a body that ends before its length, or a broken chunked encoding.
    return type(exc).__name__ in ("ClientPayloadError", "PayloadEncodingError", "ContentLengthError")


def _create(dest: Path) -> int:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    return os.open(dest, flags, 0o666)


def _write(fd: int, data: bytes, digest: hashlib._Hash) -> None:
    digest.update(data)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _finish(fd: int, data: bytes, digest: hashlib._Hash) -> None:
    try:
        _write(fd, data, digest)
        os.fsync(fd)
    finally:
        os.close(fd)


def _discard(fd: int, dest: Path) -> None:
    if fd >= 0:
        os.close(fd)
    remove_quietly(dest)
