"""Image files whose headers claim a size: a bomb (a tiny file claiming millions of pixels, which
no limit would make restorable) and a real large image kept sparse on disk (all its rows there, as
zeros), which a higher megapixel limit would let through."""

from __future__ import annotations

import io
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


def gif_frame(x: int, y: int, width: int, height: int, after: bytes = b"") -> bytes:
    """A GIF of a 32x32 screen and one ``width`` x ``height`` frame at (``x``, ``y``), the file
    ending after the frame's LZW code size unless ``after`` follows it. Pillow grows its canvas to
    hold a frame that reaches past the screen (Pillow's decompression_bomb.gif: a 65535x1321 frame
    at row 65280, so 65535x66601)."""
    screen = b"GIF89a" + struct.pack("<HHBBB", 32, 32, 0xF1, 0, 0) + bytes(12)  # 4-colour table
    return screen + b"," + struct.pack("<HHHHB", x, y, width, height, 0) + b"\x02" + after


def gif_comment(size: int) -> bytes:
    """A GIF comment extension of about ``size`` bytes of text, in 255-byte sub-blocks."""
    return b"!\xfe" + (b"\xff" + b"c" * 255) * (size // 256 + 1) + b"\x00"


def ico_claiming(width: int, height: int, data: int = 128) -> bytes:
    """A Windows icon whose one entry (16x16 in its directory) is a 1-bit bitmap declaring
    ``width`` x ``height`` (an icon bitmap's height covers the picture and its mask) over ``data``
    bytes (Pillow's decompression_bomb.ico: 65535 x 65535 in 198 bytes)."""
    dib = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 1, 0, 0, 0, 0, 0, 0) + bytes(8 + data)
    entry = struct.pack("<BBBBHHII", 16, 16, 2, 0, 1, 1, len(dib), 22)
    return struct.pack("<HHH", 0, 1, 1) + entry + dib


def icns_claiming(height: int) -> bytes:
    """A Mac OS icon whose 256x256 icon ("ic08") is a real JPEG 2000 picture of 256x256 whose
    header (its ihdr box) declares 256 x ``height`` (Pillow's oom-8ed3316a...icns: 256 x
    1,014,197,964, 259,635 MP)."""
    buf = io.BytesIO()
    Image.new("RGB", (256, 256), (10, 20, 30)).save(buf, "JPEG2000")
    jp2 = bytearray(buf.getvalue())
    at = jp2.index(b"ihdr") + 4
    jp2[at : at + 4] = struct.pack(">I", height)
    block = b"ic08" + struct.pack(">I", 8 + len(jp2)) + bytes(jp2)
    return b"icns" + struct.pack(">I", 8 + len(block)) + block
