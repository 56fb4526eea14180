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
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import IO

from PIL import Image

from gpen_watch.imaging.errors import BrokenImageError, ImageTooLargeError
from gpen_watch.imaging.formats import display_name
from gpen_watch.imaging.reasons import RECOPY

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
# Containers whose tile offsets are not plain positions in the file (or may share data).
_UNBOUNDED_FORMATS = frozenset({"TIFF", "MIC", "FPX"})
_SMALL_RAWMODE = re.compile(r"^(?:1(?:;\w*)?|[LP];([124])\w*)$")
# What one pixel takes while it is decoded, converted and restored: three 8-bit BGR frames
# (restore/runtime/memory.py's rule), twice that for 16-bit samples.
_FRAMES_BYTES = 9


def check_size(path: Path, im: Image.Image, fh: IO[bytes], max_megapixels: float) -> None:
    """Raise why ``im`` (opened from ``fh``, nothing decoded yet) will not be restored for its size."""
    width, height = im.size
    pixels = width * height
    over_limit = max_megapixels > 0 and pixels / 1e6 > max_megapixels
    need = decode_bytes(im)
    memory = physical_memory_bytes()
    beyond_memory = memory is not None and need > memory
    if not (over_limit or beyond_memory):
        return
    length = fh.seek(0, os.SEEK_END)
    fh.seek(0)
    most = most_pixels(im, length)
    if most is not None and pixels > most:
        raise BrokenImageError(
            path,
            f"damaged {display_name(im.format or 'image')}: its header declares {size_text(im.size)}, "
            f"more than a file of {_bytes_text(length)} can hold ({most:,} pixels at most); its header "
            f"is damaged or the file was cut short, and no limit would let it be restored; {RECOPY}",
        )
    if beyond_memory and memory is not None:
        raise ImageTooLargeError(
            path,
            f"image is {size_text(im.size)}: restoring it needs about {_bytes_text(need)} of memory, more "
            f"than this machine has ({_bytes_text(memory)}); restore it on a machine with more memory, "
            "or scale it down in an image editor first",
        )
    raise ImageTooLargeError(
        path,
        f"image is {size_text(im.size)}, over the {max_megapixels:g} MP limit; "
        "raise the restore.max_megapixels setting to restore it",
    )


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
    ratios = [_MAX_RATIO.get(tile.codec_name) for tile in tiles]
    if any(r is None for r in ratios):
        return None
    ratio = max(r for r in ratios if r is not None)
    data: int = max(length - min(int(tile.offset) for tile in tiles), 0)
    bits = 8 if tiles[0].codec_name == "gif" else _bits_per_pixel(im, tiles[0].args)
    return int(data * ratio * 8 // bits)


def _bits_per_pixel(im: Image.Image, args: object) -> int:
    """The fewest bits a stored pixel of ``im`` takes (an underestimate errs towards "real")."""
    rawmode = args[0] if isinstance(args, tuple) and args else args
    if isinstance(rawmode, str) and (m := _SMALL_RAWMODE.match(rawmode)):
        return int(m.group(1) or 1)
    if im.mode == "1":
        return 1
    return 8 * len(im.getbands())


def decode_bytes(im: Image.Image) -> int:
    """Memory decoding and restoring ``im`` takes, about."""
    deep = im.mode.startswith(("I", "F")) or im.mode.endswith(";16")
    return im.size[0] * im.size[1] * _FRAMES_BYTES * (2 if deep else 1)


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
