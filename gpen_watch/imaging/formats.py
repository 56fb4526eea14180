"""What gpen-watch knows about image formats by name, without importing Pillow or OpenCV: the
extensions of the formats it reads, the names that are never photos, the suffix of each format it
writes, and the EXIF tags it reads and edits. The parent daemon uses it to classify arrivals; imaging's loader and writer
use it so the tables exist once.
"""

from __future__ import annotations

# Extensions of the image formats imaging decodes (Pillow with pillow-heif). Acceptance is by
# content, not by this list: it names what `gpen-watch restore FOLDER` picks up and which hidden
# ".name" files are reported as likely photos. The watcher takes any name not in DENIED_EXTENSIONS.
SUPPORTED_EXTENSIONS: frozenset[str] = frozenset(
    {
        ".jpg", ".jpeg", ".jpe", ".jfif", ".jif", ".mpo",
        ".png", ".apng", ".webp", ".tif", ".tiff", ".bmp", ".dib", ".gif",
        ".heic", ".heif", ".hif", ".avif",
        ".jp2", ".j2k", ".j2c", ".jpc", ".jpf", ".jpx",
        ".psd", ".tga", ".icb", ".vda", ".vst",
        ".ppm", ".pgm", ".pbm", ".pnm", ".pam",
        ".ico", ".cur", ".icns", ".qoi", ".dds", ".sgi", ".rgb", ".rgba", ".bw",
        ".pcx", ".dcx", ".ras", ".sun", ".xbm", ".xpm", ".blp", ".msp", ".im", ".pcd", ".pxr",
        ".fpx", ".mic", ".gd", ".wal",
    }
)  # fmt: skip

# Names that are never a photo: text, documents, archives, audio and video, programs, and the
# sidecar files cameras and editors write beside photos. The watcher sets them aside by name
# without reading them; every other name is decided by its content.
DENIED_EXTENSIONS: frozenset[str] = frozenset(
    {
        ".txt", ".md", ".rtf", ".csv", ".tsv", ".json", ".xml", ".html", ".htm", ".log", ".ini",
        ".cfg", ".conf", ".yaml", ".yml", ".toml",
        ".pdf", ".doc", ".docx", ".xls", ".xlsx", ".ppt", ".pptx", ".odt", ".ods", ".odp", ".pages",
        ".numbers", ".key", ".epub",
        ".zip", ".7z", ".rar", ".tar", ".gz", ".tgz", ".bz2", ".xz", ".zst", ".lz", ".cab",
        ".mp4", ".m4v", ".mov", ".avi", ".mkv", ".webm", ".wmv", ".mts", ".m2ts", ".3gp", ".mpg",
        ".mpeg", ".mp3", ".wav", ".flac", ".aac", ".m4a", ".ogg", ".opus", ".wma", ".aiff",
        ".exe", ".msi", ".dll", ".so", ".dylib", ".dmg", ".iso", ".apk", ".app", ".bat", ".cmd",
        ".sh", ".ps1", ".py", ".js",
        ".xmp", ".aae", ".thm", ".pp3", ".dop", ".on1", ".lrcat", ".lrdata", ".db", ".sqlite",
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
GRAY_MODES = frozenset({"1", "L", "LA", "La", "I", "I;16", "I;16B", "I;16L", "I;16N", "F"})

# output.format (and --format) -> the Pillow format written.
EXPLICIT_FORMATS = {
    "jpeg": "JPEG",
    "jpg": "JPEG",
    "png": "PNG",
    "webp": "WEBP",
    "tiff": "TIFF",
    "tif": "TIFF",
}

OUTPUT_SUFFIXES = {
    "JPEG": ".jpg",
    "PNG": ".png",
    "WEBP": ".webp",
    "TIFF": ".tif",
    "BMP": ".bmp",
    "AVIF": ".avif",
}
# The largest side, in pixels, each written format can hold (the others hold more than a photo has).
MAX_SIDES = {"WEBP": 16383, "JPEG": 65535}
# Other spellings users have for the same formats; a name keeps its own when it already fits.
SUFFIX_ALIASES = {"JPEG": (".jpeg", ".jpe", ".jfif", ".jif"), "TIFF": (".tiff",)}

# EXIF tags (TIFF tag numbers) read or edited when metadata is carried to a result.
TAG_ORIENTATION = 0x0112
TAG_EXIF_IFD = 0x8769
TAG_GPS_IFD = 0x8825
TAG_MAKERNOTE = 0x927C
TAG_PIXEL_X, TAG_PIXEL_Y = 0xA002, 0xA003


# Pillow's format names as users know them (the rest read well as they are: JPEG, PNG, TIFF...).
_DISPLAY_NAMES = {
    "WEBP": "WebP",
    "JPEG2000": "JPEG 2000",
    "HEIF": "HEIC/HEIF",
    "PPM": "PNM (PPM/PGM/PBM)",
    "SUN": "Sun raster",
    "MPO": "multi-picture JPEG (MPO)",
    "FLI": "FLI/FLC animation",
    "FPX": "FlashPix (FPX)",
    "MIC": "Microsoft Image Composer (MIC)",
    "MSP": "Microsoft Paint (MSP)",
    "GD": "GD image",
    "WAL": "Quake 2 texture (WAL)",
    "XVTHUMB": "XV thumbnail",
}


def display_name(fmt: str) -> str:
    """A format as the user knows it, for the sentences they read."""
    return _DISPLAY_NAMES.get(fmt.upper(), fmt.upper())


def matching_suffix(fmt: str, suffix: str) -> str:
    """``suffix`` if it names format ``fmt`` (as written by save_image), else the usual one.

    A PNG that arrived named ``.jpg`` is written as PNG, so its result must be named ``.png``.
    """
    if suffix.lower() == OUTPUT_SUFFIXES[fmt] or suffix.lower() in SUFFIX_ALIASES.get(fmt, ()):
        return suffix
    return OUTPUT_SUFFIXES[fmt]


def denied_name(name: str) -> bool:
    """Whether a file called ``name`` is never a photo (its content is not looked at)."""
    dot = name.rfind(".")
    return dot > 0 and name[dot:].lower() in DENIED_EXTENSIONS
