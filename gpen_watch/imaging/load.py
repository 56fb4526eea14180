"""Decode an image file into arrays for restoration, keeping what is needed to write it back.

The entry points (``probe_image``, ``load_image``, ``header_refusal``, ``open_unchanged``) and the
``LoadedImage`` they return; the steps live beside it: ``identify`` (path checks, size limit,
format by content), ``decode`` (pixels, every Pillow mode), ``metadata`` (EXIF, XMP, ICC, comment,
frames), ``reasons`` (the sentences for what cannot be decoded), ``errors`` (their classes).
Nothing here imports torch; the daemon's parent uses ``header_refusal`` to refuse at once what a
worker would refuse from the header.

DCT scaling (Pillow ``draft`` / OpenCV IMREAD_REDUCED_*) only offers 1/2, 1/4, 1/8 and must stay
>= the target, so it helps only when the target is at most half the original size (decode costs:
docs/benchmarks.md, "Decoding a 12 MP JPEG").
"""

from __future__ import annotations

import logging
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import numpy as np
from PIL import Image

from gpen_watch.base.fsutil import READ_NOFOLLOW_FLAGS
from gpen_watch.imaging.claims import check_size, part_refusal, size_text
from gpen_watch.imaging.decode import (
    apply_orientation,
    decode_pixels,
    is_16bit_colour,
    resize,
    target_size,
    to_8bit,
)
from gpen_watch.imaging.errors import (
    BrokenImageError,
    DecoderBugError,
    ImageInputError,
    ImageTooLargeError,
    NotAnImageError,
)
from gpen_watch.imaging.formats import GRAY_MODES
from gpen_watch.imaging.identify import (
    HEIF_KINDS,
    check_path,
    decode_failure,
    format_name,
    identify,
    open_file,
    our_pixel_limit,
    sniff,
)
from gpen_watch.imaging.metadata import (
    exif_bytes,
    exif_orientation,
    note_frames,
    read_exif,
    reset_xmp_orientation,
    source_info,
)
from gpen_watch.imaging.reasons import DATA_ERRORS, decoder_bug

log = logging.getLogger(__name__)


@dataclass
class LoadedImage:
    """A decoded image plus what save_image needs to write the result back in a matching form."""

    # (H, W, 3) BGR in the original bit depth (uint8 or uint16): the target for paste-back.
    pixels: np.ndarray
    # (H, W, 3) uint8 for detection/restoration; the same array as ``pixels`` when that is uint8
    # (treat it as read-only).
    bgr8: np.ndarray
    # (H, W), same dtype as pixels; None without transparency.
    alpha: np.ndarray | None
    # Pillow mode of the input as stored ("L", "RGB", "RGBA", "I;16", "CMYK", "P"...). 16-bit colour
    # PNG/TIFF report "RGB"/"RGBA" (Pillow's name); pixels.dtype tells the depth.
    mode: str
    # "JPEG", "PNG", "WEBP", "TIFF", "GIF", "BMP", "HEIF"... (a multi-picture JPEG reports "JPEG").
    format: str
    # EXIF block ("Exif\0\0" + TIFF structure) with Orientation reset to 1; None if the file had none.
    exif: bytes | None
    # ICC profile describing ``pixels`` (an sRGB profile after an ICC-managed CMYK conversion).
    icc_profile: bytes | None
    # (w, h) after EXIF orientation, before pre-scale.
    original_size: tuple[int, int]
    # Pre-scale factor applied (output size / original size); 1.0 if none.
    scale: float = 1.0
    notes: list[str] = field(default_factory=list)
    # XMP packet with tiff:Orientation reset to 1, or None.
    xmp: bytes | None = None
    # (x, y) dots per inch of the original, or None.
    dpi: tuple[float, float] | None = None
    # Estimated IJG quality (1-100) of a JPEG source, else None.
    jpeg_quality: int | None = None
    # Pillow subsampling code of a JPEG source: 0 = 4:4:4, 1 = 4:2:2, 2 = 4:2:0; None if unknown.
    jpeg_subsampling: int | None = None
    # EXIF Orientation value found in the file (1-8; 1 when absent or invalid).
    orientation: int = 1
    # (device, inode, size, mtime in ns) of the file that was decoded: lets a later byte copy
    # check it reads the same file, not one swapped in under the same name since.
    source_id: tuple[int, int, int, int] | None = None
    # The JPEG comment (COM marker) of a JPEG source, or None: archivists keep provenance there.
    comment: bytes | None = None
    # Seconds load_image spent in the pre-scale resize (0.0 if none), so callers can report it
    # apart from decoding, which includes it.
    prescale_seconds: float = 0.0
    # Frames, pages or pictures in the file; only the first (primary) one is decoded.
    frames: int = 1

    @property
    def oriented(self) -> bool:
        """True when pixels were rotated/flipped from the stored layout (a byte copy would be wrong)."""
        return self.orientation != 1

    @property
    def samples_as_stored(self) -> bool:
        """True when the pixels are the file's own samples, not converted from another colour
        model (CMYK, LAB, a palette, 1-bit...): only then is a byte copy what the writer would make."""
        return self.mode in ("L", "LA", "RGB", "RGBA", "I;16", "I;16L")

    @property
    def is_gray(self) -> bool:
        return self.mode in GRAY_MODES

    @property
    def bit_depth(self) -> int:
        return 16 if self.pixels.dtype == np.uint16 else 8

    @property
    def size(self) -> tuple[int, int]:
        """(w, h) of ``pixels``."""
        return self.pixels.shape[1], self.pixels.shape[0]


def probe_image(path: Path, max_megapixels: float) -> tuple[str, tuple[int, int]]:
    """Format and stored (w, h) from the header only (no pixel decoding, no EXIF rotation).

    ``max_megapixels``: restore.max_megapixels, which some headers are already held to (a frame
    Pillow checks while it opens the file, the picture inside an icon file: ``identify``).
    """
    path = Path(path)
    check_path(path)
    with our_pixel_limit(max_megapixels), open_file(path) as fh:
        im = identify(fh, path, max_megapixels)
        return format_name(im), im.size


def load_image(path: Path, max_side: int = 0, max_megapixels: float = 200.0) -> LoadedImage:
    """Decode ``path``; downscale so the long side is at most ``max_side`` (0: never).

    Raises an ImageInputError subclass naming the cause. The declared size is checked against
    ``max_megapixels`` before any pixel is decoded.
    """
    path = Path(path)
    check_path(path)
    with our_pixel_limit(max_megapixels), open_file(path) as fh:
        source_id = _file_id(os.fstat(fh.fileno()))
        try:
            im = identify(fh, path, max_megapixels)
        except DecoderBugError as bug:
            # Logged here, once: the parent's header check and the worker's probe meet it too.
            _log_bug(path, "reading the header", bug.__cause__)
            raise
        fmt = format_name(im)
        check_size(path, im, fh, max_megapixels)
        try:
            loaded = _load_opened(path, fh, im, fmt, max_side)
            loaded.source_id = source_id
            return loaded
        except ImageInputError:
            raise
        except Image.DecompressionBombError as exc:
            # A plugin re-checks frame/tile sizes against Pillow's limit (held to ours: our_pixel_limit).
            raise part_refusal(path, fmt, exc, fh, max_megapixels) from exc
        except MemoryError as exc:
            raise ImageTooLargeError(
                path, f"not enough memory to decode this {size_text(im.size)} image"
            ) from exc
        except DATA_ERRORS as exc:
            raise decode_failure(path, im, fmt, exc, fh) from exc
        except Exception as exc:
            _log_bug(path, "decoding", exc)
            raise decoder_bug(path, exc) from exc


def _log_bug(path: Path, doing: str, exc: BaseException | None) -> None:
    what = type(exc).__name__ if exc is not None else "an error"
    log.error("%s: %s while %s: a bug in gpen-watch or a library", path, what, doing, exc_info=exc)


def header_refusal(path: Path, max_megapixels: float = 200.0) -> ImageInputError | None:
    """The refusal ``load_image`` would give ``path`` from its header alone, else None.

    No pixel is decoded, so the daemon can set such files aside as they arrive instead of queueing
    them behind real work; the error is the very one the worker raises, so is its wording. None
    also when the file cannot be read right now (the worker's turn decides then) and for HEIF/AVIF,
    whose opener (pillow-heif) the worker loads and the caller may not.
    """
    path = Path(path)
    try:
        check_path(path)
        with our_pixel_limit(max_megapixels), open_file(path) as fh:
            if sniff(fh.read(16)) in HEIF_KINDS:
                return None
            fh.seek(0)
            im = identify(fh, path, max_megapixels)
            check_size(path, im, fh, max_megapixels)
    except (NotAnImageError, BrokenImageError, ImageTooLargeError) as exc:
        return exc
    except ImageInputError:
        return None
    return None


def open_unchanged(path: Path, source_id: tuple[int, int, int, int] | None) -> IO[bytes] | None:
    """Open ``path`` for a byte copy if it is still the very file ``load_image`` decoded (same
    device, inode, size and mtime, not a link); None if it changed, went or cannot be read."""
    if source_id is None:
        return None
    try:
        fd = os.open(path, READ_NOFOLLOW_FLAGS)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and _file_id(st) == source_id:
            return os.fdopen(fd, "rb")
    except OSError:
        pass
    os.close(fd)
    return None


def _file_id(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _load_opened(path: Path, fh: IO[bytes], im: Image.Image, fmt: str, max_side: int) -> LoadedImage:
    notes: list[str] = []
    sixteen_bit = is_16bit_colour(im)  # first: reading PNG EXIF may load() and clear im.tile
    frames = note_frames(im, fmt, notes)
    mode = im.mode
    exif_obj = read_exif(im, fmt, sixteen_bit, notes)
    orientation = exif_orientation(exif_obj)
    stored_w, stored_h = im.size
    swaps = orientation in (5, 6, 7, 8)
    original_size = (stored_h, stored_w) if swaps else (stored_w, stored_h)
    target = target_size(original_size, max_side)
    stored_target = None if target is None else ((target[1], target[0]) if swaps else target)

    pixels, alpha, icc = decode_pixels(im, fh, fmt, sixteen_bit, stored_target, notes, path)
    info = source_info(im, fmt)  # after decoding: PNG chunks after the image data count too
    scale = 1.0
    prescale_seconds = 0.0
    if target is not None and stored_target is not None:
        # Resize before rotating: the rotation then copies the small image, not the full one.
        t0 = time.perf_counter()
        pixels, alpha = resize(pixels, alpha, stored_target)
        prescale_seconds = time.perf_counter() - t0
        scale = target[0] / original_size[0]
        notes.append(f"pre-scaled from {original_size[0]}x{original_size[1]} to {target[0]}x{target[1]}")
    pixels, alpha = apply_orientation(pixels, alpha, orientation)
    return LoadedImage(
        pixels=pixels,
        bgr8=to_8bit(pixels),
        alpha=alpha,
        mode=mode,
        format=fmt,
        exif=exif_bytes(exif_obj),
        icc_profile=icc,
        original_size=original_size,
        scale=scale,
        notes=notes,
        xmp=reset_xmp_orientation(info["xmp"]),
        dpi=info["dpi"],
        jpeg_quality=info["jpeg_quality"],
        jpeg_subsampling=info["jpeg_subsampling"],
        orientation=orientation,
        comment=info["comment"],
        prescale_seconds=prescale_seconds,
        frames=frames,
    )
