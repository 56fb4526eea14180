"""Pixels as a person looks at them in a browser: 8-bit sRGB JPEG. The dashboard's previews (made
by the worker) and its crops of real pixels (made by the service on request) are both encoded
here, so the two show a photo in the same colours: pixels in another colour space are converted
through their ICC profile first."""

from __future__ import annotations

import io

import cv2
import numpy as np
from PIL import Image


def srgb_jpeg(bgr: np.ndarray, icc: bytes | None, quality: int) -> bytes:
    """``bgr`` (8-bit, in the colour space ``icc`` describes; None: sRGB) as an sRGB JPEG."""
    if not icc:
        ok, buf = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, quality])
        if not ok:
            raise ValueError("JPEG encoding failed")
        return bytes(buf.tobytes())
    im = to_srgb(Image.fromarray(np.ascontiguousarray(bgr[:, :, ::-1])), icc)
    out = io.BytesIO()
    im.save(out, "JPEG", quality=quality)
    return out.getvalue()


def to_srgb(im: Image.Image, icc: bytes) -> Image.Image:
    """``im`` converted from the colour space ``icc`` describes to sRGB; as it is when that cannot
    be done (no ImageCms, an unusable profile)."""
    try:
        from PIL import ImageCms

        srgb = ImageCms.createProfile("sRGB")
        converted = ImageCms.profileToProfile(im, ImageCms.ImageCmsProfile(io.BytesIO(icc)), srgb)
    except Exception:  # noqa: BLE001 - no ImageCms or an unusable profile: the pixels as they are
        return im
    return converted if converted is not None else im
