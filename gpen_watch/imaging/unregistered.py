"""Images Pillow reads only when asked by name: GD (libgd's uncompressed format) and Quake 2
textures (WAL). Neither has a signature ``Image.open`` could go by, so Pillow leaves them out of
it; here each is recognised by its structure adding up to the whole file, which a file of another
kind does not do by chance, and then opened through Pillow's own module.
"""

from __future__ import annotations

import os
import struct
from typing import IO

from PIL import GdImageFile, Image, WalImageFile

# GD 2.x palette image: signature, width and height (big-endian), a truecolour flag of 0, the
# colour count and transparent index, 256 RGBX palette entries, then one byte per pixel.
_GD_SIGNATURES = (b"\xff\xfe", b"\xff\xff")
_GD_PIXELS_AT = 1037
# WAL: a 32-byte name, width, height, the offsets of four mip levels (each a quarter of the one
# before), a 32-byte next name, flags, contents and value: 100 bytes, then the mip levels.
_WAL_HEADER = 100


def unregistered_format(fh: IO[bytes]) -> str | None:
    """ "GD" or "WAL" when the structure of ``fh`` says it is one, else None. Leaves ``fh`` at its start."""
    length = fh.seek(0, os.SEEK_END)
    fh.seek(0)
    head = fh.read(_WAL_HEADER)
    fh.seek(0)
    if _is_gd(head, length):
        return "GD"
    if _is_wal(head, length):
        return "WAL"
    return None


def open_as(fmt: str, fh: IO[bytes]) -> Image.Image:
    """``fh`` opened through Pillow's module for ``fmt`` (one ``unregistered_format`` named)."""
    fh.seek(0)
    return GdImageFile.open(fh) if fmt == "GD" else _QuakeTexture(fh)


def _is_gd(head: bytes, length: int) -> bool:
    if len(head) < 7 or head[:2] not in _GD_SIGNATURES or head[6] != 0:
        return False
    width: int
    height: int
    width, height = struct.unpack_from(">HH", head, 2)
    return width > 0 and height > 0 and length == _GD_PIXELS_AT + width * height


def _is_wal(head: bytes, length: int) -> bool:
    if len(head) < _WAL_HEADER:
        return False
    values: tuple[int, ...] = struct.unpack_from("<6I", head, 32)
    width, height, *mips = values
    if width == 0 or height == 0 or mips[0] < _WAL_HEADER:
        return False
    expected = mips[0]
    for level, offset in enumerate(mips):
        if offset != expected:
            return False
        expected += max(width >> level, 1) * max(height >> level, 1)
    return length >= expected


class _QuakeTexture(WalImageFile.WalImageFile):
    """Pillow's WAL reader gives the Quake 2 palette in 6-bit VGA values (0 to 63), which draws
    every texture at a quarter of its brightness; the palette is scaled to 8 bits here."""

    def load(self) -> Image.core.PixelAccess | None:  # type: ignore[name-defined]
        pixels = super().load()
        self.putpalette(bytes(v * 255 // 63 for v in WalImageFile.quake2palette))
        return pixels
