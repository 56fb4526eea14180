"""Pixels of an identified image: OpenCV for YCbCr/gray JPEGs (with DCT-domain downscaling) and
16-bit colour PNG/TIFF (Pillow keeps only 8 bits of those), Pillow for everything else; CMYK
through its ICC profile, orientation applied, pre-scaling with INTER_AREA."""

from __future__ import annotations

import io
import logging
import struct
from collections.abc import Callable
from pathlib import Path
from typing import IO

import cv2
import numpy as np
from PIL import Image

from gpen_watch.imaging.errors import UnsupportedFormatError
from gpen_watch.imaging.formats import TAG_ORIENTATION

log = logging.getLogger(__name__)


def decode_pixels(
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
        pixels, alpha = _decode_16bit_colour(fh, fmt, im)
        return pixels, alpha, header_icc
    if fmt == "HEIF" and int(im.info.get("bit_depth") or 8) > 8:
        pixels, alpha = _decode_heif_deep(fh, int(im.info["bit_depth"]), notes)
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


def target_size(size: tuple[int, int], max_side: int) -> tuple[int, int] | None:
    w, h = size
    if max_side <= 0 or max(w, h) <= max_side:
        return None
    s = max_side / max(w, h)
    return max(1, round(w * s)), max(1, round(h * s))


def is_16bit_colour(im: Image.Image) -> bool:
    """Pillow opens 16-bit RGB(A)/LA PNG and TIFF but keeps only 8 bits; OpenCV keeps 16."""
    # ImageFile.tile: what the decoder will do; the base Image class (the stubs' type) has none.
    tile = getattr(im, "tile", None) or []
    # Only colour OpenCV reads as such: 16-bit CMYK, LAB or YCbCr TIFFs are Pillow's (8-bit) job.
    if im.mode not in ("RGB", "RGBA", "LA") or im.format not in ("PNG", "TIFF") or len(tile) == 0:
        return False
    args = tile[0].args
    rawmode = args[0] if isinstance(args, tuple) else args
    return isinstance(rawmode, str) and ";16" in rawmode


def _decode_16bit_colour(fh: IO[bytes], fmt: str, im: Image.Image) -> tuple[np.ndarray, np.ndarray | None]:
    fh.seek(0)
    raw = bytearray(fh.read())
    if fmt == "TIFF":
        # OpenCV's TIFF reader half-applies the Orientation tag even with IMREAD_UNCHANGED (seen
        # with OpenCV 5.0): hand it the stored layout and rotate here as for every other format.
        _neutralise_tiff_orientation(raw)
    # IMREAD_UNCHANGED keeps 16 bits and alpha (and ignores a PNG's EXIF orientation).
    arr = cv2.imdecode(np.frombuffer(raw, np.uint8), cv2.IMREAD_UNCHANGED)
    if arr is None or arr.dtype != np.uint16:
        # OpenCV says nothing of why; Pillow's decoder (8 bits kept) names truncation or damage.
        im.load()
        raise OSError("16-bit image data that OpenCV cannot decode")
    if arr.ndim == 2:
        arr = cv2.cvtColor(arr, cv2.COLOR_GRAY2BGR)
    if arr.shape[2] == 4:
        return np.ascontiguousarray(arr[:, :, :3]), np.ascontiguousarray(arr[:, :, 3])
    return arr, None


def _decode_heif_deep(fh: IO[bytes], bits: int, notes: list[str]) -> tuple[np.ndarray, np.ndarray | None]:
    """A 10- or 12-bit HEIC (iPhone HDR photos) at 16 bits: pillow-heif's Pillow opener hands
    Pillow 8 bits, its own reader keeps the depth (scaled to the 16-bit range)."""
    import pillow_heif

    fh.seek(0)
    heif = pillow_heif.open_heif(fh, convert_hdr_to_8bit=False)
    arr = np.asarray(heif)
    if arr.dtype != np.uint16 or arr.ndim != 3:
        raise OSError("HEIF data that libheif would not give at full depth")
    notes.append(f"{bits}-bit HEIC read at full depth")
    bgr = cv2.cvtColor(np.ascontiguousarray(arr[:, :, :3]), cv2.COLOR_RGB2BGR)
    alpha = np.ascontiguousarray(arr[:, :, 3]) if arr.shape[2] == 4 else None
    return bgr, alpha


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
    rawmode = _rawmode(im)
    im.load()  # raises on truncated data: ImageFile.LOAD_TRUNCATED_IMAGES stays False
    mode = im.mode
    icc = im.info.get("icc_profile") or None
    if mode in ("CMYK", "LAB"):
        if ";16" in rawmode:
            notes.append(f"16-bit {mode} read at 8 bits per channel (the colour conversion works at 8 bits)")
        im, icc = _to_rgb(im, icc, notes)
    elif mode == "F":
        im = _float_to_16bit(im, path, notes)
    elif mode in ("P", "PA", "RGB", "L", "1") and _has_transparency(im):
        im = im.convert("LA" if mode in ("L", "1") else "RGBA")  # tRNS / palette alpha -> real alpha
    elif mode == "P":
        im = im.convert("RGB")
    elif mode == "1":
        im = im.convert("L")
    elif mode in ("La", "RGBa"):
        im = im.convert("LA" if mode == "La" else "RGBA")  # premultiplied -> straight alpha
    elif mode not in ("L", "LA", "RGB", "RGBA") and not mode.startswith("I"):
        if mode == "HSV":
            icc = None  # a profile would describe RGB, not these samples
        try:
            im = im.convert("RGB")  # YCbCr, HSV, RGBX... (a YCbCr file's profile is its RGB's)
        except ValueError as exc:
            raise UnsupportedFormatError(
                path,
                f"its colour mode ({mode}) cannot be converted to RGB on this machine; "
                "save it as RGB in an image editor",
            ) from exc

    if im.mode.startswith("I"):
        samples = np.asarray(im)
        return _gray16_to_bgr(samples, notes), _key_alpha(samples, im.info.get("transparency")), icc
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


def _key_alpha(samples: np.ndarray, key: object) -> np.ndarray | None:
    """16-bit alpha for deep gray whose transparency is one sample value (a PNG tRNS chunk):
    Pillow keeps the key in ``info`` but has no 16-bit gray + alpha mode to convert to."""
    if not isinstance(key, int):
        return None
    return np.where(samples == key, 0, 65535).astype(np.uint16)


def _rawmode(im: Image.Image) -> str:
    tile = getattr(im, "tile", None) or []
    args = tile[0].args if tile else None
    raw = args[0] if isinstance(args, tuple) and args else args
    return raw if isinstance(raw, str) else ""


def _gray16_to_bgr(arr: np.ndarray, notes: list[str]) -> np.ndarray:
    """Gray samples of any integer type (I;16, I;16B, I;16L, 32-bit I) as 16-bit BGR."""
    if arr.dtype.kind in "iu" and arr.dtype.itemsize > 2 and (arr.min() < 0 or arr.max() > 65535):
        # Wider than 16 bits: the whole range scaled into 16 bits rather than its highlights clipped.
        low, high = min(int(arr.min()), 0), int(arr.max())
        notes.append("32-bit integer samples scaled to 16 bits")
        arr = (arr.astype(np.float64) - low) * (65535.0 / max(high - low, 1))
    gray = np.clip(arr, 0, 65535).astype(np.uint16)
    return cv2.cvtColor(np.ascontiguousarray(gray), cv2.COLOR_GRAY2BGR)


def _float_to_16bit(im: Image.Image, path: Path, notes: list[str]) -> Image.Image:
    """A floating-point (mode F) gray image as 16-bit. Samples in 0..1 (the usual convention) keep
    their brightness; any other range (0..255 in PFM and SPIDER files made from 8-bit images, HDR
    radiance, signed CT or phase data) is scaled the way 32-bit integer samples are: zero (or the
    lowest sample, if negative) to black, the highest to white. Only samples that are not numbers
    (NaN, infinity) are refused, naming the mode."""
    arr = np.asarray(im, dtype=np.float64)
    if not np.isfinite(arr).all():
        raise UnsupportedFormatError(
            path,
            "its 32-bit floating-point samples (mode F: an HDR or scientific image) include values that "
            "are not numbers (NaN or infinity), so how bright they are meant to be is unknown; "
            "export it as a 16-bit TIFF or PNG",
        )
    low, high = min(float(arr.min()), 0.0), float(arr.max())
    if low == 0.0 and high <= 1.0:
        notes.append("32-bit floating-point samples (0..1) converted to 16 bits")
        return Image.fromarray(np.round(arr * 65535.0).astype(np.uint16))
    notes.append(f"32-bit floating-point samples ({low:.4g} to {high:.4g}) scaled to 16 bits")
    scaled = (arr - low) * (65535.0 / (high - low))
    return Image.fromarray(np.round(scaled).astype(np.uint16))


def _to_rgb(im: Image.Image, icc: bytes | None, notes: list[str]) -> tuple[Image.Image, bytes | None]:
    """CMYK or LAB -> RGB through the embedded ICC profile when LittleCMS can use it, else with
    Pillow's own formula (naive for CMYK, D50 CIELAB for LAB).

    The returned profile describes the new RGB pixels: sRGB after a managed conversion, none after
    the other one (the CMYK or LAB profile no longer applies).
    """
    mode = im.mode
    if icc:
        try:
            from PIL import ImageCms

            srgb = ImageCms.createProfile("sRGB")
            rgb = ImageCms.profileToProfile(
                im, ImageCms.ImageCmsProfile(io.BytesIO(icc)), srgb, outputMode="RGB"
            )
            if rgb is None:  # only None when converting in place, which is not asked for here
                raise ValueError("profile conversion returned nothing")
            notes.append(f"{mode} converted to sRGB using the embedded ICC profile")
            return rgb, ImageCms.ImageCmsProfile(srgb).tobytes()
        except Exception as exc:  # noqa: BLE001 - ImageCms missing or profile unusable: fall back
            log.info("%s ICC profile unusable (%s); converting without it", mode, exc)
            notes.append(f"{mode} converted to RGB without colour management (its ICC profile is unusable)")
            return im.convert("RGB"), None
    if mode == "CMYK":
        notes.append("CMYK converted to RGB without colour management (no ICC profile embedded)")
    return im.convert("RGB"), None


# Orientation tag -> operation that makes the stored pixels upright (same as ImageOps.exif_transpose).
def apply_orientation(
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


def resize(
    pixels: np.ndarray, alpha: np.ndarray | None, size: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray | None]:
    # INTER_AREA: the anti-aliased choice for shrinking (INTER_LINEAR aliases; docs/benchmarks.md).
    pixels = cv2.resize(pixels, size, interpolation=cv2.INTER_AREA)
    if alpha is not None:
        alpha = cv2.resize(alpha, size, interpolation=cv2.INTER_AREA)
    return pixels, alpha


def to_8bit(pixels: np.ndarray) -> np.ndarray:
    if pixels.dtype == np.uint8:
        return pixels
    # 65535 / 257 = 255 exactly; convertScaleAbs rounds and saturates in one pass.
    return cv2.convertScaleAbs(pixels, alpha=1.0 / 257.0)
