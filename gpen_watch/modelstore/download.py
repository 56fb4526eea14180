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
from gpen_watch.base.network_errors import Failure, in_words
from gpen_watch.modelstore import unpack
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

    ``failure`` says why in words (``reason``: its one-line form). ``network`` is True when the
    file could not be fetched at all (as opposed to fetched but wrong), the case where putting the
    file in place by hand is the way out.
    """

    def __init__(self, url: str, dest: Path, failure: Failure, *, network: bool) -> None:
        message = f"cannot download {dest.name} from {url}: {failure.reason}"
        if network:
            message += f". Without internet access, download {url} on another machine and put it at {dest}"
        super().__init__(message)
        self.url = url
        self.dest = dest
        self.failure = failure
        self.reason = failure.reason
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
        raise DownloadError(url, dest, Failure("not a web address", f"scheme {scheme!r}"), network=False)
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        failure = Failure("cannot create the folder", f"{dest.parent}: {exc.strerror or exc}")
        raise DownloadError(url, dest, failure, network=False) from exc
    _remove_stale_parts(dest)

    tmp = dest.with_name(f"{dest.name}.part-{secrets.token_hex(4)}")
    packed = unpack.packing(url)
    try:
        with _open_url(packed.url, dest, timeout) as response:
            # A packed file's size is known once unpacked: the server's length is the package's.
            total = _content_length(response) if not packed.packing else None
            if expected_size is not None and total is not None and total != expected_size:
                failure = Failure(
                    "not the expected file",
                    f"{total:,} bytes, expected {expected_size:,}",
                )
                raise DownloadError(url, dest, failure, network=False)
            with open(tmp, "xb") as out:
                received, digest = _copy(
                    unpack.unpacked(response, packed),
                    out,
                    url,
                    dest,
                    total or expected_size,
                    progress,
                    on_progress,
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
        raise DownloadError(url, dest, in_words(exc, _host(url)), network=True) from exc
    except (OSError, http.client.HTTPException, ValueError) as exc:
        # URLError is an OSError: the resolver's and the socket's words, said as a person would.
        raise DownloadError(url, dest, in_words(exc, _host(url), timeout), network=True) from exc


def _host(url: str) -> str:
    """Where ``url`` points: "github.com", "127.0.0.1:8000"."""
    return urllib.parse.urlsplit(url).netloc or url


def _content_length(response: http.client.HTTPResponse) -> int | None:
    value = response.headers.get("Content-Length")
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _copy(
    response: unpack.Readable,
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
            except unpack.Lost as exc:
                if not isinstance(exc.cause, (OSError, http.client.HTTPException)):
                    raise exc.cause from None
                lost = in_words(exc.cause, _host(url))
                failure = Failure(lost.headline, f"{received:,} bytes in; {lost.detail}")
                raise DownloadError(url, dest, failure, network=True) from exc.cause
            except unpack.EndsEarly as exc:
                failure = Failure("download cut short", f"{received:,} bytes unpacked; {exc}")
                raise DownloadError(url, dest, failure, network=True) from exc
            except unpack.Malformed as exc:
                raise DownloadError(
                    url, dest, Failure("not the expected file", str(exc)), network=False
                ) from exc
            if not chunk:
                break
            try:
                out.write(chunk)
            except OSError as exc:
                # Disk full or similar: not a network problem, putting the file by hand won't help.
                failure = Failure("cannot write the file", f"{out.name}: {exc.strerror or exc}")
                raise DownloadError(url, dest, failure, network=False) from exc
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
        failure = Failure("download cut short", f"{received:,} of {total:,} bytes from {_host(url)}")
        raise DownloadError(url, dest, failure, network=True)
    if expected_size is not None and received != expected_size:
        failure = Failure(
            "not the expected file",
            f"{received:,} bytes, expected {expected_size:,}; discarded",
        )
        raise DownloadError(url, dest, failure, network=False)
    if sha256 is not None and digest != sha256.lower():
        failure = Failure(
            "not the expected file",
            f"sha256 {digest}, expected {sha256.lower()}; discarded",
        )
        raise DownloadError(url, dest, failure, network=False)


def _remove_stale_parts(dest: Path) -> None:
    """Delete leftovers of downloads that were killed; fresh ones may belong to a running download."""
    now = time.time()
    for part in dest.parent.glob(f"{dest.name}.part-*"):
        try:
            if now - part.stat().st_mtime > STALE_PART_SECONDS:
                part.unlink()
        except OSError:
            pass
