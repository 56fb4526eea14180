"""A zip of results, streamed to the client as it is built: never whole in memory or on disk.

Photos are compressed already, so entries are stored, not deflated; each is read from the outbox a
megabyte at a time on the API's I/O thread and written out at once (zip64 and data descriptors,
which need no seeking back). Names inside are the results' own, made unique ("a.jpg", "a (1).jpg")
where two share one. A result that left the outbox since it was listed is skipped, and the zip's
last entry, ``MISSING.txt``, names it. The dashboard's downloads of a view or a selection call
``send_zip`` with their own list of files.
"""

from __future__ import annotations

import asyncio
import os
import time
import zipfile
from collections.abc import Iterable
from concurrent.futures import Executor
from pathlib import Path

from aiohttp import web

from gpen_watch.base.fsutil import READ_NOFOLLOW_FLAGS
from gpen_watch.outbox.naming import candidates

READ_CHUNK = 1 << 20


class _Sink:
    """What zipfile writes into: pieces kept until the response takes them (no ``tell``: zipfile
    then writes a stream that needs no seeking)."""

    def __init__(self) -> None:
        self.pieces: list[bytes] = []

    def write(self, data: bytes, /) -> int:
        self.pieces.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

    def take(self) -> bytes:
        out, self.pieces = b"".join(self.pieces), []
        return out


async def send_zip(
    request: web.Request, files: Iterable[tuple[str, Path]], zip_name: str, io: Executor
) -> web.StreamResponse:
    """Answer ``request`` with a zip of ``files`` (name inside, path), streamed."""
    response = web.StreamResponse(
        headers={
            "Content-Type": "application/zip",
            "Content-Disposition": f'attachment; filename="{zip_name}"',
            "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff",
        }
    )
    await response.prepare(request)
    loop = asyncio.get_running_loop()
    sink = _Sink()
    used: set[str] = set()
    missing: list[str] = []
    with zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, path in files:
            try:
                fd = await loop.run_in_executor(io, os.open, path, READ_NOFOLLOW_FLAGS)
            except OSError:
                missing.append(name)
                continue
            try:
                arcname = next(c for c in candidates(name) if c not in used)
                used.add(arcname)
                with zf.open(zipfile.ZipInfo(arcname, _date(fd)), "w", force_zip64=True) as entry:
                    while data := await loop.run_in_executor(io, os.read, fd, READ_CHUNK):
                        entry.write(data)
                        await response.write(sink.take())
            finally:
                os.close(fd)
            await response.write(sink.take())
        if missing:
            zf.writestr(
                "MISSING.txt",
                "Not in the outbox when this zip was made (moved or deleted since):\n"
                + "\n".join(missing)
                + "\n",
            )
    await response.write(sink.take())
    await response.write_eof()
    return response


def _date(fd: int) -> tuple[int, int, int, int, int, int]:
    t = time.localtime(max(os.fstat(fd).st_mtime, 315532800))  # zip's dates start in 1980
    return (t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec)
