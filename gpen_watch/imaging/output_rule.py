"""Which format a result is written in, by one rule for every input, with or without faces:

* ``output.format`` names a format: that one.
* "same": the input's format where gpen-watch writes it with its metadata (JPEG, PNG, WebP, TIFF,
  BMP, AVIF), as its single-frame form for multi-frame inputs (an MPO's primary image is a JPEG);
* otherwise PNG when the image has transparency or more than 8 bits per sample, else JPEG at the
  configured quality.

Each choice that changes the format, or loses something the input had (transparency, depth,
frames), comes with a note for the user saying why.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpen_watch.imaging.formats import EXPLICIT_FORMATS, display_name

# Formats written with EXIF/ICC/XMP where the format has them, and the ones that hold alpha or
# 16 bits per sample as written by imaging/encode.py.
WRITABLE = frozenset({"JPEG", "PNG", "WEBP", "TIFF", "BMP", "AVIF"})
HOLDS_ALPHA = frozenset({"PNG", "WEBP", "TIFF", "BMP", "AVIF"})
HOLDS_16_BITS = frozenset({"PNG", "TIFF"})


@dataclass(frozen=True)
class OutputChoice:
    format: str  # the Pillow format name written
    note: str | None = None  # for the user, when the format changed or something could not be kept


def choose_output(
    source_format: str,
    requested: str = "same",
    *,
    alpha: bool = False,
    bit_depth: int = 8,
    quality: int = 95,
) -> OutputChoice:
    """The format a result of a ``source_format`` input is written in, and why when it differs."""
    req = requested.lower()
    src = "JPEG" if source_format.upper() == "MPO" else source_format.upper()
    if req != "same":
        if req not in EXPLICIT_FORMATS:
            raise ValueError(f"unknown output format {requested!r}; use same, jpeg, png, webp or tiff")
        fmt = EXPLICIT_FORMATS[req]
        return OutputChoice(fmt, _losses(fmt, alpha, bit_depth, f"output.format is {req}"))
    if src in WRITABLE and (bit_depth <= 8 or src in HOLDS_16_BITS) and (not alpha or src in HOLDS_ALPHA):
        return OutputChoice(src)
    name = display_name(source_format) if source_format else "this format"
    if alpha:
        return OutputChoice(
            "PNG", f"written as PNG: gpen-watch does not write {name}, and PNG keeps its transparency"
        )
    if bit_depth > 8:
        return OutputChoice(
            "PNG",
            f"written as PNG: gpen-watch does not write {name} deeper than 8 bits, and PNG keeps the depth",
        )
    return OutputChoice("JPEG", f"written as JPEG (quality {quality}): gpen-watch does not write {name}")


def _losses(fmt: str, alpha: bool, bit_depth: int, because: str) -> str | None:
    lost = []
    if alpha and fmt not in HOLDS_ALPHA:
        lost.append(f"transparency dropped ({display_name(fmt)} has none)")
    if bit_depth > 8 and fmt not in HOLDS_16_BITS:
        lost.append(f"{bit_depth}-bit depth reduced to 8 bits ({display_name(fmt)} holds 8)")
    if not lost:
        return None
    return "; ".join(lost) + f" because {because}; choose png or tiff to keep everything"
