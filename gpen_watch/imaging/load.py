"""Decode an image file into arrays for restoration, keeping what is needed to write it back.

Pillow identifies the file (header only, lazily) and reads its metadata. Pixels: OpenCV decodes
YCbCr/gray JPEGs (the common case; see _decode_jpeg_opencv) and 16-bit colour PNG/TIFF (Pillow
holds those as 8-bit only); Pillow decodes everything else. Nothing here imports torch: the
daemon's parent process uses this module to classify files.

DCT scaling (Pillow ``draft`` / OpenCV IMREAD_REDUCED_*) only offers 1/2, 1/4, 1/8 and must stay
>= the target, so it helps only when the target is at most half the original size (decode costs:
docs/benchmarks.md, "Decoding a 12 MP JPEG").
"""

from __future__ import annotations

import errno
import io
import os
import re
import stat
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import cv2
import numpy as np
from PIL import Image

from gpen_watch.errors import InputError
from gpen_watch.fsutil import O_NOFOLLOW, READ_NOFOLLOW_FLAGS
from gpen_watch.imaging.formats import RAW_EXTENSIONS, TAG_ORIENTATION

GRAY_MODES = frozenset({"1", "L", "LA", "La", "I", "I;16", "I;16B", "I;16L", "I;16N"})

# Tags that describe a TIFF file's own pixel layout (or are carried separately: ICC 34675, XMP 700).
# A TIFF's getexif() returns them with the camera tags; copied into another file they would lie.
_TIFF_LAYOUT_TAGS = frozenset(
    {254, 255, 256, 257, 258, 259, 262, 263, 266, 269, 273, 277, 278, 279, 280, 281, 282, 283, 284, 285, 296,
     297, 317, 318, 319, 320, 322, 323, 324, 325, 330, 338, 339, 340, 341, 347, 513, 514, 529, 530, 531, 532,
     700, 33723, 34377, 34675}
)  # fmt: skip


class ImageInputError(InputError):
    """An input image cannot be restored. ``kind`` is FileResult.error_kind: "failed" or "unsupported"."""

    kind = "failed"


class NotAnImageError(ImageInputError):
    """The file is not an image we can read at all (text, random bytes, a folder, a RAW file...)."""

    kind = "unsupported"


class EmptyFileError(NotAnImageError):
    """0 bytes: in a hot folder this is usually a copy that has not started writing yet."""


class UnsupportedFormatError(NotAnImageError):
    """An image, but in a format or colour mode this installation cannot decode."""


class BrokenImageError(ImageInputError):
    """A recognised image whose data is truncated or corrupt."""


class ImageTooLargeError(ImageInputError):
    """The declared size exceeds the megapixel limit (refused before decoding)."""


@dataclass
class LoadedImage:
    """A decoded image plus what save_image needs to write the result back in a matching form."""

    # (H, W, 3) BGR in the original bit depth (uint8 or uint16): the target for paste-back.
    pixels: np.ndarray
    # (H, W, 3) uint8 for detection/restoration; the same array as ``pixels`` when that is uint8
    # (treat it as read-only).
    bgr8: np.ndarray
    # (H, W), same dtype as pixels; None without transparency.
    alpha: np.ndarray | None
    # Pillow mode of the input as stored ("L", "RGB", "RGBA", "I;16", "CMYK", "P"...). 16-bit colour
    # PNG/TIFF report "RGB"/"RGBA" (Pillow's name); pixels.dtype tells the depth.
    mode: str
    # "JPEG", "PNG", "WEBP", "TIFF", "GIF", "BMP", "HEIF"... (a multi-picture JPEG reports "JPEG").
    format: str
    # EXIF block ("Exif\0\0" + TIFF structure) with Orientation reset to 1; None if the file had none.
    exif: bytes | None
    # ICC profile describing ``pixels`` (an sRGB profile after an ICC-managed CMYK conversion).
    icc_profile: bytes | None
    # (w, h) after EXIF orientation, before pre-scale.
    original_size: tuple[int, int]
    # Pre-scale factor applied (output size / original size); 1.0 if none.
    scale: float = 1.0
    notes: list[str] = field(default_factory=list)
    # XMP packet with tiff:Orientation reset to 1, or None.
    xmp: bytes | None = None
    # (x, y) dots per inch of the original, or None.
    dpi: tuple[float, float] | None = None
    # Estimated IJG quality (1-100) of a JPEG source, else None.
    jpeg_quality: int | None = None
    # Pillow subsampling code of a JPEG source: 0 = 4:4:4, 1 = 4:2:2, 2 = 4:2:0; None if unknown.
    jpeg_subsampling: int | None = None
    # EXIF Orientation value found in the file (1-8; 1 when absent or invalid).
    orientation: int = 1
    # (device, inode, size, mtime in ns) of the file that was decoded: lets a later byte copy
    # check it reads the same file, not one swapped in under the same name since.
    source_id: tuple[int, int, int, int] | None = None
    # The JPEG comment (COM marker) of a JPEG source, or None: archivists keep provenance there.
    comment: bytes | None = None
    # Seconds load_image spent in the pre-scale resize (0.0 if none), so callers can report it
    # apart from decoding, which includes it.
    prescale_seconds: float = 0.0

    @property
    def oriented(self) -> bool:
        """True when pixels were rotated/flipped from the stored layout (a byte copy would be wrong)."""
        return self.orientation != 1

    @property
    def is_gray(self) -> bool:
        return self.mode in GRAY_MODES

    @property
    def bit_depth(self) -> int:
        return 16 if self.pixels.dtype == np.uint16 else 8

    @property
    def size(self) -> tuple[int, int]:
        """(w, h) of ``pixels``."""
        return self.pixels.shape[1], self.pixels.shape[0]


# --- public entry points ---------------------------------------------------------------------------


def probe_image(path: Path) -> tuple[str, tuple[int, int]]:
    """Format and stored (w, h) from the header only (no pixel decoding, no EXIF rotation)."""
    path = Path(path)
    _check_path(path)
    with _open_file(path) as fh:
        im = _identify(fh, path)
        return _format_name(im), im.size


def load_image(path: Path, max_side: int = 0, max_megapixels: float = 200.0) -> LoadedImage:
    """Decode ``path``; downscale so the long side is at most ``max_side`` (0: never).

    Raises an ImageInputError subclass naming the cause. The declared size is checked against
    ``max_megapixels`` before any pixel is decoded.
    """
    path = Path(path)
    _check_path(path)
    with _open_file(path) as fh:
        source_id = _file_id(os.fstat(fh.fileno()))
        im = _identify(fh, path)
        fmt = _format_name(im)
        _check_megapixels(path, im.size, max_megapixels)
        try:
            loaded = _load_opened(path, fh, im, fmt, max_side)
            loaded.source_id = source_id
            return loaded
        except ImageInputError:
            raise
        except Image.DecompressionBombError as exc:
            # A plugin re-checks frame/tile sizes against Pillow's own (global) limit.
            raise ImageTooLargeError(
                path, f"{fmt} rejected by Pillow's decompression-bomb guard ({exc})"
            ) from exc
        except MemoryError as exc:
            raise ImageTooLargeError(
                path, f"not enough memory to decode this {_size_text(im.size)} image"
            ) from exc
        except (OSError, SyntaxError, ValueError, EOFError, struct.error, IndexError) as exc:
            raise BrokenImageError(path, _decode_failure_reason(fmt, exc)) from exc


def header_refusal(path: Path, max_megapixels: float = 200.0) -> ImageInputError | None:
    """The refusal ``load_image`` would give ``path`` from its header alone, else None.

    No pixel is decoded, so the daemon can set such files aside as they arrive instead of queueing
    them behind real work; the error is the very one the worker raises, so is its wording. None
    also when the file cannot be read right now (the worker's turn decides then) and for HEIF/AVIF,
    whose opener (pillow-heif) the worker loads and the caller may not.
    """
    path = Path(path)
    try:
        _check_path(path)
        with _open_file(path) as fh:
            if _sniff(fh.read(16)) in _HEIF_KINDS:
                return None
            fh.seek(0)
            im = _identify(fh, path)
            _check_megapixels(path, im.size, max_megapixels)
    except (NotAnImageError, BrokenImageError, ImageTooLargeError) as exc:
        return exc
    except ImageInputError:
        return None
    return None


def open_unchanged(path: Path, source_id: tuple[int, int, int, int] | None) -> IO[bytes] | None:
    """Open ``path`` for a byte copy if it is still the very file ``load_image`` decoded (same
    device, inode, size and mtime, not a link); None if it changed, went or cannot be read."""
    if source_id is None:
        return None
    try:
        fd = os.open(path, READ_NOFOLLOW_FLAGS)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and _file_id(st) == source_id:
            return os.fdopen(fd, "rb")
    except OSError:
        pass
    os.close(fd)
    return None


def _file_id(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


# --- checks before decoding ------------------------------------------------------------------------


def _check_path(path: Path) -> None:
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


# Open without following a link and without blocking (a FIFO would block until a writer came), then
# check what was opened: the file may have been swapped since _check_path looked at it.


def _open_file(path: Path) -> IO[bytes]:
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


def _check_megapixels(path: Path, size: tuple[int, int], max_megapixels: float) -> None:
    megapixels = size[0] * size[1] / 1e6
    if max_megapixels > 0 and megapixels > max_megapixels:
        raise ImageTooLargeError(
            path,
            f"image is {_size_text(size)}, over the {max_megapixels:g} MP limit; "
            "raise the restore.max_megapixels setting to restore it",
        )


def _size_text(size: tuple[int, int]) -> str:
    return f"{size[0]}x{size[1]} ({size[0] * size[1] / 1e6:.0f} MP)"


# --- identification ----------------------------------------------------------------------------------


def _identify(fh: IO[bytes], path: Path) -> Image.Image:
    """Open the header lazily, content first (the extension is ignored), or raise why not."""
    head = fh.read(64)
    try:
        im = _open_header(fh)
        if im is None and _sniff(head) in _HEIF_KINDS and _register_heif():
            im = _open_header(fh)
    except Image.DecompressionBombError as exc:
        raise ImageTooLargeError(path, f"rejected by Pillow's decompression-bomb guard ({exc})") from exc
    except (OSError, ValueError, EOFError, MemoryError) as exc:
        # A plugin recognised its format but the header itself is cut short or corrupt.
        kind = _sniff(head) or "image"
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
_HEIF_KINDS = ("HEIC", "HEIF", "AVIF")
_FTYP_BRANDS = {b"heic": "HEIC", b"heix": "HEIC", b"hevc": "HEIC", b"heim": "HEIC", b"heis": "HEIC",
                b"mif1": "HEIF", b"msf1": "HEIF", b"avif": "AVIF", b"avis": "AVIF"}  # fmt: skip


def _sniff(head: bytes) -> str | None:
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
    kind = _sniff(head)
    if kind in _HEIF_KINDS:
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


def _format_name(im: Image.Image) -> str:
    fmt = im.format or "UNKNOWN"
    # Camera JPEGs with extra preview images open as MPO; to the user they are plain JPEGs.
    return "JPEG" if fmt == "MPO" else fmt


def _decode_failure_reason(fmt: str, exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if "truncated" in text.lower() or isinstance(exc, EOFError):
        return f"truncated {fmt}: image data ends early"
    return f"broken {fmt} data ({text})"


# --- decoding --------------------------------------------------------------------------------------


def _load_opened(path: Path, fh: IO[bytes], im: Image.Image, fmt: str, max_side: int) -> LoadedImage:
    notes: list[str] = []
    sixteen_bit = _is_16bit_colour(im)  # first: reading PNG EXIF may load() and clear im.tile
    _note_frames(im, fmt, notes)
    mode = im.mode
    exif_obj = _read_exif(im, fmt, sixteen_bit, notes)
    orientation = _orientation(exif_obj)
    stored_w, stored_h = im.size
    swaps = orientation in (5, 6, 7, 8)
    original_size = (stored_h, stored_w) if swaps else (stored_w, stored_h)
    target = _target_size(original_size, max_side)
    stored_target = None if target is None else ((target[1], target[0]) if swaps else target)

    pixels, alpha, icc = _decode(im, fh, fmt, sixteen_bit, stored_target, notes, path)
    info = _source_info(im, fmt)  # after decoding: PNG chunks after the image data count too
    scale = 1.0
    prescale_seconds = 0.0
    if target is not None and stored_target is not None:
        # Resize before rotating: the rotation then copies the small image, not the full one.
        t0 = time.perf_counter()
        pixels, alpha = _resize(pixels, alpha, stored_target)
        prescale_seconds = time.perf_counter() - t0
        scale = target[0] / original_size[0]
        notes.append(f"pre-scaled from {original_size[0]}x{original_size[1]} to {target[0]}x{target[1]}")
    pixels, alpha = _apply_orientation(pixels, alpha, orientation)
    return LoadedImage(
        pixels=pixels,
        bgr8=_to_8bit(pixels),
        alpha=alpha,
        mode=mode,
        format=fmt,
        exif=_exif_bytes(exif_obj),
        icc_profile=icc,
        original_size=original_size,
        scale=scale,
        notes=notes,
        xmp=_reset_xmp_orientation(info["xmp"]),
        dpi=info["dpi"],
        jpeg_quality=info["jpeg_quality"],
        jpeg_subsampling=info["jpeg_subsampling"],
        orientation=orientation,
        comment=info["comment"],
        prescale_seconds=prescale_seconds,
    )


def _decode(
    im: Image.Image,
    fh: IO[bytes],
    fmt: str,
    sixteen_bit: bool,
    stored_target: tuple[int, int] | None,
    notes: list[str],
    path: Path,
) -> tuple[np.ndarray, np.ndarray | None, bytes | None]:
    """(BGR pixels in stored orientation, alpha, ICC profile describing the pixels)."""
    header_icc = im.info.get("icc_profile") or None
    if sixteen_bit:
        pixels, alpha = _decode_16bit_colour(fh, fmt)
        return pixels, alpha, header_icc
    if fmt == "JPEG" and im.mode in ("RGB", "L"):
        decoded = _decode_jpeg_opencv(fh, im.size, stored_target)
        if decoded is not None:
            return decoded, None, header_icc
    if fmt == "JPEG" and stored_target is not None:
        # DCT-domain downscale: decodes at 1/2, 1/4 or 1/8 while staying >= the target.
        im.draft(None, stored_target)
    return _decode_pillow(im, path, notes)


def _dct_factor(size: tuple[int, int], target: tuple[int, int] | None) -> int:
    """Largest JPEG DCT scale-down (8, 4, 2) that keeps both sides >= target (Pillow draft's rule)."""
    if target is None:
        return 1
    fit = min(size[0] // target[0], size[1] // target[1])
    return next((f for f in (8, 4, 2) if fit >= f), 1)


_CV2_REDUCED = {1: cv2.IMREAD_COLOR, 2: cv2.IMREAD_REDUCED_COLOR_2, 4: cv2.IMREAD_REDUCED_COLOR_4,
                8: cv2.IMREAD_REDUCED_COLOR_8}  # fmt: skip


def _decode_jpeg_opencv(
    fh: IO[bytes], size: tuple[int, int], stored_target: tuple[int, int] | None
) -> np.ndarray | None:
    """YCbCr/gray JPEG straight to BGR with OpenCV, or None to let Pillow decide.

    Same libjpeg-turbo decode as Pillow (pixel-identical here) but into a BGR array directly:
    Pillow's array export alone costs about as much as the decode (12 MP: 118 ms -> 57 ms).
    OpenCV pads a truncated JPEG with grey and only logs a warning, so it is used only for a file
    that ends with the EOI marker; anything else (truncated, data after EOI) goes to Pillow, which
    refuses truncated data.
    """
    fh.seek(0)
    raw = fh.read()
    if not raw[-256:].rstrip(b"\x00\r\n ").endswith(b"\xff\xd9"):
        return None
    factor = _dct_factor(size, stored_target)
    flags = _CV2_REDUCED[factor] | cv2.IMREAD_IGNORE_ORIENTATION  # orientation: applied by us
    arr = cv2.imdecode(np.frombuffer(raw, np.uint8), flags)
    if arr is None or arr.ndim != 3:
        return None
    return arr


def _note_frames(im: Image.Image, fmt: str, notes: list[str]) -> None:
    if fmt == "JPEG":
        return  # MPO extra frames are camera previews, not content.
    what = "pages" if fmt == "TIFF" else "frames"
    try:
        if getattr(im, "is_animated", False):
            notes.append(f"{fmt} has {getattr(im, 'n_frames', '?')} {what}; only the first was restored")
    except Exception:  # noqa: BLE001 - a broken later frame must not cost the first one
        notes.append(f"{fmt}: later {what} are unreadable; only the first was restored")
        im.seek(0)


def _read_exif(im: Image.Image, fmt: str, sixteen_bit: bool, notes: list[str]) -> Image.Exif | None:
    if fmt == "PNG" and "exif" not in im.info:
        if sixteen_bit:
            return None  # an eXIf chunk after the pixels would cost an extra 8-bit decode to find
        # Pillow's PNG getexif() decodes the image to reach chunks after the pixels. Do it here,
        # outside the try below: a decode error must refuse the image, not merely drop its EXIF
        # (after some failures Pillow's next load() returns the partial image without an error).
        im.load()
    try:
        exif = im.getexif()
        if fmt == "TIFF":
            for tag in _TIFF_LAYOUT_TAGS & set(exif.keys()):
                del exif[tag]
    except Exception as exc:  # noqa: BLE001 - broken EXIF must not cost the photo
        notes.append(f"EXIF data unreadable ({exc}); not carried to the output")
        return None
    return exif if len(exif) else None


def _orientation(exif: Image.Exif | None) -> int:
    value = exif.get(TAG_ORIENTATION, 1) if exif is not None else 1
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


def _exif_bytes(exif: Image.Exif | None) -> bytes | None:
    if exif is None:
        return None
    if TAG_ORIENTATION in exif:
        exif[TAG_ORIENTATION] = 1  # pixels are already upright
    try:
        return exif.tobytes()
    except Exception:  # noqa: BLE001 - an unwritable tag: drop the block rather than the photo
        return None


def _reset_xmp_orientation(xmp: bytes | str | None) -> bytes | None:
    if not xmp:
        return None
    data = xmp.encode("utf-8") if isinstance(xmp, str) else bytes(xmp)
    data = re.sub(rb'tiff:Orientation="\d"', b'tiff:Orientation="1"', data)
    return re.sub(
        rb"<tiff:Orientation>\d</tiff:Orientation>", b"<tiff:Orientation>1</tiff:Orientation>", data
    )


def _source_info(im: Image.Image, fmt: str) -> dict[str, Any]:
    info = im.info
    dpi = info.get("dpi")
    out: dict[str, Any] = {
        "icc_profile": info.get("icc_profile") or None,
        "xmp": info.get("xmp"),
        # Writers put 1 (or 0) dpi where the resolution is unknown; do not carry that.
        "dpi": (float(dpi[0]), float(dpi[1])) if dpi and dpi[0] > 1 and dpi[1] > 1 else None,
        "jpeg_quality": None,
        "jpeg_subsampling": None,
        "comment": None,
    }
    if fmt == "JPEG":
        out["comment"] = info.get("comment") or None
        from PIL import JpegImagePlugin

        out["jpeg_quality"] = _estimate_jpeg_quality(getattr(im, "quantization", None))
        sampling = JpegImagePlugin.get_sampling(im)
        out["jpeg_subsampling"] = sampling if sampling >= 0 else None
    return out


# IJG standard luminance table (Annex K); its sum is order-independent, so zigzag vs natural order
# does not matter.
_STD_LUMA_SUM = sum(
    [16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69, 56,
     14, 17, 22, 29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113, 92,
     49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99]
)  # fmt: skip


def _estimate_jpeg_quality(tables: dict[int, list[int]] | None) -> int | None:
    """Invert IJG quality scaling from the luminance table (exact for libjpeg encoders, rough otherwise)."""
    if not tables or 0 not in tables:
        return None
    if max(tables[0]) == 1:
        return 100
    percent = 100.0 * sum(tables[0]) / _STD_LUMA_SUM  # IJG "scale factor" in percent
    quality = (200.0 - percent) / 2.0 if percent <= 100.0 else 5000.0 / percent
    return int(min(100, max(1, round(quality))))


def _target_size(size: tuple[int, int], max_side: int) -> tuple[int, int] | None:
    w, h = size
    if max_side <= 0 or max(w, h) <= max_side:
        return None
    s = max_side / max(w, h)
    return max(1, round(w * s)), max(1, round(h * s))


def _is_16bit_colour(im: Image.Image) -> bool:
    """Pillow opens 16-bit RGB(A)/LA PNG and TIFF but keeps only 8 bits; OpenCV keeps 16."""
    # ImageFile.tile: what the decoder will do; the base Image class (the stubs' type) has none.
    tile = getattr(im, "tile", None) or []
    if im.mode in GRAY_MODES - {"LA"} or im.format not in ("PNG", "TIFF") or len(tile) == 0:
        return False
    args = tile[0].args
    rawmode = args[0] if isinstance(args, tuple) else args
    return isinstance(rawmode, str) and ";16" in rawmode


def _decode_16bit_colour(fh: IO[bytes], fmt: str) -> tuple[np.ndarray, np.ndarray | None]:
    fh.seek(0)
    raw = bytearray(fh.read())
    if fmt == "TIFF":
        # OpenCV's TIFF reader half-applies the Orientation tag even with IMREAD_UNCHANGED (seen
        # with OpenCV 5.0): hand it the stored layout and rotate here as for every other format.
        _neutralise_tiff_orientation(raw)
    # IMREAD_UNCHANGED keeps 16 bits and alpha (and ignores a PNG's EXIF orientation).
    arr = cv2.imdecode(np.frombuffer(raw, np.uint8), cv2.IMREAD_UNCHANGED)
    if arr is None or arr.dtype != np.uint16:
        raise OSError("OpenCV could not decode the 16-bit image data (truncated or corrupt)")
    if arr.ndim == 2:
        arr = cv2.cvtColor(arr, cv2.COLOR_GRAY2BGR)
    if arr.shape[2] == 4:
        return np.ascontiguousarray(arr[:, :, :3]), np.ascontiguousarray(arr[:, :, 3])
    return arr, None


def _neutralise_tiff_orientation(buf: bytearray) -> None:
    """Set Orientation to 1 in IFD0 of a classic or Big TIFF, in place."""
    order = {b"II": "<", b"MM": ">"}.get(bytes(buf[:2]))
    if order is None or len(buf) < 16:
        return
    (magic,) = struct.unpack_from(order + "H", buf, 2)
    if magic == 42:  # classic: u32 IFD offset at 4; u16 entry count; entries of tag, type, u32 count, value
        ifd = struct.unpack_from(order + "I", buf, 4)[0]
        count, first, size, value_at = struct.unpack_from(order + "H", buf, ifd)[0], ifd + 2, 12, 8
    elif magic == 43:  # BigTIFF: u64 offset at 8; u64 count; 20-byte entries with u64 count
        ifd = struct.unpack_from(order + "Q", buf, 8)[0]
        count, first, size, value_at = struct.unpack_from(order + "Q", buf, ifd)[0], ifd + 8, 20, 12
    else:
        return
    for i in range(count):
        entry = first + i * size
        tag, typ = struct.unpack_from(order + "HH", buf, entry)
        if tag == TAG_ORIENTATION and typ == 3:  # SHORT: stored inline
            struct.pack_into(order + "H", buf, entry + value_at, 1)
            return


def _decode_pillow(
    im: Image.Image, path: Path, notes: list[str]
) -> tuple[np.ndarray, np.ndarray | None, bytes | None]:
    """Decode with Pillow into (BGR pixels, alpha, ICC profile that describes the pixels)."""
    im.load()  # raises on truncated data: ImageFile.LOAD_TRUNCATED_IMAGES stays False
    mode = im.mode
    icc = im.info.get("icc_profile") or None
    if mode == "CMYK":
        im, icc = _cmyk_to_rgb(im, icc, notes)
    elif mode == "F":
        raise UnsupportedFormatError(path, "32-bit floating-point images are not supported")
    elif mode in ("P", "PA", "RGB", "L") and _has_transparency(im):
        im = im.convert("LA" if mode == "L" else "RGBA")  # tRNS / palette alpha -> real alpha
    elif mode == "P":
        im = im.convert("RGB")
    elif mode == "1":
        im = im.convert("L")
    elif mode in ("La", "RGBa"):
        im = im.convert("LA" if mode == "La" else "RGBA")
    elif mode not in ("L", "LA", "RGB", "RGBA") and not mode.startswith("I"):
        im = im.convert("RGB")  # YCbCr, HSV, RGBX, LAB...

    if im.mode.startswith("I"):
        return _gray16_to_bgr(np.asarray(im), notes), None, icc
    arr = np.asarray(im)
    alpha = None
    if im.mode in ("LA", "RGBA"):
        alpha = np.ascontiguousarray(arr[:, :, -1])
        arr = arr[:, :, :-1] if im.mode == "RGBA" else arr[:, :, 0]
    code = cv2.COLOR_GRAY2BGR if arr.ndim == 2 else cv2.COLOR_RGB2BGR
    return cv2.cvtColor(np.ascontiguousarray(arr), code), alpha, icc


def _has_transparency(im: Image.Image) -> bool:
    if im.mode == "PA" or "transparency" in im.info:
        return True
    return im.mode == "P" and im.palette is not None and im.palette.mode == "RGBA"


def _gray16_to_bgr(arr: np.ndarray, notes: list[str]) -> np.ndarray:
    if arr.dtype.kind == "i" and (arr.min() < 0 or arr.max() > 65535):
        notes.append("32-bit integer samples clipped to 16 bits")
    gray = np.clip(arr, 0, 65535).astype(np.uint16) if arr.dtype != np.uint16 else arr
    return cv2.cvtColor(np.ascontiguousarray(gray), cv2.COLOR_GRAY2BGR)


def _cmyk_to_rgb(im: Image.Image, icc: bytes | None, notes: list[str]) -> tuple[Image.Image, bytes | None]:
    """CMYK -> RGB through the embedded ICC profile when LittleCMS can use it, else naively.

    The returned profile describes the new RGB pixels: sRGB after a managed conversion, none after
    the naive one (the CMYK profile no longer applies).
    """
    if icc:
        try:
            from PIL import ImageCms

            srgb = ImageCms.createProfile("sRGB")
            rgb = ImageCms.profileToProfile(
                im, ImageCms.ImageCmsProfile(io.BytesIO(icc)), srgb, outputMode="RGB"
            )
            if rgb is None:  # only None when converting in place, which is not asked for here
                raise ValueError("profile conversion returned nothing")
            notes.append("CMYK converted to sRGB using the embedded ICC profile")
            return rgb, ImageCms.ImageCmsProfile(srgb).tobytes()
        except Exception as exc:  # noqa: BLE001 - ImageCms missing or profile unusable: fall back
            notes.append(f"CMYK converted to RGB without colour management (ICC profile unusable: {exc})")
            return im.convert("RGB"), None
    notes.append("CMYK converted to RGB without colour management (no ICC profile embedded)")
    return im.convert("RGB"), None


# Orientation tag -> operation that makes the stored pixels upright (same as ImageOps.exif_transpose).
def _apply_orientation(
    pixels: np.ndarray, alpha: np.ndarray | None, orientation: int
) -> tuple[np.ndarray, np.ndarray | None]:
    if orientation == 1:
        return pixels, alpha
    ops: dict[int, Callable[[np.ndarray], np.ndarray]] = {
        2: lambda a: a[:, ::-1],  # mirror horizontally
        3: lambda a: a[::-1, ::-1],  # rotate 180
        4: lambda a: a[::-1],  # mirror vertically
        5: lambda a: a.swapaxes(0, 1),  # transpose
        6: lambda a: np.rot90(a, -1),  # rotate 90 clockwise
        7: lambda a: np.rot90(a, 2).swapaxes(0, 1),  # transverse
        8: lambda a: np.rot90(a, 1),  # rotate 90 counter-clockwise
    }
    op = ops[orientation]
    new_alpha = np.ascontiguousarray(op(alpha)) if alpha is not None else None
    return np.ascontiguousarray(op(pixels)), new_alpha


def _resize(
    pixels: np.ndarray, alpha: np.ndarray | None, size: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray | None]:
    # INTER_AREA: the anti-aliased choice for shrinking (INTER_LINEAR aliases; docs/benchmarks.md).
    pixels = cv2.resize(pixels, size, interpolation=cv2.INTER_AREA)
    if alpha is not None:
        alpha = cv2.resize(alpha, size, interpolation=cv2.INTER_AREA)
    return pixels, alpha


def _to_8bit(pixels: np.ndarray) -> np.ndarray:
    if pixels.dtype == np.uint8:
        return pixels
    # 65535 / 257 = 255 exactly; convertScaleAbs rounds and saturates in one pass.
    return cv2.convertScaleAbs(pixels, alpha=1.0 / 257.0)
