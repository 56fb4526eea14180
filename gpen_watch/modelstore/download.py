"""Download one file safely: a partial or unverified download never takes the final name.

The bytes go to ``<dest>.part-<random>`` beside the destination (same file system, so the final
``os.replace`` is atomic), are checked against the expected size and sha256 when those are known, are
fsynced, and only then renamed into place. Any failure deletes the temp file. Kept free of torch.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import secrets
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, Literal

from gpen_watch import __version__
from gpen_watch.base.errors import ModelError
from gpen_watch.platform.files import fsync_dir_quietly

CHUNK = 1 << 20
DEFAULT_TIMEOUT = 60.0
# A .part file untouched this long belongs to a download that died (killed process, power cut).
STALE_PART_SECONDS = 24 * 3600

Progress = bool | Literal["always"]
# Called after each chunk with (bytes received, bytes expected or None), on the downloading thread.
OnProgress = Callable[[int, int | None], None]


class DownloadError(ModelError):
    """A download failed; nothing was left at ``dest``.

    ``network`` is True when the file could not be fetched at all (as opposed to fetched but wrong),
    the case where putting the file in place by hand is the way out.
    """

    def __init__(self, url: str, dest: Path, reason: str, *, network: bool) -> None:
        message = f"cannot download {dest.name} from {url}: {reason}"
        if network:
            message += f". Without internet access, download {url} on another machine and put it at {dest}"
        super().__init__(message)
        self.url = url
        self.dest = dest
        self.reason = reason
        self.network = network


def download(
    url: str,
    dest: Path,
    expected_size: int | None = None,
    sha256: str | None = None,
    progress: Progress = True,
    timeout: float = DEFAULT_TIMEOUT,
    on_progress: OnProgress | None = None,
) -> Path:
    """Fetch ``url`` into ``dest`` and return ``dest``; raise DownloadError (a ModelError) on failure.

    ``progress``: True shows a bar when stderr is a terminal, "always" shows it anyway, False never.
    ``timeout`` bounds each connect and each read, not the whole transfer (large files on slow links).
    """
    dest = Path(dest)
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme not in ("http", "https"):
        # urllib would also open file:// and ftp:// URLs; weights only ever come over HTTP(S).
        raise DownloadError(url, dest, f"unsupported URL scheme {scheme!r}", network=False)
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DownloadError(url, dest, f"cannot create folder {dest.parent}: {exc}", network=False) from exc
    _remove_stale_parts(dest)

    tmp = dest.with_name(f"{dest.name}.part-{secrets.token_hex(4)}")
    try:
        with _open_url(url, dest, timeout) as response:
            total = _content_length(response)
            if expected_size is not None and total is not None and total != expected_size:
                raise DownloadError(
                    url, dest, f"server reports {total} bytes, expected {expected_size}", network=False
                )
            with open(tmp, "xb") as out:
                received, digest = _copy(
                    response, out, url, dest, total or expected_size, progress, on_progress
                )
                out.flush()
                os.fsync(out.fileno())
        _check(url, dest, received, total, expected_size, digest, sha256)
        os.replace(tmp, dest)
    except BaseException:
        # Also on KeyboardInterrupt: a half-written temp file must never linger or be used.
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir_quietly(dest.parent)
    return dest


def _open_url(url: str, dest: Path, timeout: float) -> http.client.HTTPResponse:
    request = urllib.request.Request(url, headers={"User-Agent": f"gpen-watch/{__version__}"})
    try:
        response: http.client.HTTPResponse = urllib.request.urlopen(
            request, timeout=timeout
        )  # scheme checked in download()
        return response
    except urllib.error.HTTPError as exc:
        # The error is also the response: left open, its connection lives as long as the
        # DownloadError that keeps it as __cause__ (and a fallback to the next mirror opens another).
        exc.close()
        raise DownloadError(url, dest, f"HTTP {exc.code} {exc.reason}", network=True) from exc
    except urllib.error.URLError as exc:
        # "Name or service not known", not "[Errno -2] Name or service not known".
        reason = (
            exc.reason.strerror if isinstance(exc.reason, OSError) and exc.reason.strerror else exc.reason
        )
        raise DownloadError(url, dest, f"{reason}", network=True) from exc
    except (OSError, http.client.HTTPException, ValueError) as exc:
        raise DownloadError(url, dest, f"{exc}", network=True) from exc


def _content_length(response: http.client.HTTPResponse) -> int | None:
    value = response.headers.get("Content-Length")
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _copy(
    response: http.client.HTTPResponse,
    out: BinaryIO,
    url: str,
    dest: Path,
    total: int | None,
    progress: Progress,
    on_progress: OnProgress | None = None,
) -> tuple[int, str]:
    """Stream the body to ``out``; return (bytes received, sha256 hex digest)."""
    from tqdm import tqdm

    show = progress == "always" or (progress is True and sys.stderr.isatty())
    digest = hashlib.sha256()
    received = 0
    with tqdm(
        total=total,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        desc=dest.name,
        file=sys.stderr,
        disable=not show,
        leave=False,
    ) as bar:
        while True:
            try:
                chunk = response.read(CHUNK)
            except (OSError, http.client.HTTPException) as exc:
                raise DownloadError(
                    url, dest, f"connection lost after {received} bytes: {exc}", network=True
                ) from exc
            if not chunk:
                break
            try:
                out.write(chunk)
            except OSError as exc:
                # Disk full or similar: not a network problem, putting the file by hand won't help.
                raise DownloadError(url, dest, f"cannot write {out.name}: {exc}", network=False) from exc
            digest.update(chunk)
            received += len(chunk)
            bar.update(len(chunk))
            if on_progress is not None:
                on_progress(received, total)
    return received, digest.hexdigest()


def _check(
    url: str,
    dest: Path,
    received: int,
    total: int | None,
    expected_size: int | None,
    digest: str,
    sha256: str | None,
) -> None:
    if total is not None and received != total:
        # http.client returns a short body silently when the server closes early.
        raise DownloadError(url, dest, f"transfer cut short: got {received} of {total} bytes", network=True)
    if expected_size is not None and received != expected_size:
        raise DownloadError(
            url,
            dest,
            f"got {received} bytes, expected {expected_size}; the file was discarded",
            network=False,
        )
    if sha256 is not None and digest != sha256.lower():
        raise DownloadError(
            url, dest, f"sha256 is {digest}, expected {sha256.lower()}; the file was discarded", network=False
        )


def _remove_stale_parts(dest: Path) -> None:
    """Delete leftovers of downloads that were killed; fresh ones may belong to a running download."""
    now = time.time()
    for part in dest.parent.glob(f"{dest.name}.part-*"):
        try:
            if now - part.stat().st_mtime > STALE_PART_SECONDS:
                part.unlink()
        except OSError:
            pass
