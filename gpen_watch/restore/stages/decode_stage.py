"""The decode stage: read a photo, pre-scaled to the size it is restored at, and what it costs.

Runs on the engine's decode threads (the decoders release the GIL), one photo per call. Also the
photo's charge against the memory budget, read from its header before it is admitted.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Protocol

from gpen_watch.base.errors import InputError
from gpen_watch.config import RestoreConfig
from gpen_watch.imaging.formats import MAX_SIDES, display_name
from gpen_watch.imaging.load import LoadedImage, load_image, probe_image
from gpen_watch.imaging.reasons import decoder_bug
from gpen_watch.imaging.save import output_choice
from gpen_watch.restore.api import FileJob, FileResult
from gpen_watch.restore.runtime import memory
from gpen_watch.restore.stages.detect import Detector
from gpen_watch.restore.stages.staged import StagedPhoto, note_rss

log = logging.getLogger(__name__)


class MadeDetectors(Protocol):
    """Where the decode stage looks for the detector of a photo's settings (the engine's loader,
    ``restore.engines.loader.Loader``): the stages do not import the engine that drives them."""

    def made_detector(self, cfg: RestoreConfig) -> Detector | None: ...


def photo_cost(job: FileJob, cfg: RestoreConfig) -> int:
    """Budget bytes for ``job``'s photo (restored with ``cfg``), from its header; a file that
    cannot be probed costs a minimum (it fails at decode)."""
    try:
        _fmt, (w, h) = probe_image(job.src, cfg.max_megapixels)
    except Exception:  # noqa: BLE001 - the decode stage reports what is wrong with the file
        return memory.photo_bytes(64, 64)
    # Upscaled, the frames a photo holds from then on are upscale^2 times as large.
    upscaled = cfg.upscale**2
    return memory.photo_bytes(w, h, max_side_for(job, cfg, max(w, h))) * upscaled


def max_side_for(job: FileJob, cfg: RestoreConfig, long_side: int) -> int:
    """restore.max_side for a photo whose long side is ``long_side``, with the job's scale."""
    side = cfg.max_side
    if job.scale >= 1.0:
        return side
    capped = min(long_side, side) if side else long_side
    return max(64, int(capped * job.scale))


@dataclass(frozen=True)
class FormatCap:
    side: int  # the long side the photo is decoded at instead
    note: str  # for the user: why it is smaller than restore.max_side makes it


def format_cap(image: LoadedImage, job: FileJob, cfg: RestoreConfig) -> FormatCap | None:
    """A smaller pre-scale when ``image`` restored (and upscaled by restore.upscale) would be
    larger than its output format holds; None when it fits."""
    fmt = output_choice(image, job.format, job.jpeg_quality).format
    limit = MAX_SIDES.get(fmt)
    if limit is None:
        return None
    side = limit // cfg.upscale
    if max(image.size) <= side:
        return None
    upscaled = f", upscaled x{cfg.upscale}," if cfg.upscale > 1 else ""
    return FormatCap(
        side,
        f"scaled so the result{upscaled} fits {display_name(fmt)}'s {limit:,} px a side; "
        "choose png or tiff output to keep the full size",
    )


def max_side(job: FileJob, cfg: RestoreConfig) -> int:
    """restore.max_side, lowered by the job's scale after an out-of-memory retry."""
    if job.scale >= 1.0:
        return cfg.max_side
    _fmt, (w, h) = probe_image(job.src, cfg.max_megapixels)
    return max_side_for(job, cfg, max(w, h))


def decode(
    job: FileJob, cfg: RestoreConfig, max_megapixels: float, loader: MadeDetectors, cost: int = 0
) -> StagedPhoto:
    """Read ``job``'s photo for settings ``cfg``; a file that cannot be read ends as a failed
    ``StagedPhoto`` whose result says why. ``loader``: where the detector's own shrunken copy is made,
    when the device loop made that detector already."""
    result = FileResult(src=job.src, ok=False)
    work = StagedPhoto(job, result, cfg=cfg, cost=cost)
    t0 = time.perf_counter()
    try:
        image = load_image(job.src, max_side=max_side(job, cfg), max_megapixels=max_megapixels)
        cap = format_cap(image, job, cfg)
        if cap is not None:
            # Rare (WebP with restore.upscale on a large photo): decoded again at the size the
            # format holds, through the same pre-scale, rather than failing after the restoration.
            image = load_image(job.src, max_side=cap.side, max_megapixels=max_megapixels)
            image.notes.append(cap.note)
    except InputError as exc:
        result.error, result.error_kind = exc.reason, exc.kind
        return work
    except Exception as exc:
        log.exception("%s while reading %s (a bug)", type(exc).__name__, job.src)
        bug = decoder_bug(job.src, exc)
        result.error, result.error_kind = bug.reason, bug.kind
        return work
    t1 = time.perf_counter()
    result.timings["decode"] = t1 - t0 - image.prescale_seconds
    if image.prescale_seconds:
        result.timings["prescale"] = image.prescale_seconds
    note_rss(result, "decode")
    result.notes.extend(image.notes)
    result.height, result.width = image.pixels.shape[:2]
    work.image = image
    # The detector of the photo's settings, if the device loop made it already (read-only here).
    detector = loader.made_detector(cfg)
    prepare = getattr(detector, "prepare", None)
    if prepare is not None:
        # The detector's shrunken copy is plain CPU work: done here, in parallel, it no longer
        # holds up the device loop (it costs more than the network itself on a GPU).
        try:
            work.detect_input = prepare(image.bgr8)
        except Exception:
            log.exception("preparing %s for detection failed", job.src)
        result.timings["detect"] = time.perf_counter() - t1
    return work
