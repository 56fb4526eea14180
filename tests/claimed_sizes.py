"""Image files whose headers claim a size: a bomb (a tiny file claiming millions of pixels, which
no limit would make restorable) and a real large image kept sparse on disk (all its rows there, as
zeros), which a higher megapixel limit would let through."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

from PIL import Image


def png_claiming(path: Path, width: int, height: int) -> Path:
    """A tiny real PNG whose IHDR (CRC fixed) claims another size: a decompression bomb header."""
    Image.new("RGB", (8, 8), (10, 20, 30)).save(path, "PNG")
    raw = bytearray(path.read_bytes())
    raw[16:24] = struct.pack(">II", width, height)  # IHDR data starts at 16
    raw[29:33] = struct.pack(">I", zlib.crc32(bytes(raw[12:29])))  # CRC over type + 13 data bytes
    path.write_bytes(bytes(raw))
    return path


def bmp(width: int, height: int, bits: int, pixels: bytes) -> bytes:
    """An uncompressed BMP (BITMAPINFOHEADER) with these rows."""
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, bits, 0, 0, 2835, 2835, 0, 0)
    palette = bytes(8) if bits == 1 else b""
    offset = 14 + len(info) + len(palette)
    return b"BM" + struct.pack("<IHHI", offset + len(pixels), 0, 0, offset) + info + palette + pixels


def sparse_bmp(path: Path, width: int, height: int) -> Path:
    """A 24-bit BMP whose pixel rows are all there (zeros), written as a sparse file."""
    stride = (width * 3 + 3) // 4 * 4
    with path.open("wb") as fh:
        fh.write(bmp(width, height, 24, b""))
        fh.truncate(54 + stride * height)
    return path
