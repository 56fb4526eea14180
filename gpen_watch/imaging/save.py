"""Write a restored image as a file, atomically: in the format ``output_rule`` chooses, encoded by
``encode`` with the input's metadata; or, for a photo left unchanged, as a byte copy of the very
file that was decoded. Also the error a failed write raises, so callers can tell a full or
read-only outbox from trouble with one file.
"""

from __future__ import annotations

import errno
import os
import secrets
from pathlib import Path

import numpy as np

from gpen_watch.base.errors import OutboxUnavailable, OutputError
from gpen_watch.base.fsutil import FOLDER_REFUSES, remove_quietly
from gpen_watch.imaging.encode import check_pixels, encode
from gpen_watch.imaging.formats import MAX_SIDES, display_name
from gpen_watch.imaging.load import LoadedImage, open_unchanged
from gpen_watch.imaging.output_rule import OutputChoice, choose_output
from gpen_watch.platform.files import fsync_dir_quietly, publish_file


def output_choice(image: LoadedImage, requested: str = "same", jpeg_quality: int = 95) -> OutputChoice:
    """What ``save_image`` writes for ``image`` and this request, and the note saying why."""
    return choose_output(
        image.format,
        requested,
        alpha=image.alpha is not None,
        bit_depth=image.bit_depth,
        quality=jpeg_quality,
    )


def output_format(source_format: str, requested: str = "same") -> str:
    """The format written for an opaque 8-bit ``source_format`` image and this request."""
    return choose_output(source_format, requested).format


def save_image(
    image: LoadedImage,
    pixels: np.ndarray,
    dst: Path,
    format: str = "same",
    jpeg_quality: int = 95,
    overwrite: bool = False,
) -> Path:
    """Write ``pixels`` (H, W, 3 BGR, uint8/uint16) to ``dst`` with ``image``'s metadata.

    ``image`` is the LoadedImage the pixels came from. The format is ``output_choice(image,
    format)``'s, never dst's suffix. Alpha is re-attached wherever the format holds it (the rule
    picks such a format for "same"); only an explicit JPEG drops it, and the choice's note says so.
    ``jpeg_quality`` is also the WebP and AVIF quality. Grayscale inputs are written as grayscale.
    The write is atomic (temp file + fsync + rename). An existing dst with different content is
    not replaced unless ``overwrite``; OutputError names the file or folder and the reason.
    """
    dst = Path(dst)
    check_pixels(pixels)
    fmt = output_choice(image, format, jpeg_quality).format
    _check_fits(pixels, fmt)
    data = encode(image, pixels, fmt, jpeg_quality)
    return _write_atomic(dst, data, overwrite)


# --- atomic write ------------------------------------------------------------------------------------


def _check_fits(pixels: np.ndarray, fmt: str) -> None:
    """OutputError, saying what to change, when the result is larger than ``fmt`` can hold (the
    caller names the photo: ``dst`` is often a temporary name)."""
    limit = MAX_SIDES.get(fmt)
    h, w = pixels.shape[:2]
    if limit is not None and max(h, w) > limit:
        raise OutputError(
            f"the result is {w}x{h} px, and {display_name(fmt)} holds at most {limit:,} px a side; "
            f"set output.format to png or tiff for this inbox, or restore.max_side to at most "
            f"{limit} (divided by restore.upscale, if set) so it is scaled down first"
        )


def _write_atomic(dst: Path, data: bytes, overwrite: bool) -> Path:
    folder = dst.parent
    if dst.is_dir():
        raise OutputError(f"{dst}: is a directory; cannot write the output there")
    if not overwrite and _same_content(dst, data):
        return dst  # a re-run produced the identical file: nothing to do
    tmp = folder / f".{dst.name}.tmp-{secrets.token_hex(4)}"
    try:
        _write_synced(tmp, data)
        _publish(tmp, dst, data, overwrite)
    except BaseException as exc:
        remove_quietly(tmp)
        if isinstance(exc, OSError):
            raise write_error(dst, exc) from exc
        raise
    fsync_dir_quietly(folder)
    return dst


def _write_synced(tmp: Path, data: bytes) -> None:
    # O_EXCL: never follow a planted file/symlink; 0o666 so the umask decides permissions, as for
    # any file the user creates (tempfile's 0o600 would hide outputs from other accounts).
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _publish(tmp: Path, dst: Path, data: bytes, overwrite: bool) -> None:
    try:
        publish_file(tmp, dst, overwrite=overwrite)
    except FileExistsError:
        # Appeared meanwhile: the same bytes (a concurrent re-run) are fine, anything else is not ours.
        if not _same_content(dst, data):
            raise OutputError(f"{dst}: a different file already exists; not overwritten") from None


def _same_content(path: Path, data: bytes) -> bool:
    try:
        if path.stat().st_size != len(data):
            return False
        return path.read_bytes() == data
    except OSError:
        return False


def copy_source(image: LoadedImage, src: Path, dst: Path) -> str | None:
    """Write ``dst`` as a byte copy of ``src``, if ``src`` is still the file ``image`` was decoded
    from. None when copied; else why not (the source changed, went or could not be read), with
    nothing left at ``dst``: the caller then encodes the pixels it has, so a bad sector or a link
    swapped in is never copied and never taken for trouble with the output folder. Failing writes
    raise ``write_error``'s error, as save_image's do."""
    fin = open_unchanged(src, image.source_id)
    if fin is None:
        return "the original changed after it was read; written from the pixels read then"
    unreadable: str | None = None
    with fin:
        try:
            with open(dst, "xb") as fout:
                while True:
                    try:
                        chunk = fin.read(1 << 20)
                    except OSError as exc:
                        unreadable = exc.strerror or str(exc)
                        break
                    if not chunk:
                        break
                    fout.write(chunk)
                if unreadable is None:
                    fout.flush()
                    os.fsync(fout.fileno())
        except OSError as exc:
            if not isinstance(exc, FileExistsError):
                remove_quietly(dst)
            raise write_error(dst, exc) from exc
    if unreadable is not None:
        remove_quietly(dst)
        return f"could not read the original again ({unreadable}); re-encoded instead"
    return None


_REASONS = {
    errno.ENOSPC: "disk full",
    getattr(errno, "EDQUOT", -1): "disk quota exceeded",  # absent on Windows
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EROFS: "read-only file system",
    errno.ENOENT: "folder does not exist",
    errno.ENAMETOOLONG: "file name too long",
}


def write_error(dst: os.PathLike[str] | str, exc: OSError) -> OutputError:
    """The error to raise when writing ``dst`` failed with ``exc``: OutboxUnavailable when the folder
    refuses writes (full, read-only, gone, no permission), so the caller can hold the photo rather
    than fail it; a plain OutputError otherwise (name too long...)."""
    dst = Path(dst)
    cls = OutboxUnavailable if exc.errno in FOLDER_REFUSES else OutputError
    return cls(f"cannot write {dst.name} in {dst.parent}: {_os_reason(exc)}")


def _os_reason(exc: OSError) -> str:
    return _REASONS.get(exc.errno or 0, exc.strerror or str(exc))
