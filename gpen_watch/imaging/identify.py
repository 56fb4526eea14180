"""What a file is, from its first bytes and its header, before any pixel is decoded: the checks on
the path (regular file, not a camera RAW), the size limit, the format Pillow (with pillow-heif)
finds, and the true reason when it finds none."""

from __future__ import annotations

import errno
import os
import stat
import struct
from pathlib import Path
from typing import IO

from PIL import Image

from gpen_watch.fsutil import O_NOFOLLOW, READ_NOFOLLOW_FLAGS
from gpen_watch.imaging.errors import (
    BrokenImageError,
    EmptyFileError,
    ImageInputError,
    ImageTooLargeError,
    NotAnImageError,
    UnsupportedFormatError,
)
from gpen_watch.imaging.formats import RAW_EXTENSIONS


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


def open_file(path: Path) -> IO[bytes]:
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
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def check_megapixels(path: Path, size: tuple[int, int], max_megapixels: float) -> None:
    megapixels = size[0] * size[1] / 1e6
    if max_megapixels > 0 and megapixels > max_megapixels:
        raise ImageTooLargeError(
            path,
            f"image is {size_text(size)}, over the {max_megapixels:g} MP limit; "
            "raise the restore.max_megapixels setting to restore it",
        )


def size_text(size: tuple[int, int]) -> str:
    return f"{size[0]}x{size[1]} ({size[0] * size[1] / 1e6:.0f} MP)"


def identify(fh: IO[bytes], path: Path) -> Image.Image:
    """Open the header lazily, content first (the extension is ignored), or raise why not."""
    head = fh.read(64)
    try:
        im = _open_header(fh)
        if im is None and sniff(head) in HEIF_KINDS and _register_heif():
            im = _open_header(fh)
    except Image.DecompressionBombError as exc:
        raise ImageTooLargeError(path, f"rejected by Pillow's decompression-bomb guard ({exc})") from exc
    except (OSError, ValueError, EOFError, MemoryError) as exc:
        # A plugin recognised its format but the header itself is cut short or corrupt.
        kind = sniff(head) or "image"
        if _riff_truncated(head, fh) or "truncated" in str(exc).lower():
            raise BrokenImageError(path, f"truncated {kind}: the file ends early") from exc
        raise BrokenImageError(path, f"broken {kind} header ({exc or type(exc).__name__})") from exc
    if im is None:
        raise _identify_failure(path, head)
    return im


def _riff_truncated(head: bytes, fh: IO[bytes]) -> bool:
    """WebP (RIFF) declares its length up front, so a cut file can be named as such."""
    if head[:4] != b"RIFF" or len(head) < 8:
        return False
    declared = struct.unpack("<I", head[4:8])[0] + 8
    result: bool = fh.seek(0, os.SEEK_END) < declared
    return result


def _open_header(fh: IO[bytes]) -> Image.Image | None:
    """``Image.open`` without its decompression-bomb check.

    Image.open compares the size with the process-global ``Image.MAX_IMAGE_PIXELS`` (warning above
    89 MP, error above 179 MP). We apply our own ``max_megapixels`` instead and do not touch that
    global, so this walks the registered openers the way Image.open does.
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
                fh.seek(0)
                return factory(fh, "")
            except (SyntaxError, IndexError, TypeError, struct.error):
                continue  # not this format (Image.open swallows the same errors)
    return None


_heif_registered: bool | None = None


def _register_heif() -> bool:
    """Register pillow-heif's opener the first time a HEIF/AVIF file is seen (not at import)."""
    global _heif_registered
    if _heif_registered is None:
        try:
            import pillow_heif  # type: ignore[import-not-found]

            pillow_heif.register_heif_opener()
            _heif_registered = True
        except Exception:  # noqa: BLE001 - any failure means "not available"
            _heif_registered = False
    return _heif_registered


_MAGIC: list[tuple[bytes, int, str]] = [
    (b"\xff\xd8\xff", 0, "JPEG"),
    (b"\x89PNG\r\n\x1a\n", 0, "PNG"),
    (b"GIF8", 0, "GIF"),
    (b"WEBP", 8, "WEBP"),
    (b"II*\x00", 0, "TIFF"),
    (b"MM\x00*", 0, "TIFF"),
    (b"BM", 0, "BMP"),
    (b"%PDF", 0, "PDF"),
    (b"PK\x03\x04", 0, "ZIP"),
    (b"8BPS", 0, "PSD"),
    (b"\x00\x00\x00\x0cjP  ", 0, "JPEG2000"),
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


def _identify_failure(path: Path, head: bytes) -> ImageInputError:
    kind = sniff(head)
    if kind in HEIF_KINDS:
        return UnsupportedFormatError(path, f"unsupported format {kind} (install pillow-heif to read it)")
    if kind in ("JPEG", "PNG", "GIF", "WEBP", "TIFF", "BMP"):
        return BrokenImageError(path, f"broken {kind}: the header is truncated or corrupt")
    if kind in ("PDF", "ZIP"):
        return NotAnImageError(path, f"not an image file (it is a {kind} document)")
    if kind is not None:
        return UnsupportedFormatError(path, f"unsupported format {kind}")
    if len(head) < 12:
        n = len(head)
        return NotAnImageError(path, f"not an image file (only {n} byte{'' if n == 1 else 's'})")
    if _looks_like_text(head):
        if b"<svg" in head.lower():
            return UnsupportedFormatError(path, "unsupported format SVG (vector image)")
        return NotAnImageError(path, "not an image file (looks like text)")
    return NotAnImageError(path, "not an image file (unrecognised content)")


def format_name(im: Image.Image) -> str:
    fmt = im.format or "UNKNOWN"
    # Camera JPEGs with extra preview images open as MPO; to the user they are plain JPEGs.
    return "JPEG" if fmt == "MPO" else fmt


def decode_failure_reason(fmt: str, exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if "truncated" in text.lower() or isinstance(exc, EOFError):
        return f"truncated {fmt}: image data ends early"
    return f"broken {fmt} data ({text})"
