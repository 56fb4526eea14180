"""Encode a restored image in the input's format (or a chosen one), with its metadata, atomically.

What is carried: EXIF (Orientation 1, pixel dimensions updated), ICC profile, XMP, DPI (scaled with
any pre-scale, so the physical print size stays the same), alpha, grayscale-ness, 16-bit depth for
PNG/TIFF. What is not: IPTC (JPEG APP13), PNG text chunks, extra frames/pages.

Writers: Pillow for 8-bit and 16-bit grayscale PNG, JPEG, WebP and BMP. Pillow cannot hold 16-bit
colour, so 16-bit colour PNG is encoded by OpenCV with the metadata chunks added here. TIFF is
written here for every depth because Pillow's TIFF writer drops EXIF.
"""

from __future__ import annotations

import errno
import io
import logging
import os
import secrets
import struct
import zlib
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from PIL import Image, PngImagePlugin, TiffImagePlugin

from gpen_watch.errors import OutboxUnavailable, OutputError
from gpen_watch.fsutil import FOLDER_REFUSES, fsync_dir_quietly, publish_file, remove_quietly
from gpen_watch.imaging.formats import (
    EXPLICIT_FORMATS,
    GRAY_MODES,
    TAG_EXIF_IFD,
    TAG_GPS_IFD,
    TAG_MAKERNOTE,
    TAG_ORIENTATION,
    TAG_PIXEL_X,
    TAG_PIXEL_Y,
)
from gpen_watch.imaging.load import LoadedImage, open_unchanged

log = logging.getLogger(__name__)

# "same" for formats we cannot write faithfully: palette/animation formats -> PNG (lossless, keeps
# alpha); HEIF/AVIF photos -> JPEG (writing them needs optional encoders).
_SAME_FALLBACK = {"HEIF": "JPEG", "HEIC": "JPEG", "AVIF": "JPEG"}
_WRITABLE_SAME = frozenset({"JPEG", "PNG", "WEBP", "TIFF", "BMP"})


_JPEG_MAX_EXIF = 65533  # payload of one APP1 segment; Pillow refuses more


def output_format(source_format: str, requested: str = "same") -> str:
    """Pillow format name save_image writes for this source and request ("same", "jpeg", ...)."""
    req = requested.lower()
    if req != "same":
        if req not in EXPLICIT_FORMATS:
            raise ValueError(f"unknown output format {requested!r}; use same, jpeg, png, webp or tiff")
        return EXPLICIT_FORMATS[req]
    src = "JPEG" if source_format == "MPO" else source_format.upper()
    if src in _WRITABLE_SAME:
        return src
    return _SAME_FALLBACK.get(src, "PNG")


def save_image(
    image: LoadedImage,
    pixels: np.ndarray,
    dst: Path,
    format: str = "same",
    jpeg_quality: int = 95,
    overwrite: bool = False,
) -> Path:
    """Write ``pixels`` (H, W, 3 BGR, uint8/uint16) to ``dst`` with ``image``'s metadata.

    ``image`` is the LoadedImage the pixels came from (any object with its attributes will do).
    The format is chosen by ``output_format(image.format, format)``, never by dst's suffix.
    Alpha is re-attached where the format has it; JPEG has none, so it is dropped (not composited).
    ``jpeg_quality`` is also the WebP quality. Grayscale inputs are written as grayscale.
    The write is atomic (temp file + fsync + rename). An existing dst with different content is
    not replaced unless ``overwrite``; OutputError names the file or folder and the reason.
    """
    dst = Path(dst)
    _check_pixels(pixels)
    fmt = output_format(image.format, format)
    data = _encode(image, pixels, fmt, jpeg_quality)
    return _write_atomic(dst, data, overwrite)


# --- preparing planes ------------------------------------------------------------------------------


def _check_pixels(pixels: np.ndarray) -> None:
    if not isinstance(pixels, np.ndarray) or pixels.ndim != 3 or pixels.shape[2] != 3:
        raise ValueError(
            f"pixels must be an (H, W, 3) BGR array, got {getattr(pixels, 'shape', type(pixels))}"
        )
    if pixels.dtype not in (np.uint8, np.uint16):
        raise ValueError(f"pixels must be uint8 or uint16, got {pixels.dtype}")


def _to_depth(arr: np.ndarray, dtype: type) -> np.ndarray:
    if arr.dtype == dtype:
        return arr
    if dtype == np.uint8:
        return cv2.convertScaleAbs(arr, alpha=1.0 / 257.0)
    return arr.astype(np.uint16) * 257


def _fit_alpha(alpha: np.ndarray | None, pixels: np.ndarray) -> np.ndarray | None:
    """Alpha at the pixels' size and depth (the caller may have resized the image)."""
    if alpha is None:
        return None
    h, w = pixels.shape[:2]
    if alpha.shape[:2] != (h, w):
        alpha = cv2.resize(alpha, (w, h), interpolation=cv2.INTER_LINEAR)
    return _to_depth(alpha, pixels.dtype.type)


def _planes(image: LoadedImage, pixels: np.ndarray, fmt: str) -> np.ndarray:
    """Pixels in writer order: (H, W) gray, (H, W, 2) gray+alpha, (H, W, 3) RGB or (H, W, 4) RGBA."""
    if pixels.dtype == np.uint16 and fmt not in ("PNG", "TIFF"):
        pixels = _to_depth(pixels, np.uint8)  # JPEG/WebP/BMP are 8-bit formats
    alpha = _fit_alpha(image.alpha, pixels) if fmt != "JPEG" else None
    if image.mode in GRAY_MODES and (alpha is None or pixels.dtype == np.uint8):
        # Restored faces come back in colour; a grayscale original stays grayscale. (16-bit gray
        # + alpha goes out as RGBA: Pillow and OpenCV cannot read that TIFF back, nor Pillow write
        # that PNG.)
        gray = cv2.cvtColor(pixels, cv2.COLOR_BGR2GRAY)
        return gray if alpha is None else np.dstack([gray, alpha])
    if image.mode in GRAY_MODES:
        pixels = cv2.cvtColor(cv2.cvtColor(pixels, cv2.COLOR_BGR2GRAY), cv2.COLOR_GRAY2BGR)
    rgb = cv2.cvtColor(pixels, cv2.COLOR_BGR2RGB)
    return rgb if alpha is None else np.dstack([rgb, alpha])


# --- metadata ----------------------------------------------------------------------------------------


def _exif_for(image: LoadedImage, size: tuple[int, int], limit: int | None = None) -> Image.Exif | None:
    raw = getattr(image, "exif", None)
    if not raw:
        return None
    exif = Image.Exif()
    try:
        exif.load(raw)
        if TAG_ORIENTATION in exif:
            exif[TAG_ORIENTATION] = 1
        sub = exif.get_ifd(TAG_EXIF_IFD)  # cached: edits show up in tobytes()
        if TAG_PIXEL_X in sub or TAG_PIXEL_Y in sub:
            sub[TAG_PIXEL_X], sub[TAG_PIXEL_Y] = size
        if limit is not None and len(exif.tobytes()) > limit:
            sub.pop(TAG_MAKERNOTE, None)  # the usual bulk; camera-private anyway
            if len(exif.tobytes()) > limit:
                log.warning("EXIF block too large for JPEG (%d bytes); not written", len(exif.tobytes()))
                return None
    except Exception as exc:  # noqa: BLE001 - bad EXIF must not cost the output
        log.warning("EXIF not carried: %s", exc)
        return None
    return exif


def _dpi_for(image: LoadedImage, width: int) -> tuple[float, float] | None:
    dpi = getattr(image, "dpi", None)
    if not dpi:
        return None
    ratio = width / image.original_size[0] if image.original_size[0] else 1.0
    return dpi[0] * ratio, dpi[1] * ratio


# --- encoders ----------------------------------------------------------------------------------------


def _encode(image: LoadedImage, pixels: np.ndarray, fmt: str, quality: int) -> bytes:
    planes = _planes(image, pixels, fmt)
    size = (planes.shape[1], planes.shape[0])
    exif = _exif_for(image, size, _JPEG_MAX_EXIF if fmt == "JPEG" else None)
    dpi = _dpi_for(image, size[0])
    icc = getattr(image, "icc_profile", None)
    xmp = getattr(image, "xmp", None)
    if fmt == "TIFF":
        return _encode_tiff(planes, exif, icc, xmp, dpi)
    if planes.dtype == np.uint16 and planes.ndim == 3:
        return _encode_png16_colour(planes, exif, icc, xmp, dpi)
    return _encode_pillow(image, planes, fmt, quality, exif, icc, xmp, dpi)


def _encode_pillow(
    image: LoadedImage,
    planes: np.ndarray,
    fmt: str,
    quality: int,
    exif: Image.Exif | None,
    icc: bytes | None,
    xmp: bytes | None,
    dpi: tuple[float, float] | None,
) -> bytes:
    pil = Image.fromarray(planes)  # L, LA, RGB, RGBA or I;16 from shape and dtype
    comment: bytes | None = getattr(image, "comment", None)
    kw: dict[str, Any] = {}
    if exif is not None:
        kw["exif"] = exif
    if icc:
        kw["icc_profile"] = icc
    if dpi and fmt in ("JPEG", "PNG", "BMP"):
        kw["dpi"] = dpi
    if fmt == "JPEG":
        kw["quality"] = quality
        sub = getattr(image, "jpeg_subsampling", None)
        kw["subsampling"] = sub if sub is not None else 0  # 4:4:4 unless the source said otherwise
        if xmp:
            kw["xmp"] = xmp
        if comment:
            kw["comment"] = comment
    elif fmt == "WEBP":
        kw["quality"] = quality
        if pil.mode in ("L", "LA"):
            pil = pil.convert("RGBA" if pil.mode == "LA" else "RGB")  # WebP has no gray mode
        if xmp:
            kw["xmp"] = xmp
    elif fmt == "PNG" and (xmp or comment):
        info = PngImagePlugin.PngInfo()
        if xmp:
            info.add_itxt("XML:com.adobe.xmp", xmp.decode("utf-8", "replace"))
        if comment:
            # PNG's registered keyword for it; tEXt when Latin-1 will do, else iTXt.
            info.add_text("Comment", comment.decode("utf-8", "replace"))
        kw["pnginfo"] = info
    elif fmt == "BMP":
        kw.pop("exif", None)
        kw.pop("icc_profile", None)
    buf = io.BytesIO()
    pil.save(buf, fmt, **kw)
    return buf.getvalue()


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _encode_png16_colour(
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


def _encode_tiff(
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


# --- atomic write ------------------------------------------------------------------------------------


def _write_atomic(dst: Path, data: bytes, overwrite: bool) -> Path:
    folder = dst.parent
    if dst.is_dir():
        raise OutputError(f"{dst}: is a directory; cannot write the output there")
    if not overwrite and _same_content(dst, data):
        return dst  # a re-run produced the identical file: nothing to do
    tmp = folder / f".{dst.name}.tmp-{secrets.token_hex(4)}"
    try:
        _write_synced(tmp, data)
        _publish(tmp, dst, data, overwrite)
    except BaseException as exc:
        remove_quietly(tmp)
        if isinstance(exc, OSError):
            raise write_error(dst, exc) from exc
        raise
    fsync_dir_quietly(folder)
    return dst


def _write_synced(tmp: Path, data: bytes) -> None:
    # O_EXCL: never follow a planted file/symlink; 0o666 so the umask decides permissions, as for
    # any file the user creates (tempfile's 0o600 would hide outputs from other accounts).
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _publish(tmp: Path, dst: Path, data: bytes, overwrite: bool) -> None:
    try:
        publish_file(tmp, dst, overwrite=overwrite)
    except FileExistsError:
        # Appeared meanwhile: the same bytes (a concurrent re-run) are fine, anything else is not ours.
        if not _same_content(dst, data):
            raise OutputError(f"{dst}: a different file already exists; not overwritten") from None


def _same_content(path: Path, data: bytes) -> bool:
    try:
        if path.stat().st_size != len(data):
            return False
        return path.read_bytes() == data
    except OSError:
        return False


def copy_source(image: LoadedImage, src: Path, dst: Path) -> str | None:
    """Write ``dst`` as a byte copy of ``src``, if ``src`` is still the file ``image`` was decoded
    from. None when copied; else why not (the source changed, went or could not be read), with
    nothing left at ``dst``: the caller then encodes the pixels it has, so a bad sector or a link
    swapped in is never copied and never taken for trouble with the output folder. Failing writes
    raise ``write_error``'s error, as save_image's do."""
    fin = open_unchanged(src, image.source_id)
    if fin is None:
        return "the original changed after it was read; written from the pixels read then"
    unreadable: str | None = None
    with fin:
        try:
            with open(dst, "xb") as fout:
                while True:
                    try:
                        chunk = fin.read(1 << 20)
                    except OSError as exc:
                        unreadable = exc.strerror or str(exc)
                        break
                    if not chunk:
                        break
                    fout.write(chunk)
                if unreadable is None:
                    fout.flush()
                    os.fsync(fout.fileno())
        except OSError as exc:
            if not isinstance(exc, FileExistsError):
                remove_quietly(dst)
            raise write_error(dst, exc) from exc
    if unreadable is not None:
        remove_quietly(dst)
        return f"could not read the original again ({unreadable}); re-encoded instead"
    return None


_REASONS = {
    errno.ENOSPC: "disk full",
    getattr(errno, "EDQUOT", -1): "disk quota exceeded",  # absent on Windows
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EROFS: "read-only file system",
    errno.ENOENT: "folder does not exist",
    errno.ENAMETOOLONG: "file name too long",
}


def write_error(dst: os.PathLike[str] | str, exc: OSError) -> OutputError:
    """The error to raise when writing ``dst`` failed with ``exc``: OutboxUnavailable when the folder
    refuses writes (full, read-only, gone, no permission), so the caller can hold the photo rather
    than fail it; a plain OutputError otherwise (name too long...)."""
    dst = Path(dst)
    cls = OutboxUnavailable if exc.errno in FOLDER_REFUSES else OutputError
    return cls(f"cannot write {dst.name} in {dst.parent}: {_os_reason(exc)}")


def _os_reason(exc: OSError) -> str:
    return _REASONS.get(exc.errno or 0, exc.strerror or str(exc))
