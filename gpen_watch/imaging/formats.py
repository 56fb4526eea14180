"""What gpen-watch knows about image formats by name, without importing Pillow or OpenCV: the
extensions it reads, the ones it refuses, the suffix of each format it writes, and the EXIF tags
it reads and edits. The parent daemon uses it to classify arrivals; imaging's loader and writer
use it so the tables exist once.
"""

from __future__ import annotations

SUPPORTED_EXTENSIONS: frozenset[str] = frozenset(
    {
        ".jpg", ".jpeg", ".jpe", ".jfif",
        ".png", ".webp", ".tif", ".tiff", ".bmp", ".gif",
        ".heic", ".heif", ".avif",
    }
)  # fmt: skip

# TIFF-based camera RAW files open in Pillow as their small embedded preview; restoring that
# thumbnail silently would be wrong, so they are refused by name before decoding.
RAW_EXTENSIONS = frozenset(
    {
        ".cr2",
        ".cr3",
        ".nef",
        ".nrw",
        ".arw",
        ".srf",
        ".sr2",
        ".dng",
        ".orf",
        ".rw2",
        ".raf",
        ".pef",
        ".srw",
        ".x3f",
    }
)

# Pillow modes of one channel (and LA: gray with alpha).
GRAY_MODES = frozenset({"1", "L", "LA", "La", "I", "I;16", "I;16B", "I;16L", "I;16N"})

# output.format (and --format) -> the Pillow format written.
EXPLICIT_FORMATS = {
    "jpeg": "JPEG",
    "jpg": "JPEG",
    "png": "PNG",
    "webp": "WEBP",
    "tiff": "TIFF",
    "tif": "TIFF",
}

OUTPUT_SUFFIXES = {"JPEG": ".jpg", "PNG": ".png", "WEBP": ".webp", "TIFF": ".tif", "BMP": ".bmp"}
# Other spellings users have for the same formats; a name keeps its own when it already fits.
SUFFIX_ALIASES = {"JPEG": (".jpeg", ".jpe", ".jfif"), "TIFF": (".tiff",)}

# EXIF tags (TIFF tag numbers) read or edited when metadata is carried to a result.
TAG_ORIENTATION = 0x0112
TAG_EXIF_IFD = 0x8769
TAG_GPS_IFD = 0x8825
TAG_MAKERNOTE = 0x927C
TAG_PIXEL_X, TAG_PIXEL_Y = 0xA002, 0xA003


def matching_suffix(fmt: str, suffix: str) -> str:
    """``suffix`` if it names format ``fmt`` (as written by save_image), else the usual one.

    A PNG that arrived named ``.jpg`` is written as PNG, so its result must be named ``.png``.
    """
    if suffix.lower() == OUTPUT_SUFFIXES[fmt] or suffix.lower() in SUFFIX_ALIASES.get(fmt, ()):
        return suffix
    return OUTPUT_SUFFIXES[fmt]
