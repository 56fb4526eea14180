"""The finish stage: paste the restored faces back into the photo, encode it and write it.

Runs on the engine's finish threads (OpenCV and Pillow release the GIL), one photo per call.
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np

from gpen_watch.base.errors import ErrorKind, GpenWatchError, OutboxUnavailable
from gpen_watch.base.fsutil import require_device
from gpen_watch.imaging.load import LoadedImage
from gpen_watch.imaging.save import copy_source, output_choice, save_image
from gpen_watch.restore.api import FileResult
from gpen_watch.restore.stages import paste
from gpen_watch.restore.stages.staged import StagedPhoto, note_rss
from gpen_watch.restore.stages.views import write_views

log = logging.getLogger(__name__)

_STOPPED = "stopped before it was written"


def finish(work: StagedPhoto, smooth_below: int, stopping: threading.Event) -> FileResult:
    """Write ``work``'s result to its job's destination; the result says how that went.

    ``smooth_below``: restore.smooth_below. ``stopping``: set when the engine is asked to stop;
    then nothing more is written (looked at again after pasting, which can take a while).
    """
    result, image, job = work.result, work.image, work.job
    if image is None:
        return result
    if stopping.is_set():
        result.error, result.error_kind = _STOPPED, ErrorKind.FAILED
        return result
    try:
        t0 = time.perf_counter()
        if work.faces:
            boxes = np.stack([f.box for f in work.faces])
            faces = paste.smooth_small_faces(np.concatenate(work.restored), boxes, smooth_below)
            masks = _paste_masks(work)
            assert work.affines is not None  # set with the faces
            pixels = paste.paste_faces(image.pixels, faces, work.affines, masks, rule=work.face_frame.mask)
        else:
            pixels = image.pixels
            if not work.found:  # else faces.select said why none was restored
                result.notes.append("no face found")
        t1 = time.perf_counter()
        result.timings["paste"] = t1 - t0
        note_rss(result, "paste")
        if stopping.is_set():
            result.error, result.error_kind = _STOPPED, ErrorKind.FAILED
            return result
        choice = output_choice(image, job.format, job.jpeg_quality)
        result.format = choice.format
        if choice.note:
            result.notes.append(choice.note)
        # The outbox's drive may have left while the photo was restored: never write into the
        # bare mount point it leaves (raises OutboxUnavailable, an "outbox" failure).
        require_device(job.dst.parent, job.dst_device)
        copied = False
        if not work.faces and work.upscaled == 1 and _can_copy_verbatim(image, choice.format):
            # Bit-identical pass-through: re-encoding would only cost quality.
            why_not = copy_source(image, job.src, job.dst)
            copied = why_not is None
            if why_not:
                result.notes.append(why_not)
        if copied:
            result.format = image.format  # what the file holds (a GIF stays a GIF)
            if not work.found:
                # Said only of a byte copy: a re-encoded photo (another format, converted samples)
                # is not unchanged, and the output rule's note says why it was re-encoded.
                result.notes[result.notes.index("no face found")] = (
                    "no face found; image passed through unchanged"
                )
        else:
            save_image(image, pixels, job.dst, format=job.format, jpeg_quality=job.jpeg_quality)
        result.timings["encode"] = time.perf_counter() - t1
        note_rss(result, "encode")
        if job.views is not None:
            t2 = time.perf_counter()
            write_views(work, pixels, job.views)
            result.timings["views"] = time.perf_counter() - t2
    except GpenWatchError as exc:
        result.error, result.error_kind = (
            str(exc),
            ErrorKind.OUTBOX if isinstance(exc, OutboxUnavailable) else ErrorKind.FAILED,
        )
        return result
    except Exception as exc:
        log.exception("unexpected error finishing %s", job.src)
        result.error, result.error_kind = f"cannot write result: {exc}", ErrorKind.FAILED
        return result
    result.ok, result.dst = True, job.dst
    if result.used is not None:
        result.used = result.used.written_as(result.format)
    return result


def _paste_masks(work: StagedPhoto) -> np.ndarray | None:
    """Raw parse masks (paste_faces softens them), or None for its own feathered mask."""
    return np.concatenate(work.masks) if work.masks else None


def _can_copy_verbatim(image: LoadedImage, out_format: str) -> bool:
    # Only a file the output rule would write in its own format, and only a single-frame one: the
    # rule and the notes are the same for a photo with faces and one without.
    return (
        image.scale == 1.0
        and out_format == image.format
        and image.frames == 1
        and image.samples_as_stored
        and not image.oriented
    )
