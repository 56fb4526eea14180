"""What an image carries besides its pixels, read so the result can carry it too: EXIF (with the
orientation taken out once applied), XMP, ICC, DPI, the JPEG comment, quality and subsampling."""

from __future__ import annotations

import logging
import re
from typing import Any

from PIL import Image

from gpen_watch.imaging.formats import TAG_ORIENTATION, display_name

log = logging.getLogger(__name__)

# Tags that describe a TIFF file's own pixel layout (or are carried separately: ICC 34675, XMP 700).
# A TIFF's getexif() returns them with the camera tags; copied into another file they would lie.
_TIFF_LAYOUT_TAGS = frozenset(
    {254, 255, 256, 257, 258, 259, 262, 263, 266, 269, 273, 277, 278, 279, 280, 281, 282, 283, 284, 285, 296,
     297, 317, 318, 319, 320, 322, 323, 324, 325, 330, 338, 339, 340, 341, 347, 513, 514, 529, 530, 531, 532,
     700, 33723, 34377, 34675}
)  # fmt: skip


def note_frames(im: Image.Image, fmt: str, notes: list[str]) -> int:
    """How many frames (pages, pictures) the file holds; notes that only the first is restored."""
    first = im.tell()  # 0, but 1 for a PSD (its layers are frames 1...; 0 is no frame of it)
    try:
        frames = int(getattr(im, "n_frames", 1) or 1)
    except Exception:  # noqa: BLE001 - a broken later frame must not cost the first one
        notes.append(f"{display_name(fmt)}: later frames are unreadable; only the first was restored")
        if im.tell() != first:
            im.seek(first)
        return 2
    if frames <= 1:
        return 1
    if im.format == "MPO":
        notes.append(
            f"multi-picture JPEG (MPO) with {frames} pictures: the primary picture was restored and "
            "written as a plain JPEG; the others (previews, a second view) are not in the output"
        )
    else:
        what = "pages" if fmt == "TIFF" else "frames"
        notes.append(
            f"{display_name(fmt)} has {frames} {what}; only the first was restored, and the output "
            "holds that one only"
        )
    return frames


def read_exif(im: Image.Image, fmt: str, sixteen_bit: bool, notes: list[str]) -> Image.Exif | None:
    if fmt == "PNG" and "exif" not in im.info:
        if sixteen_bit:
            return None  # an eXIf chunk after the pixels would cost an extra 8-bit decode to find
        # Pillow's PNG getexif() decodes the image to reach chunks after the pixels. Do it here,
        # outside the try below: a decode error must refuse the image, not merely drop its EXIF
        # (after some failures Pillow's next load() returns the partial image without an error).
        im.load()
    try:
        exif = im.getexif()
        if fmt == "TIFF":
            for tag in _TIFF_LAYOUT_TAGS & set(exif.keys()):
                del exif[tag]
    except Exception as exc:  # noqa: BLE001 - broken EXIF must not cost the photo
        log.info("EXIF unreadable: %s", exc)
        notes.append("EXIF data damaged; not carried to the output (the photo itself is fine)")
        return None
    return exif if len(exif) else None


def exif_orientation(exif: Image.Exif | None) -> int:
    value = exif.get(TAG_ORIENTATION, 1) if exif is not None else 1
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


def exif_bytes(exif: Image.Exif | None) -> bytes | None:
    if exif is None:
        return None
    if TAG_ORIENTATION in exif:
        exif[TAG_ORIENTATION] = 1  # pixels are already upright
    try:
        return exif.tobytes()
    except Exception:  # noqa: BLE001 - an unwritable tag: drop the block rather than the photo
        return None


def reset_xmp_orientation(xmp: bytes | str | None) -> bytes | None:
    if not xmp:
        return None
    data = xmp.encode("utf-8") if isinstance(xmp, str) else bytes(xmp)
    data = re.sub(rb'tiff:Orientation="\d"', b'tiff:Orientation="1"', data)
    return re.sub(
        rb"<tiff:Orientation>\d</tiff:Orientation>", b"<tiff:Orientation>1</tiff:Orientation>", data
    )


def source_info(im: Image.Image, fmt: str) -> dict[str, Any]:
    info = im.info
    dpi = info.get("dpi")
    out: dict[str, Any] = {
        "icc_profile": info.get("icc_profile") or None,
        "xmp": info.get("xmp"),
        # Writers put 1 (or 0) dpi where the resolution is unknown; do not carry that.
        "dpi": (float(dpi[0]), float(dpi[1])) if dpi and dpi[0] > 1 and dpi[1] > 1 else None,
        "jpeg_quality": None,
        "jpeg_subsampling": None,
        "comment": None,
    }
    if fmt == "JPEG":
        out["comment"] = info.get("comment") or None
        from PIL import JpegImagePlugin

        out["jpeg_quality"] = estimate_jpeg_quality(getattr(im, "quantization", None))
        sampling = JpegImagePlugin.get_sampling(im)
        out["jpeg_subsampling"] = sampling if sampling >= 0 else None
    return out


# IJG standard luminance table (Annex K); its sum is order-independent, so zigzag vs natural order
# does not matter.
_STD_LUMA_SUM = sum(
    [16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69, 56,
     14, 17, 22, 29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113, 92,
     49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99]
)  # fmt: skip


def estimate_jpeg_quality(tables: dict[int, list[int]] | None) -> int | None:
    """Invert IJG quality scaling from the luminance table (exact for libjpeg encoders, rough otherwise)."""
    if not tables or 0 not in tables:
        return None
    if max(tables[0]) == 1:
        return 100
    percent = 100.0 * sum(tables[0]) / _STD_LUMA_SUM  # IJG "scale factor" in percent
    quality = (200.0 - percent) / 2.0 if percent <= 100.0 else 5000.0 / percent
    return int(min(100, max(1, round(quality))))
