"""The sentence a user reads when a recognised image cannot be decoded: damaged (cut short or
corrupt) or valid but using a feature this machine's decoders lack (named), never a decoder's own
words ("decoder error -2", Pillow constants, Pillow's pixel limit).

Pillow says what went wrong only in its exception text, so that text is matched here, once; what
reaches the user is always one of the sentences below.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

from gpen_watch.imaging.errors import (
    BrokenImageError,
    DecoderBugError,
    ImageInputError,
    ImageTooLargeError,
    UnsupportedFormatError,
)
from gpen_watch.imaging.formats import display_name

# What decoders raise for data they cannot decode: a cut or corrupt file, or a variant they lack.
# KeyError and ArithmeticError too: a plugin looks a value of the file up in its tables, or divides
# by one, without checking it first. Anything else (TypeError, AttributeError...) says nothing of
# the file: a bug of gpen-watch or of a library (``decoder_bug``).
DATA_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    SyntaxError,
    ValueError,
    EOFError,
    struct.error,
    IndexError,
    KeyError,
    ArithmeticError,
    NotImplementedError,
)

RECOPY = "copy it again from the original"
RESAVE = "open it in an image editor and save it again (as JPEG, PNG or TIFF)"

# TIFF Compression tag values that a stock libtiff decodes (baseline, LZW, JPEG, deflate, PackBits,
# CCITT). Anything else is a codec a build may lack; those we know get their name in the reason.
_TIFF_BASELINE_COMPRESSION = frozenset({1, 2, 3, 4, 5, 6, 7, 8, 32773, 32946})
_TIFF_COMPRESSION_NAMES = {
    34661: "JBIG",
    34712: "JPEG 2000",
    34887: "LERC",
    34925: "LZMA",
    50000: "Zstandard (ZSTD)",
    50001: "WebP",
    50002: "JPEG XL",
    52546: "JPEG XL",
    65000: "Kodak DCR",
}

_BMP_COMPRESSION_NAMES = {4: "an embedded JPEG image", 5: "an embedded PNG image"}


def tiff_compression_feature(compression: object) -> str | None:
    """The name of a TIFF compression scheme this machine may not decode, or None for the usual ones."""
    if not isinstance(compression, int) or compression in _TIFF_BASELINE_COMPRESSION:
        return None
    return _TIFF_COMPRESSION_NAMES.get(compression, f"compression scheme {compression}") + " compression"


def truncated(path: Path, fmt: str) -> BrokenImageError:
    name = display_name(fmt)
    return BrokenImageError(path, f"truncated {name}: the file ends before its image data does; {RECOPY}")


def damaged(path: Path, fmt: str, what: str = "image data") -> BrokenImageError:
    return BrokenImageError(
        path,
        f"damaged {display_name(fmt)}: its {what} cannot be decoded (corrupt file); {RECOPY}, or {RESAVE}",
    )


def decoder_bug(path: Path, exc: BaseException) -> DecoderBugError:
    """An exception that is not the file's fault (``load``: not one a decoder raises for bad data)."""
    return DecoderBugError(
        path,
        f"gpen-watch could not decode it: {type(exc).__name__}: {exc}; this is a bug in gpen-watch or "
        "a library, not a fault of the file (the log has the details); please report it",
    )


def unreadable_here(path: Path, fmt: str) -> UnsupportedFormatError:
    """A file whose structure checks out whole (``structure.well_formed``) that the decoder here
    still fails on: its limitation, not damage."""
    name = display_name(fmt)
    return UnsupportedFormatError(
        path,
        f"this {name} is intact (its parts add up to the whole file), but the image decoder here "
        f"cannot read it; convert it to PNG with another program (ffmpeg or an image editor, for "
        "example) and drop that instead",
    )


def missing_feature(path: Path, fmt: str, feature: str, remedy: str = RESAVE) -> UnsupportedFormatError:
    return UnsupportedFormatError(
        path, f"this {display_name(fmt)} uses {feature}, which this machine cannot decode; {remedy}"
    )


def too_large_part(path: Path, pixels: int, max_megapixels: float) -> ImageTooLargeError:
    return ImageTooLargeError(
        path,
        f"a frame or tile inside the file declares {pixels / 1e6:.0f} MP, over the {max_megapixels:g} MP "
        "limit (a damaged or crafted file, or a very large image); raise the restore.max_megapixels "
        "setting to restore it",
    )


_VARIANT = re.compile(r"(?:unsupported|unimplemented|unknown)\s+([\w .,;:()#/+'\"-]{3,60})$", re.IGNORECASE)
_BOMB_PIXELS = re.compile(r"Image size \((\d+) pixels\)")


def bomb_pixels(exc: BaseException) -> int:
    """The pixel count in Pillow's DecompressionBombError (0 if it does not say)."""
    found = _BOMB_PIXELS.search(str(exc))
    return int(found.group(1)) if found else 0


def explain(
    path: Path,
    fmt: str,
    exc: BaseException,
    *,
    header: bool,
    tiff_compression: object = None,
    ran_out: bool = False,
) -> ImageInputError:
    """Why an image identified as ``fmt`` could not be opened (``header``) or decoded.

    ``ran_out``: a read of the file came up short, the evidence that it ends early. An EOFError
    alone is none: Pillow raises it for a frame it cannot seek to in a complete file as well.
    """
    text = str(exc)
    low = text.lower()
    feature = tiff_compression_feature(tiff_compression) if fmt == "TIFF" else None
    if feature is not None:
        # libtiff reports a codec it was built without as a bare "decoder error -2" (the cause only
        # reaches stderr), so a non-baseline scheme is named whatever the message says.
        remedy = "save it again as TIFF with LZW or ZIP compression (or as JPEG or PNG) in an image editor"
        return missing_feature(path, fmt, feature, remedy)
    if not header and (renderer := _no_renderer(path, fmt, low)) is not None:
        return renderer
    # Pillow says "truncated" only when a read came up short.
    if "truncated" in low or (ran_out and isinstance(exc, (EOFError, struct.error))):
        return truncated(path, fmt)
    if _impossible_value(fmt, low):
        return damaged(path, fmt, "header" if header else "image data")
    named = _named_feature(fmt, text)
    if named is not None:
        return missing_feature(path, fmt, named)
    if "max_text_chunk" in low or "text chunk" in low or "too much memory used in text" in low:
        return BrokenImageError(
            path,
            f"this {display_name(fmt)} carries an oversized text block (megabytes of metadata, a sign of a damaged "
            f"or crafted file), which gpen-watch does not read; {RESAVE}",
        )
    return damaged(path, fmt, "header" if header else "image data")


def _no_renderer(path: Path, fmt: str, low: str) -> UnsupportedFormatError | None:
    """A valid file whose pixels need a program or platform this machine lacks: Pillow reads
    the header of EPS, WMF/EMF and of scientific formats (GRIB, BUFR, HDF5, FITS stubs) itself but
    hands the drawing to Ghostscript, Windows or a reader that must be installed separately."""
    name = display_name(fmt)
    if "ghostscript" in low:
        return UnsupportedFormatError(
            path,
            f"this {name} is a PostScript drawing, which needs Ghostscript to be drawn, and Ghostscript "
            "is not installed on this machine; install Ghostscript, or export the drawing as PNG or TIFF",
        )
    if "cannot find loader" not in low:
        return None
    if fmt == "WMF":
        return UnsupportedFormatError(
            path,
            "this Windows metafile (WMF or EMF) is a vector drawing that can only be drawn on Windows; "
            "export it as PNG or TIFF",
        )
    return UnsupportedFormatError(
        path,
        f"this {name} file holds scientific data, for which no image reader is installed here; "
        "export the picture from it as PNG or TIFF",
    )


# Bits per pixel a BMP may validly declare (0: the pixels are an embedded JPEG or PNG).
_BMP_DEPTHS = frozenset({0, 1, 2, 4, 8, 16, 24, 32, 48, 64})
# Sizes a BMP's info header has in some version: the OS/2 1.x core header (12), Windows' INFO to
# V5 (40, 52, 56, 108, 124), and OS/2 2.x's, which may end after any of its fields (16 to 64).
_BMP_HEADER_SIZES = frozenset({12, 16, 20, 24, 28, 32, 36, 40, 42, 44, 46, 48, 52, 56, 60, 64, 108, 124})


def _impossible_value(fmt: str, low: str) -> bool:
    """A value that Pillow calls "unsupported" but no valid file holds (a BMP of 30000 bits per
    pixel, a palette of millions of colours, a header size no BMP version has): damage, not a
    feature another program would read."""
    if fmt != "BMP":
        return False
    if "palette size" in low:
        return True
    if m := re.search(r"unsupported bmp header type \((\d+)\)", low):
        return int(m.group(1)) not in _BMP_HEADER_SIZES
    m = re.search(r"unsupported bmp pixel depth \((\d+)\)", low)
    return m is not None and int(m.group(1)) not in _BMP_DEPTHS


def _fourcc(m: re.Match[str]) -> str:
    code = int(m.group(0))
    text = code.to_bytes(4, "little", signed=False).decode("latin-1") if code < 2**32 else ""
    return text if text.isprintable() and text.strip() else m.group(0)


def _named_feature(fmt: str, text: str) -> str | None:
    """The feature a decoder said it does not support, in words, or None."""
    low = text.lower()
    if fmt == "BMP":
        if m := re.search(r"unsupported bmp compression \((\d+)\)", low):
            code = int(m.group(1))
            return _BMP_COMPRESSION_NAMES.get(code, f"BMP compression type {code}")
        if "bitfields" in low:
            return "an uncommon colour bit-field layout"
        if "header type" in low:
            return "an uncommon BMP header version"
        if m := re.search(r"unsupported bmp pixel depth \((\d+)\)", low):
            # 0 bits per pixel is what a BMP that wraps a JPEG or PNG image declares.
            depth = int(m.group(1))
            return "an embedded JPEG or PNG image" if depth == 0 else f"{depth} bits per pixel"
    if fmt == "TIFF" and "unknown pixel mode" in low:
        return "an uncommon combination of samples per pixel, bits per sample and colour model"
    if fmt == "JPEG" and (m := re.search(r"data precision (\d+)", low)):
        return f"{m.group(1)}-bit samples"
    if m := re.search(r"unsupported (?:bit depth|bits per (?:pixel|sample)|depth)\D*(\d+)", low):
        return f"{m.group(1)}-bit samples"
    # Pillow's plugins say "Unsupported <what>", "Unimplemented <what>" or "Unknown <what>" for a
    # variant they lack (a DDS pixel format, an SGI mode, a TGA orientation...): <what> is the
    # feature. "unknown/invalid" is their word for damage.
    if fmt == "DDS" and (m := re.search(r"unsupported bitcount (\d+) for (\d+)", low)):
        # Pillow names the layout by its DDPF flag bits: the depth is what the user can act on.
        return f"{m.group(1)}-bit pixels in an uncommon layout"
    if fmt == "DDS" and (m := re.search(r"unknown pixel format flags (\d+)", low)):
        return f"an uncommon pixel format (flags {m.group(1)})"
    if (m := _VARIANT.match(text.strip())) and "invalid" not in low:
        what = m.group(1).strip().rstrip(".").replace("'", "").replace('"', "")
        if fmt == "DDS":
            what = re.sub(r"\b\d{8,10}\b", _fourcc, what)  # a FourCC given as its number
        if what:
            return f"an uncommon {what}"
    return None
