"""What a file is, from its first bytes and its header, before any pixel is decoded: the checks on
the path (regular file, not a camera RAW), the size limit, the format Pillow (with pillow-heif)
finds, and the true reason when it finds none."""

from __future__ import annotations

import errno
import io
import os
import stat
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING

from PIL import Image

from gpen_watch.base.fsutil import O_NOFOLLOW, READ_NOFOLLOW_FLAGS
from gpen_watch.imaging.claims import check_inner_picture, part_refusal
from gpen_watch.imaging.errors import (
    EmptyFileError,
    ImageInputError,
    NotAnImageError,
    UnsupportedFormatError,
)
from gpen_watch.imaging.formats import RAW_EXTENSIONS
from gpen_watch.imaging.known import known_type_failure
from gpen_watch.imaging.reasons import (
    DATA_ERRORS,
    damaged,
    decoder_bug,
    explain,
    missing_feature,
    truncated,
    unreadable_here,
)
from gpen_watch.imaging.structure import a_later_frame_decodes, well_formed
from gpen_watch.imaging.unregistered import open_as, unregistered_format

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer


def check_path(path: Path) -> None:
    try:
        # lstat: a link is refused, not followed (a hot folder is not allowed to point elsewhere;
        # `gpen-watch restore` resolves the links a user names on the command line).
        st = path.lstat() if O_NOFOLLOW else path.stat()
    except FileNotFoundError as exc:
        raise ImageInputError(path, "file not found (moved or deleted?)") from exc
    except OSError as exc:
        raise ImageInputError(path, f"cannot access file: {exc.strerror or exc}") from exc
    if stat.S_ISLNK(st.st_mode):
        raise NotAnImageError(path, "is a symbolic link (not followed)")
    if stat.S_ISDIR(st.st_mode):
        raise NotAnImageError(path, "is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise NotAnImageError(path, "not a regular file")
    if st.st_size == 0:
        raise EmptyFileError(path, "file is empty (0 bytes)")
    if path.suffix.lower() in RAW_EXTENSIONS:
        raise UnsupportedFormatError(
            path, f"camera RAW files ({path.suffix}) are not supported; convert to TIFF or JPEG first"
        )


class SourceFile(io.BufferedReader):
    """The user's file, opened by descriptor, as the decoders read it.

    It has no name: Python would name it by its descriptor number, and a Pillow plugin that hands
    the file to a program by name (EPS to Ghostscript) takes that for a path and fails with a
    TypeError. Having none, the file makes such a plugin copy its bytes to a private temporary file
    instead (``EpsImagePlugin.Ghostscript``), so the program never opens the user's path, which
    could have been replaced by a link since it was checked here.

    ``ran_out`` says that the last read since the last seek asked for more bytes than were left:
    the evidence that a decoder met the end of the file before the end of what it was reading
    (``reasons.explain``). A seek or a full read clears it: a short read that a decoder went on
    from (the last block of a complete file, read in large blocks) is not what made it fail.
    """

    ran_out = False

    @property
    def name(self) -> str:
        raise AttributeError("a file opened by descriptor has no path to give")

    def seek(self, offset: int, whence: int = os.SEEK_SET, /) -> int:
        self.ran_out = False
        return super().seek(offset, whence)

    def read(self, size: int | None = -1, /) -> bytes:
        data = super().read(size)
        if size is not None and size > 0:
            self.ran_out = len(data) < size
        return data

    def read1(self, size: int = -1, /) -> bytes:
        data = super().read1(size)
        if size > 0:
            self.ran_out = not data
        return data

    def readinto(self, buffer: WriteableBuffer, /) -> int:
        n = super().readinto(buffer)
        self.ran_out = n < memoryview(buffer).nbytes
        return n


def ran_out(fh: IO[bytes]) -> bool:
    """Whether the last read of ``fh`` since its last seek came up short (``SourceFile``)."""
    return isinstance(fh, SourceFile) and fh.ran_out


def open_file(path: Path) -> IO[bytes]:
    """``path`` opened for reading without following a link (a ``SourceFile``)."""
    try:
        fd = os.open(path, READ_NOFOLLOW_FLAGS)
    except PermissionError as exc:
        raise ImageInputError(path, "cannot read file: permission denied") from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP and O_NOFOLLOW:
            raise NotAnImageError(path, "is a symbolic link (not followed)") from exc
        raise ImageInputError(path, f"cannot read file: {exc.strerror or exc}") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotAnImageError(path, "not a regular file")
        return SourceFile(io.FileIO(fd, "rb"))
    except BaseException:
        os.close(fd)
        raise


def identify(fh: IO[bytes], path: Path, max_megapixels: float) -> Image.Image:
    """Open the header lazily, content first (the extension is ignored), or raise why not.

    ``max_megapixels``: restore.max_megapixels (0: none), which the picture inside an icon file is
    held to here (Pillow's own guard: ``our_pixel_limit`` around the whole read) (the image's own size: ``claims.check_size``).
    """
    head = fh.read(64)
    kind = sniff(head)
    check_inner_picture(path, head, fh, max_megapixels)
    try:
        im = _open_header(fh)
        if im is None and kind in HEIF_KINDS and register_heif():
            im = _open_header(fh)
        if im is None and (extra := unregistered_format(fh)) is not None:
            im = _open_unregistered(extra, fh)
    except _PluginError as err:
        # A plugin recognised its format but the header is cut short, corrupt, or of a variant it
        # lacks (DDS and BLP say so with NotImplementedError).
        exc, name = err.cause, kind or err.fmt
        short = ran_out(fh)  # before _riff_truncated's seek clears it
        if isinstance(exc, Image.DecompressionBombError):
            raise part_refusal(path, err.fmt, exc, fh, max_megapixels) from exc
        if not isinstance(exc, (*DATA_ERRORS, MemoryError)):
            raise decoder_bug(path, exc) from exc  # (load_image logs it)
        if _riff_truncated(head, fh):
            raise truncated(path, name) from exc
        raise explain(path, name, exc, header=True, ran_out=short) from exc
    if im is None:
        if kind in ("HEIC", "HEIF") and "HEIF" in Image.OPEN:
            raise _heif_failure(fh, path, kind)
        raise _identify_failure(path, head, fh)
    return im


def _open_unregistered(fmt: str, fh: IO[bytes]) -> Image.Image:
    try:
        return open_as(fmt, fh)
    except Exception as exc:
        raise _PluginError(fmt, exc) from exc


@contextmanager
def our_pixel_limit(max_megapixels: float) -> Iterator[None]:
    """Hold Pillow's own decompression-bomb guard to ``restore.max_megapixels`` while a file is read.

    Pillow checks some frame and tile sizes while decoding against its process-wide
    ``MAX_IMAGE_PIXELS`` (an error above 179 MP by default), which would refuse images within our
    documented limit with a number the user never set. Its error threshold is twice that value, so
    it is set to our limit for the one read: Pillow refuses only what is past twice ours, and it is
    gpen-watch's own check of the declared size (``check_megapixels``) that the user meets. Put
    back afterwards, because the same process opens other images (previews, thumbnails of results
    that upscaling made larger than any source) that our source limit does not govern.
    """
    before = Image.MAX_IMAGE_PIXELS
    Image.MAX_IMAGE_PIXELS = int(max_megapixels * 1e6) if max_megapixels > 0 else None
    try:
        yield
    finally:
        Image.MAX_IMAGE_PIXELS = before


def _riff_truncated(head: bytes, fh: IO[bytes]) -> bool:
    """WebP (RIFF) declares its length up front, so a cut file can be named as such."""
    if head[:4] != b"RIFF" or len(head) < 8:
        return False
    declared = struct.unpack("<I", head[4:8])[0] + 8
    result: bool = fh.seek(0, os.SEEK_END) < declared
    return result


class _PluginError(Exception):
    """A Pillow plugin that accepted the file's signature failed on its header."""

    def __init__(self, fmt: str, cause: BaseException) -> None:
        super().__init__(fmt, cause)
        self.fmt, self.cause = fmt, cause


def _open_header(fh: IO[bytes]) -> Image.Image | None:
    """``Image.open`` without its decompression-bomb check, naming the plugin that fails.

    Image.open compares the declared size with Pillow's guard and its own numbers; gpen-watch
    checks the declared size against ``max_megapixels`` itself (``check_megapixels``), so this
    walks the registered openers the way Image.open does. Raises _PluginError when the plugin
    that accepted the signature fails.
    """
    fh.seek(0)
    prefix = fh.read(16)
    for loader in (Image.preinit, Image.init):
        loader()
        for fmt in list(Image.ID):
            factory, accept = Image.OPEN[fmt]
            try:
                verdict = accept(prefix) if accept is not None else True
                if not verdict or isinstance(verdict, str):
                    continue
                fh.seek(0)  # (also forgets a short read of gpen-watch's own look at the head)
                return factory(fh, "")
            except SyntaxError as exc:
                if fmt == "TIFF" and "unknown pixel mode" in str(exc):
                    # The TIFF plugin read the whole header and lacks this sample layout: a
                    # feature to name, not "not a TIFF" (which would read as a damaged file).
                    raise _PluginError(fmt, exc) from exc
                continue  # not this format (Image.open swallows the same errors)
            except (IndexError, TypeError, struct.error):
                continue
            except Exception as exc:
                raise _PluginError(fmt, exc) from exc
    return None


def register_heif() -> bool:
    """Register pillow-heif's HEIC/HEIF opener with Pillow (once per process: Pillow's own registry
    says whether it is there), when a HEIF file is first seen rather than at import. False when
    pillow-heif is not installed."""
    if "HEIF" in Image.OPEN:
        return True
    try:
        import pillow_heif
    except ImportError:
        return False
    pillow_heif.register_heif_opener()
    return "HEIF" in Image.OPEN


_MAGIC: list[tuple[bytes, int, str]] = [
    (b"\xff\xd8\xff", 0, "JPEG"),
    (b"\x89PNG\r\n\x1a\n", 0, "PNG"),
    # A PNG whose first byte is gone: no reader opens it, but its other seven signature bytes
    # (made to show transfer damage: a CR-LF, a Ctrl-Z and a lone LF) leave no doubt that it is one,
    # so it is a damaged PNG, not "not an image file", and a new copy is what the user needs.
    (b"PNG\r\n\x1a\n", 0, "PNG"),
    (b"GIF8", 0, "GIF"),
    (b"WEBP", 8, "WEBP"),
    (b"II*\x00", 0, "TIFF"),
    (b"MM\x00*", 0, "TIFF"),
    (b"BM", 0, "BMP"),
    (b"%PDF", 0, "PDF"),
    (b"PK\x03\x04", 0, "ZIP"),
    (b"8BPS", 0, "PSD"),
    (b"\x00\x00\x00\x0cjP  ", 0, "JPEG2000"),
    (b"\xff\x4f\xff\x51", 0, "JPEG2000"),
    (b"qoif", 0, "QOI"),
    (b"DDS ", 0, "DDS"),
    (b"\xff\x0a", 0, "JPEG XL"),
    (b"\x00\x00\x00\x0cJXL ", 0, "JPEG XL"),
]


HEIF_KINDS = ("HEIC", "HEIF", "AVIF")


_FTYP_BRANDS = {b"heic": "HEIC", b"heix": "HEIC", b"hevc": "HEIC", b"heim": "HEIC", b"heis": "HEIC",
                b"mif1": "HEIF", b"msf1": "HEIF", b"avif": "AVIF", b"avis": "AVIF"}  # fmt: skip


def sniff(head: bytes) -> str | None:
    """Name the format from magic bytes, for error messages only."""
    if head[4:8] == b"ftyp":
        return _FTYP_BRANDS.get(head[8:12], "ISO media (MP4/MOV/HEIF)")
    for magic, offset, name in _MAGIC:
        if head[offset : offset + len(magic)] == magic:
            return name
    return None


def _looks_like_text(head: bytes) -> bool:
    if not head or b"\x00" in head:
        return False
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        # A multi-byte character may be cut at the end of the sample.
        try:
            text = head[:-3].decode("utf-8")
        except UnicodeDecodeError:
            return False
    printable = sum(ch.isprintable() or ch in "\r\n\t" for ch in text)
    return printable >= 0.95 * len(text)


def _heif_failure(fh: IO[bytes], path: Path, kind: str) -> ImageInputError:
    """Why libheif (through pillow-heif) cannot open a file with a HEIF signature."""
    import pillow_heif

    fh.seek(0)
    try:
        pillow_heif.open_heif(fh, convert_hdr_to_8bit=False)
    except Exception as exc:  # noqa: BLE001 - libheif's errors are plain exceptions with a message
        text = str(exc).lower()
        if "end of file" in text or "truncated" in text:
            return truncated(path, kind)
        if "unsupported" in text or "no decoder" in text or "not supported" in text:
            return missing_feature(path, kind, "a codec or feature that libheif here cannot decode")
        return damaged(path, kind, "header")
    # libheif opens it but Pillow's plugin would not (an image-less HEIF, a sequence only...).
    return missing_feature(path, kind, "a layout (no still image) that gpen-watch cannot read")


def _identify_failure(path: Path, head: bytes, fh: IO[bytes]) -> ImageInputError:
    kind = sniff(head)
    if kind in ("HEIC", "HEIF"):  # (AVIF is Pillow's own: one it cannot open is damaged)
        if not register_heif():
            return UnsupportedFormatError(
                path,
                f"{kind} images need the pillow-heif package, which is not installed here; "
                "install it (pip install pillow-heif), or export the photo as JPEG",
            )
        return damaged(path, kind, "header")
    if kind == "ISO media (MP4/MOV/HEIF)":
        return NotAnImageError(path, "not an image file (a video or other ISO media file)")
    if kind in ("JPEG", "PNG", "GIF", "WEBP", "TIFF", "BMP", "PSD", "JPEG2000", "AVIF"):
        return damaged(path, kind, "header")
    if kind in ("PDF", "ZIP"):
        return NotAnImageError(path, f"not an image file (it is a {kind} document)")
    if kind is not None:
        return UnsupportedFormatError(
            path, f"{kind} images cannot be decoded on this machine; export it as JPEG, PNG or TIFF"
        )
    if (known := known_type_failure(path, head, fh)) is not None:
        return known
    if len(head) < 12:
        n = len(head)
        return NotAnImageError(path, f"not an image file (only {n} byte{'' if n == 1 else 's'})")
    if _looks_like_text(head):
        if b"<svg" in head.lower():
            return UnsupportedFormatError(
                path, "SVG is a vector drawing, not a photo; export it as PNG to have it restored"
            )
        return NotAnImageError(path, "not an image file (looks like text)")
    return NotAnImageError(path, "not an image file (unrecognised content)")


def format_name(im: Image.Image) -> str:
    fmt = im.format or "UNKNOWN"
    # Camera JPEGs with extra preview images open as MPO; to the user they are plain JPEGs.
    return "JPEG" if fmt == "MPO" else fmt


def decode_failure(
    path: Path, im: Image.Image, fmt: str, exc: BaseException, fh: IO[bytes]
) -> ImageInputError:
    """Why the pixels of an identified image (read from ``fh``) could not be decoded, in the
    user's words."""
    short = ran_out(fh)
    if not short and well_formed(fmt, fh) and a_later_frame_decodes(im):
        return unreadable_here(path, fmt)
    compression = None
    if fmt == "TIFF":
        tags = getattr(im, "tag_v2", None)
        compression = tags.get(259) if tags is not None else None
    return explain(path, fmt, exc, header=False, tiff_compression=compression, ran_out=short)
