"""Encode restored pixels in the chosen format with the input's metadata, into bytes.

What is carried: EXIF (Orientation 1, pixel dimensions updated), ICC profile, XMP, DPI (scaled with
any pre-scale, so the physical print size stays the same), alpha, grayscale-ness, 16-bit depth for
PNG/TIFF. What is not: IPTC (JPEG APP13), PNG text chunks, extra frames/pages.

Writers: Pillow for 8-bit and 16-bit grayscale PNG, JPEG, WebP, AVIF and opaque BMP. Pillow cannot
hold 16-bit colour, nor write a BMP whose alpha readers keep, nor EXIF in TIFF: those are written by
imaging/rawwrite.py.
"""

from __future__ import annotations

import io
import logging
from typing import Any

import cv2
import numpy as np
from PIL import Image, PngImagePlugin

from gpen_watch.imaging.formats import (
    GRAY_MODES,
    TAG_EXIF_IFD,
    TAG_MAKERNOTE,
    TAG_ORIENTATION,
    TAG_PIXEL_X,
    TAG_PIXEL_Y,
)
from gpen_watch.imaging.load import LoadedImage
from gpen_watch.imaging.rawwrite import encode_bmp32, encode_png16_colour, encode_tiff

log = logging.getLogger(__name__)

_JPEG_MAX_EXIF = 65533  # payload of one APP1 segment; Pillow refuses more
# Formats whose files hold an alpha channel as written here.
ALPHA_FORMATS = frozenset({"PNG", "WEBP", "TIFF", "BMP", "AVIF"})


def encode(image: LoadedImage, pixels: np.ndarray, fmt: str, quality: int) -> bytes:
    """``pixels`` (H, W, 3 BGR, uint8/uint16) as a ``fmt`` file with ``image``'s metadata."""
    planes = _planes(image, pixels, fmt)
    size = (planes.shape[1], planes.shape[0])
    exif = _exif_for(image, size, _JPEG_MAX_EXIF if fmt == "JPEG" else None)
    dpi = _dpi_for(image, size[0])
    icc = getattr(image, "icc_profile", None)
    xmp = getattr(image, "xmp", None)
    if fmt == "TIFF":
        return encode_tiff(planes, exif, icc, xmp, dpi)
    if planes.dtype == np.uint16 and planes.ndim == 3:
        return encode_png16_colour(planes, exif, icc, xmp, dpi)
    if fmt == "BMP" and planes.ndim == 3 and planes.shape[2] in (2, 4):
        return encode_bmp32(planes, dpi)
    return _encode_pillow(image, planes, fmt, quality, exif, icc, xmp, dpi)


# --- preparing planes ------------------------------------------------------------------------------


def check_pixels(pixels: np.ndarray) -> None:
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
    elif fmt in ("WEBP", "AVIF"):
        kw["quality"] = quality
        if pil.mode in ("L", "LA"):
            pil = pil.convert("RGBA" if pil.mode == "LA" else "RGB")  # neither has a gray mode
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
