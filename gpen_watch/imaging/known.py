"""The reason for a file no image reader here opens although it is of a known image type: its
signature or, for TGA (which has none), its name and header say which type. Such a file is a
damaged, cut or unusual image of that type, never "not an image file".

Pillow's readers take some damage for "not my format" (an EPS whose binary header points past
the end, an XV thumbnail that ends in its comments, a PNM header with no space after "P6"), so
the type is recognised here from the same bytes they check.
"""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path
from typing import IO

from PIL import Image

from gpen_watch.imaging.errors import ImageInputError, NotAnImageError, UnsupportedFormatError
from gpen_watch.imaging.formats import display_name
from gpen_watch.imaging.ole import OleContent, is_ole, ole_content
from gpen_watch.imaging.reasons import damaged, missing_feature, truncated

_FLI_MAGICS = (0xAF11, 0xAF12)
_FLI_FLAGS = (b"\x00\x00", b"\x03\x00")
_MSP_SIGNATURES = (b"DanM", b"LinS")
_TGA_SUFFIXES = frozenset({".tga", ".icb", ".vda", ".vst"})
_TGA_HEADER = 18
# Palette entry sizes Pillow's TGA reader decodes, in bits.
_TGA_PALETTE_BITS = frozenset({16, 24, 32})
# An EPS with a binary header (written by DOS and Windows programs to carry a TIFF or WMF preview):
# its signature, then where its PostScript section starts and how long it is.
_DOS_EPS = b"\xc5\xd0\xd3\xc6"
_DOS_EPS_HEADER = 30
_XV_THUMBNAIL = b"P7 332"
# A Netpbm header as its own tools read it: "P1" to "P6", then the width and the height in decimal,
# with whitespace or "#" comments between (Pillow's reader wants whitespace after the "P6" too).
_PNM_HEADER = re.compile(rb"P[1-6](?:\s|#[^\r\n]*[\r\n])*\d+(?:\s|#[^\r\n]*[\r\n])+\d+")


def known_type_failure(path: Path, head: bytes, fh: IO[bytes]) -> ImageInputError | None:
    """Why a file of a recognisable image type did not open, or None if its type is unknown."""
    if is_ole(head):
        return _ole_failure(path, fh)
    # The signatures Pillow's own readers check first (FLI: magic and flags; MSP: its two
    # versions): a file that has one and still fails has a damaged header.
    if len(head) >= 16 and struct.unpack_from("<HH", head, 4)[0] in _FLI_MAGICS and head[14:16] in _FLI_FLAGS:
        return damaged(path, "FLI", "header")
    if head[:4] in _MSP_SIGNATURES:
        return damaged(path, "MSP", "header")
    if head.startswith(_DOS_EPS):
        return _dos_eps_failure(path, head, fh)
    if head.startswith(_XV_THUMBNAIL):
        return _xv_thumbnail_failure(path, fh)
    if _PNM_HEADER.match(head):
        return damaged(path, "PPM", "header")
    if path.suffix.lower() in _TGA_SUFFIXES:
        return _tga_failure(path, head, fh)
    return None


def _ole_failure(path: Path, fh: IO[bytes]) -> ImageInputError:
    content = ole_content(fh)
    readable = "FPX" in Image.OPEN  # Pillow registers FlashPix and MIC only with olefile
    if content in (OleContent.FLASHPIX, OleContent.MIC):
        if readable:
            return damaged(path, content.value, "header")
        return UnsupportedFormatError(
            path,
            f"this {display_name(content.value)} image needs the olefile package to be read, and olefile "
            "is not installed here; install it (pip install olefile) and drop the file again, or export "
            "the image as PNG or TIFF",
        )
    if content is OleContent.DOCUMENT:
        return NotAnImageError(
            path, "not an image file (an OLE compound document, such as an older Office file)"
        )
    return NotAnImageError(
        path,
        "not an image file that can be read: it is a damaged OLE compound file (the container of older "
        "Office files and of FlashPix and MIC images); if it is an image, copy it again from the original",
    )


def _dos_eps_failure(path: Path, head: bytes, fh: IO[bytes]) -> ImageInputError:
    """A binary-header EPS Pillow's reader refused: cut short when its PostScript section starts
    where the header says and the file ends before the section does, else damaged (the header
    points outside the file, or at something that is not PostScript)."""
    if len(head) < _DOS_EPS_HEADER:
        return truncated(path, "EPS")
    start, length = struct.unpack_from("<II", head, 4)
    end_of_file = fh.seek(0, os.SEEK_END)
    fh.seek(start)
    if start >= _DOS_EPS_HEADER and fh.read(2) == b"%!" and start + length > end_of_file:
        return truncated(path, "EPS")
    return damaged(path, "EPS", "header")


def _xv_thumbnail_failure(path: Path, fh: IO[bytes]) -> ImageInputError:
    """An XV thumbnail Pillow's reader refused: it does so only when the file ends among the
    comment lines, before the line that gives the size."""
    fh.seek(0)
    lines = fh.read(1 << 16).splitlines()[1:]
    if all(line.startswith(b"#") for line in lines):
        return truncated(path, "XVThumb")
    return damaged(path, "XVThumb", "header")


def _tga_failure(path: Path, head: bytes, fh: IO[bytes]) -> ImageInputError | None:
    """A file named as a TGA whose 18-byte header reads as one: cut short, of a palette layout
    the reader here lacks, or damaged."""
    if len(head) < _TGA_HEADER:
        return None
    id_len, has_palette, kind = head[0], head[1], head[2]
    palette_len, palette_bits = struct.unpack_from("<H", head, 5)[0], head[7]
    width, height = struct.unpack_from("<HH", head, 12)
    depth = head[16]
    if has_palette not in (0, 1) or kind not in (1, 2, 3, 9, 10, 11) or not width or not height:
        return None
    if depth not in (1, 8, 15, 16, 24, 32):
        return None
    need = _TGA_HEADER + id_len + palette_len * ((palette_bits + 7) // 8) * has_palette
    if not kind & 8:  # uncompressed: every pixel is stored
        need += (width * depth + 7) // 8 * height
    if fh.seek(0, os.SEEK_END) < need:
        return truncated(path, "TGA")
    if has_palette and palette_bits not in _TGA_PALETTE_BITS:
        return missing_feature(path, "TGA", f"{palette_bits}-bit palette entries")
    if depth == 15:
        return missing_feature(path, "TGA", "15-bit pixels")
    return damaged(path, "TGA", "header")
