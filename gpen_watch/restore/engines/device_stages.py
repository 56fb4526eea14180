"""The device loop's stages for photos in hand: find and align their faces, upscale the whole
photo (restore.upscale), and run the generator over a batch of faces drawn from several photos.

Plain functions over ``StagedPhoto``; the loop (restorer.py) decides which photos each is given and when.
``step`` is called after each unit of device work, for the worker's heartbeat.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import numpy as np
import torch

from gpen_watch.base.errors import ModelError
from gpen_watch.restore.api import face_ids_refusal
from gpen_watch.restore.engines.face_checks import leave_sharp
from gpen_watch.restore.engines.loader import Loader
from gpen_watch.restore.engines.modelsets import ModelKey, ModelSets
from gpen_watch.restore.runtime.device import free_cached_memory, is_out_of_memory
from gpen_watch.restore.stages import align, upscale
from gpen_watch.restore.stages.enhance import OutOfMemory
from gpen_watch.restore.stages.faces import LeftOut, pick, plausible, select
from gpen_watch.restore.stages.staged import StagedPhoto, note_rss

log = logging.getLogger(__name__)


def detect_and_align(
    work: StagedPhoto,
    models: ModelSets,
    loader: Loader,
    device: torch.device,
    busy: set[ModelKey],
    step: Callable[[], None],
) -> None:
    """Find and align the photo's faces, for the generator of its model set (loaded now if it
    is not; ``busy``: the sets of photos waiting for the generator, which stay loaded)."""
    image = work.image
    assert image is not None
    t0 = time.perf_counter()
    try:
        held = models.get(work.models, busy)
        size, frame = held.size, held.frame
        detector = loader.detector(work.cfg)
        faces = detector.detect([work.detect_input or image.bgr8])[0]
        work.detect_input = None
    except ModelError as exc:
        # A model only this photo's inbox (or its redo) names, damaged in a way its header did not
        # show, or gone since it was checked: this photo fails, the worker goes on.
        whose = work.job.settings_label or "this photo's inbox settings"
        work.fail(f"cannot load the models of {whose}: {exc}")
        return
    except (torch.cuda.OutOfMemoryError, RuntimeError) as exc:
        if not is_out_of_memory(exc):
            raise
        free_cached_memory(device)
        work.fail("out of GPU memory while detecting faces", oom=True)
        return
    t1 = time.perf_counter()
    hw = (int(image.bgr8.shape[0]), int(image.bgr8.shape[1]))
    detected = faces
    left_out: list[LeftOut] = []
    faces = plausible(faces, hw, work.result.notes, left_out)
    work.found = work.result.found = len(faces)
    faces = select(faces, hw, work.cfg, work.result.notes, left_out)
    if work.job.face_ids is not None:
        # Checked when the redo was asked, where the photo's views still said its faces; without
        # them a face number the photo lacks fails the redo here, the result as it was.
        refusal = face_ids_refusal(work.job.src.name, len(detected), work.job.face_ids)
        if refusal:
            work.fail(f"{refusal}; nothing was restored, and the result stays as it was")
            return
        faces = pick(detected, faces, work.job.face_ids, work.result.notes, left_out)
    faces = leave_sharp(work, detected, faces, left_out)
    work.faces = faces
    reasons = {id(face): why for face, why in left_out}
    work.shown = [(face, reasons.get(id(face))) for face in detected]
    work.face_size = size
    work.face_frame = frame
    work.result.timings["detect"] = work.result.timings.get("detect", 0.0) + t1 - t0
    if faces:
        landmarks = np.stack([f.landmarks for f in faces]).astype(np.float32)
        work.crops, work.affines = align.align_faces(image.bgr8, landmarks, size, frame)
        work.pending = len(faces)
    work.result.timings["align"] = time.perf_counter() - t1
    work.result.faces = len(faces)
    note_rss(work.result, "align")
    step()


def upscale_photo(
    work: StagedPhoto,
    models: ModelSets,
    step_unless_stopping: Callable[[], bool],
    tiles: Callable[[int, int], None] | None = None,
) -> None:
    """restore.upscale: the whole photo is upscaled on the device once its faces are found and
    aligned at the decoded size; from here on the photo, its faces' boxes and the affines the
    restored faces are pasted back with are those of the upscaled photo.
    ``step_unless_stopping`` is called between tile batches and is True when the restorer stops;
    ``tiles`` is told (tiles done, tiles in all) before each tile batch."""
    image = work.image
    held = models.peek(work.models)
    upscaler = held.upscaler if held is not None else None
    if upscaler is None or image is None:
        return
    t0 = time.perf_counter()
    try:
        pixels = upscaler.upscale(image.pixels, step_unless_stopping, tiles)
    except OutOfMemory:
        work.fail("out of GPU memory upscaling the photo even one tile at a time", oom=True)
        return
    except Exception as exc:
        log.exception("upscaling %s failed", work.job.src)
        work.fail(f"background upscaling failed: {exc}")
        return
    if pixels is None:  # stopping: the finish stage writes nothing
        return
    factor = upscaler.factor
    image.pixels = pixels
    image.scale *= factor  # output size / original size, as save_image scales the DPI by
    work.faces, work.affines = upscale.to_upscaled(work.faces, work.affines, factor)
    work.upscaled = factor
    work.result.height, work.result.width = pixels.shape[:2]
    work.result.notes.append(f"upscaled x{factor}")
    work.result.timings["upscale"] = time.perf_counter() - t0
    note_rss(work.result, "upscale")


def run_batch(ready: list[StagedPhoto], models: ModelSets, step: Callable[[], None]) -> list[StagedPhoto]:
    """Restore up to face_batch queued faces (taken from the oldest photos first) of photos
    whose model set is the oldest photo's: faces for different generators never share a pass.
    Returns the photos whose last face this pass restored (or that it failed)."""
    key = ready[0].models
    enhancer = models.get(key, {w.models for w in ready}).enhancer
    take: list[tuple[StagedPhoto, int, int]] = []  # (work, first face index, count)
    room = enhancer.face_batch
    for work in ready:
        if room <= 0:
            break
        if work.models != key:
            continue
        first = len(work.faces) - work.pending
        n = min(work.pending, room)
        take.append((work, first, n))
        room -= n
    crops = np.concatenate([w.crops[a : a + n] for w, a, n in take])  # type: ignore[index]
    amounts = [w.cfg.strength for w, _, n in take for _ in range(n)]
    # Only a batch with other strengths than the enhancer's own needs them one by one.
    strengths = None if all(s == enhancer.strength for s in amounts) else np.array(amounts)
    # restore.fidelity of each face, for a model that takes one (its profile's, as strength).
    extra: dict[str, np.ndarray] = {}
    if enhancer.fidelity is not None:
        extra["fidelities"] = np.array([w.cfg.fidelity for w, _, n in take for _ in range(n)], np.float32)
    t0 = time.perf_counter()
    try:
        if enhancer.parse_small_below and enhancer.parser is not None:
            # restore.parse_small_below: how large each face lands in its photo.
            affines = np.concatenate([w.affines[a : a + n] for w, a, n in take])  # type: ignore[index]
            restored, masks = enhancer.enhance(
                crops, strengths, align.paste_sides(affines, enhancer.size), **extra
            )
        elif extra:
            restored, masks = enhancer.enhance(crops, strengths, **extra)
        else:
            restored, masks = (
                enhancer.enhance(crops, strengths) if strengths is not None else enhancer.enhance(crops)
            )
    except OutOfMemory:
        for work, _, _ in take:
            work.fail("out of GPU memory restoring faces even one at a time", oom=True)
        return [w for w, _, _ in take]
    except Exception as exc:
        log.exception("restoring a batch of %d faces failed", len(crops))
        for work, _, _ in take:
            work.fail(f"face restoration failed: {exc}")
        return [w for w, _, _ in take]
    step()
    per_face = (time.perf_counter() - t0) / len(crops)
    finished = []
    pos = 0
    for work, _, n in take:
        work.restored.append(restored[pos : pos + n])
        if masks is not None:
            work.masks.append(masks[pos : pos + n])
        pos += n
        work.pending -= n
        work.result.timings["restore"] = work.result.timings.get("restore", 0.0) + per_face * n
        note_rss(work.result, "restore")
        if work.pending == 0:
            finished.append(work)
    return finished
