"""File writers for what Pillow cannot write faithfully: 16-bit colour PNG (OpenCV encodes the
pixels, the metadata chunks are added here), TIFF with EXIF at 8 or 16 bits, and 32-bit BMP with
an alpha channel that readers keep (BITMAPV4HEADER with bit-field masks)."""

from __future__ import annotations

import struct
import zlib

import cv2
import numpy as np
from PIL import Image, TiffImagePlugin

from gpen_watch.base.errors import OutputError
from gpen_watch.imaging.formats import TAG_EXIF_IFD, TAG_GPS_IFD


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def encode_png16_colour(
    planes: np.ndarray,
    exif: Image.Exif | None,
    icc: bytes | None,
    xmp: bytes | None,
    dpi: tuple[float, float] | None,
) -> bytes:
    """16-bit RGB/RGBA PNG via OpenCV, metadata chunks added here."""
    code = cv2.COLOR_RGBA2BGRA if planes.shape[2] == 4 else cv2.COLOR_RGB2BGR
    ok, buf = cv2.imencode(".png", cv2.cvtColor(planes, code), [cv2.IMWRITE_PNG_COMPRESSION, 6])
    if not ok:
        raise OutputError("OpenCV could not encode the 16-bit PNG")
    png = buf.tobytes()
    chunks = b""
    if icc:
        chunks += _png_chunk(b"iCCP", b"ICC Profile\x00\x00" + zlib.compress(icc))
    if dpi:
        ppm = [round(d / 0.0254) for d in dpi]
        chunks += _png_chunk(b"pHYs", struct.pack(">IIB", ppm[0], ppm[1], 1))
    if exif is not None:
        chunks += _png_chunk(b"eXIf", exif.tobytes()[6:])  # PNG stores it without "Exif\0\0"
    if xmp:
        chunks += _png_chunk(b"iTXt", b"XML:com.adobe.xmp\x00\x00\x00\x00\x00" + xmp)
    ihdr_end = 8 + 8 + 13 + 4  # signature, IHDR length+type, IHDR data, CRC
    return png[:ihdr_end] + chunks + png[ihdr_end:]


# TIFF tag numbers used by the writer below.
_T_WIDTH, _T_HEIGHT, _T_BITS, _T_COMPRESSION, _T_PHOTOMETRIC = 256, 257, 258, 259, 262
_T_STRIP_OFFSETS, _T_SAMPLES, _T_ROWS, _T_STRIP_COUNTS, _T_PLANAR = 273, 277, 278, 279, 284
_T_XRES, _T_YRES, _T_RESUNIT, _T_PREDICTOR, _T_EXTRA, _T_SAMPLE_FORMAT = 282, 283, 296, 317, 338, 339
_T_XMP, _T_ICC = 700, 34675
_TIFF_OWN_TAGS = frozenset({254, 256, 257, 258, 259, 262, 273, 277, 278, 279, 284, 317, 338, 339, 700, 34675})


def encode_tiff(
    planes: np.ndarray,
    exif: Image.Exif | None,
    icc: bytes | None,
    xmp: bytes | None,
    dpi: tuple[float, float] | None,
) -> bytes:
    """Baseline little-endian TIFF: deflate + horizontal predictor, ~1 MiB strips, 8 or 16 bits.

    Layout: header, IFD0 (with the EXIF sub-IFD) at offset 8, then the strips.
    """
    arr = planes if planes.ndim == 3 else planes[:, :, None]
    h, w, n = arr.shape
    dt = np.dtype("<u2") if arr.dtype == np.uint16 else np.dtype("u1")
    rows = max(1, (1 << 20) // (w * n * dt.itemsize))
    try:
        strips = [_tiff_strip(arr[y : y + rows].astype(dt)) for y in range(0, h, rows)]
        ifd = _tiff_ifd(arr.shape, dt, rows, strips, exif, icc, xmp, dpi)
        ifd_bytes = ifd.tobytes(8)
    except NotImplementedError:
        # Older Pillow cannot lay out several strip offsets: one strip is valid TIFF too.
        rows = h
        strips = [_tiff_strip(arr.astype(dt))]
        ifd_bytes = _tiff_ifd(arr.shape, dt, rows, strips, exif, icc, xmp, dpi).tobytes(8)
    return b"II*\x00" + struct.pack("<I", 8) + ifd_bytes + b"".join(strips)


def _tiff_ifd(
    shape: tuple[int, ...],
    dt: np.dtype,
    rows: int,
    strips: list[bytes],
    exif: Image.Exif | None,
    icc: bytes | None,
    xmp: bytes | None,
    dpi: tuple[float, float] | None,
) -> TiffImagePlugin.ImageFileDirectory_v2:
    h, w, n = shape
    ifd = TiffImagePlugin.ImageFileDirectory_v2(prefix=b"II")
    if exif is not None:
        _merge_exif(ifd, exif)
    ifd[_T_WIDTH], ifd[_T_HEIGHT] = w, h
    ifd[_T_BITS] = (dt.itemsize * 8,) * n
    ifd[_T_COMPRESSION] = 8  # Adobe deflate
    ifd[_T_PHOTOMETRIC] = 1 if n <= 2 else 2  # min-is-black or RGB
    # Offsets relative to the end of the IFD: Pillow's tobytes() adds that position to them.
    starts = np.concatenate([[0], np.cumsum([len(s) for s in strips])[:-1]])
    ifd[_T_STRIP_OFFSETS] = tuple(int(x) for x in starts)
    ifd.tagtype[_T_STRIP_OFFSETS] = 4  # LONG, even when every value would fit a SHORT
    ifd[_T_SAMPLES] = n
    ifd[_T_ROWS] = rows
    ifd[_T_STRIP_COUNTS] = tuple(len(s) for s in strips)
    ifd.tagtype[_T_STRIP_COUNTS] = 4
    ifd[_T_PLANAR] = 1
    ifd[_T_PREDICTOR] = 2
    ifd[_T_SAMPLE_FORMAT] = (1,) * n
    if n in (2, 4):
        ifd[_T_EXTRA] = (2,)  # unassociated alpha
    if dpi:
        ifd[_T_XRES], ifd[_T_YRES], ifd[_T_RESUNIT] = dpi[0], dpi[1], 2
    if icc:
        ifd[_T_ICC] = icc
    if xmp:
        ifd[_T_XMP] = xmp
    return ifd


def _tiff_strip(block: np.ndarray) -> bytes:
    # TIFF Predictor 2: each sample minus its left neighbour, wrapping like the unsigned type does.
    diff = block.copy()
    diff[:, 1:] -= block[:, :-1]
    return zlib.compress(diff.tobytes(), 6)


def _merge_exif(ifd: TiffImagePlugin.ImageFileDirectory_v2, exif: Image.Exif) -> None:
    """EXIF's IFD0 tags (Make, Model, DateTime... and the Exif/GPS sub-IFDs) into the TIFF's IFD0."""
    for tag, value in exif.items():
        if tag in _TIFF_OWN_TAGS:
            continue
        if tag in (TAG_EXIF_IFD, TAG_GPS_IFD) and not isinstance(value, dict):
            value = exif.get_ifd(tag)
            if not value:
                continue
        ifd[tag] = value


def encode_bmp32(planes: np.ndarray, dpi: tuple[float, float] | None) -> bytes:
    """RGBA (or gray + alpha) as a 32-bit BI_BITFIELDS BMP with a V4 header: the layout whose alpha
    mask readers honour (Pillow's BMP writer stores 32-bit as BI_RGB, where alpha is ignored)."""
    if planes.shape[2] == 2:
        gray, alpha = planes[:, :, 0], planes[:, :, 1]
        planes = np.dstack([gray, gray, gray, alpha])
    h, w = planes.shape[:2]
    # Bottom-up rows of B, G, R, A bytes (masks below); 4 bytes a pixel needs no row padding.
    bgra = np.ascontiguousarray(planes[::-1, :, [2, 1, 0, 3]])
    pixels = bgra.tobytes()
    ppm = [round(d / 0.0254) for d in dpi] if dpi else [0, 0]
    header_size = 108
    offset = 14 + header_size
    info = struct.pack(
        "<IiiHHIIiiII",
        header_size,
        w,
        h,
        1,  # planes
        32,  # bits per pixel
        3,  # BI_BITFIELDS
        len(pixels),
        ppm[0],
        ppm[1],
        0,
        0,
    )
    masks = struct.pack("<IIII", 0x00FF0000, 0x0000FF00, 0x000000FF, 0xFF000000)
    colour_space = struct.pack("<I", 0x73524742)  # LCS_sRGB ("sRGB" read as a little-endian word)
    endpoints_and_gamma = b"\x00" * (36 + 12)
    info += masks + colour_space + endpoints_and_gamma
    file_header = b"BM" + struct.pack("<IHHI", offset + len(pixels), 0, 0, offset)
    return file_header + info + pixels
