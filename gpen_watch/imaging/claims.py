"""Whether an image's declared size can be true and can be restored here, checked before any pixel
is decoded, so that the advice a user reads is advice that would work.

Three answers for a size over ``restore.max_megapixels`` or over this machine's memory:

- The header cannot be true: a file can hold only so many pixels. Uncompressed data holds one
  stored pixel per its bytes; each compression this module knows has a greatest ratio (deflate
  about 1032:1, GIF's LZW one 12-bit code per 4,096 pixels, PackBits and the run-length schemes
  one short run per 62 to 128 bytes). A 6-terapixel BMP in 24 KB, a negative width read as
  4,294,967,169, or a PNG that declares 60,000 x 60,000 pixels over a few hundred bytes of data is
  damaged (or cut short), and no limit would let it be restored.
- The image is real but needs more memory than this machine has: the reason says how much.
- Otherwise: raising the limit restores it, and the reason says so.

Formats whose compression has no such bound (JPEG, WebP, AVIF, HEIF, JPEG 2000, a TIFF of several
strips, which may share their data, run-length BMP, which may skip whole regions, FLI) are never
called damaged by this check.

A frame or picture inside the file gets the same answers: a frame Pillow's own guard refuses
while it opens the file (a GIF frame reaching past its screen grows the canvas), judged by the
whole file's length (``part_refusal``); the picture inside an icon (``icons``), judged before
Pillow decodes it, and damaged when an ICNS icon holds a picture larger than the icon.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import IO

from PIL import Image

from gpen_watch.imaging.errors import BrokenImageError, ImageInputError, ImageTooLargeError
from gpen_watch.imaging.formats import display_name
from gpen_watch.imaging.icons import inner_picture
from gpen_watch.imaging.reasons import RECOPY, bomb_pixels, too_large_part

# The most bytes of pixel data one byte of each Pillow decoder's input can become.
_MAX_RATIO = {
    "raw": 1,
    "ppm": 1,  # plain PNM: at least one character per sample
    "bcn": 8,  # BC1: 8 bytes per 16 RGBA pixels
    "zip": 1032,  # deflate (PNG)
    "gif": 2731,  # 4,096 pixels per 12-bit code, one byte each
    "packbits": 64,
    "tga_rle": 128,
    "sgi_rle": 127,
    "pcx": 32,
    "qoi": 248,  # QOI_OP_RUN: 62 RGBA pixels in one byte
}
# Formats whose every frame is in one of those codecs, with the fewest bits a pixel of theirs
# takes: the bound for a frame Pillow refuses before it returns the image (``part_refusal``).
_FORMAT_CODING = {"GIF": ("gif", 8)}
# Containers whose tile offsets are not plain positions in the file (or may share data).
_UNBOUNDED_FORMATS = frozenset({"TIFF", "MIC", "FPX"})
_SMALL_RAWMODE = re.compile(r"^(?:1(?:;\w*)?|[LP];([124])\w*)$")
# What one pixel takes while it is decoded, converted and restored: three 8-bit BGR frames
# (restore/runtime/memory.py's rule), twice that for 16-bit samples.
_FRAMES_BYTES = 9


def check_size(path: Path, im: Image.Image, fh: IO[bytes], max_megapixels: float) -> None:
    """Raise why ``im`` (opened from ``fh``, nothing decoded yet) will not be restored for its size."""
    _check(path, im.format or "image", im, im.size, fh, max_megapixels, "its header declares", "image is")


def check_inner_picture(path: Path, head: bytes, fh: IO[bytes], max_megapixels: float) -> None:
    """Raise why the picture inside an icon file (``icons``) cannot be, or will not be, restored,
    before Pillow decodes it: its icon readers do so while they open the file, so a picture its
    file cannot hold is damaged whatever the limit (Pillow would allocate it before finding out)."""
    inner = inner_picture(head, fh)
    if inner is None:
        return
    fmt, size = inner.fmt, inner.size
    if inner.slot is not None and (size[0] > inner.slot[0] or size[1] > inner.slot[1]):
        raise BrokenImageError(
            path,
            f"damaged {display_name(fmt)}: its {inner.slot[0]}x{inner.slot[1]} icon holds a picture "
            f"that declares {size_text(size)}, larger than the icon it is stored as; its header is "
            f"damaged, and no limit would let it be restored; {RECOPY}",
        )
    declares = "the picture inside it declares"
    length = _length(fh)
    most = most_pixels(inner.image, length)
    if most is not None and size[0] * size[1] > most:
        raise _cannot_hold(path, fmt, f"{declares} {size_text(size)}", length, most)
    _check(path, fmt, inner.image, size, fh, max_megapixels, declares, "the picture inside it is")


def part_refusal(
    path: Path, fmt: str, exc: BaseException, fh: IO[bytes], max_megapixels: float
) -> ImageInputError:
    """Why a frame or tile that Pillow's own guard refused (its DecompressionBombError, raised
    before any image to judge is returned) will not be restored: damaged when a file of this
    length cannot hold that many pixels in any compression its format has, else over the limit."""
    pixels = bomb_pixels(exc)
    length = _length(fh)
    coding = _FORMAT_CODING.get(fmt)
    most = _most(length, *coding) if coding is not None else None
    if most is not None and pixels > most:
        return _cannot_hold(path, fmt, f"a frame inside it declares {pixels / 1e6:.0f} MP", length, most)
    return too_large_part(path, pixels, max_megapixels)


def _check(
    path: Path,
    fmt: str,
    im: Image.Image,
    size: tuple[int, int],
    fh: IO[bytes],
    max_megapixels: float,
    declares: str,
    subject: str,
) -> None:
    """The three answers (module doc) for ``size``, the pixels ``im`` (stored in ``fh``) holds."""
    pixels = size[0] * size[1]
    over_limit = max_megapixels > 0 and pixels / 1e6 > max_megapixels
    need = decode_bytes(im, size)
    memory = physical_memory_bytes()
    beyond_memory = memory is not None and need > memory
    if not (over_limit or beyond_memory):
        return
    length = _length(fh)
    most = most_pixels(im, length)
    if most is not None and pixels > most:
        raise _cannot_hold(path, fmt, f"{declares} {size_text(size)}", length, most)
    if beyond_memory and memory is not None:
        raise ImageTooLargeError(
            path,
            f"{subject} {size_text(size)}: restoring it needs about {_bytes_text(need)} of memory, more "
            f"than this machine has ({_bytes_text(memory)}); restore it on a machine with more memory, "
            "or scale it down in an image editor first",
        )
    raise ImageTooLargeError(
        path,
        f"{subject} {size_text(size)}, over the {max_megapixels:g} MP limit; "
        "raise the restore.max_megapixels setting to restore it",
    )


def _cannot_hold(path: Path, fmt: str, claim: str, length: int, most: int) -> BrokenImageError:
    return BrokenImageError(
        path,
        f"damaged {display_name(fmt)}: {claim}, more than a file of {_bytes_text(length)} can hold "
        f"({most:,} pixels at most); its header is damaged or the file was cut short, and no limit "
        f"would let it be restored; {RECOPY}",
    )


def _length(fh: IO[bytes]) -> int:
    length = fh.seek(0, os.SEEK_END)
    fh.seek(0)
    return length


def size_text(size: tuple[int, int]) -> str:
    return f"{size[0]}x{size[1]} ({size[0] * size[1] / 1e6:.0f} MP)"


def most_pixels(im: Image.Image, length: int) -> int | None:
    """The most pixels a file of ``length`` bytes in ``im``'s format and compression can hold,
    or None where no bound is known."""
    tiles = getattr(im, "tile", None) or []
    # A TIFF of one strip has no other strip to share its data with: its bytes are all there is.
    shared = (im.format or "") in _UNBOUNDED_FORMATS and not (im.format == "TIFF" and len(tiles) == 1)
    if not tiles or shared:
        return None
    codecs = {tile.codec_name for tile in tiles}
    if not codecs <= _MAX_RATIO.keys():
        return None
    codec = max(codecs, key=_MAX_RATIO.__getitem__)
    data: int = max(length - min(int(tile.offset) for tile in tiles), 0)
    bits = 8 if tiles[0].codec_name == "gif" else _bits_per_pixel(im, tiles[0].args)
    return _most(data, codec, bits)


def _most(data: int, codec: str, bits: int) -> int:
    """The most pixels of ``bits`` each that ``data`` bytes in ``codec`` can become."""
    return data * _MAX_RATIO[codec] * 8 // bits


def _bits_per_pixel(im: Image.Image, args: object) -> int:
    """The fewest bits a stored pixel of ``im`` takes (an underestimate errs towards "real")."""
    rawmode = args[0] if isinstance(args, tuple) and args else args
    if isinstance(rawmode, str) and (m := _SMALL_RAWMODE.match(rawmode)):
        return int(m.group(1) or 1)
    if im.mode == "1":
        return 1
    return 8 * len(im.getbands())


def decode_bytes(im: Image.Image, size: tuple[int, int]) -> int:
    """Memory decoding and restoring ``size`` pixels of ``im``'s mode takes, about."""
    deep = im.mode.startswith(("I", "F")) or im.mode.endswith(";16")
    return size[0] * size[1] * _FRAMES_BYTES * (2 if deep else 1)


def physical_memory_bytes() -> int | None:
    """This machine's memory; None where the system does not say (Windows has no sysconf)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


def _bytes_text(n: int) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}".replace(".0 ", " ")
    return f"{n} bytes"
