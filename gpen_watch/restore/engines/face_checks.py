"""The checks beside each face's restoring (docs/identity.md): faces already sharp left as they
are (restore.skip_sharp), decided before the generator runs; and, once a photo's faces are back,
how far each moved from the person it was (restore.identity_check), for the faces of all the
photos a generator pass finished, in one pass of the descriptor network.

What they find goes into each photo's ``FileResult.checks``, one ``FaceCheck`` a face, which the
service keeps in the journal; its notes say what a person should know (faces left as they were,
faces that may not look like the same person, or why the identity check did not run).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from gpen_watch.base.errors import ModelError
from gpen_watch.catalog.registry import identity_specs
from gpen_watch.modelstore.store import find_model
from gpen_watch.platform.program import command
from gpen_watch.restore.api import FaceCheck
from gpen_watch.restore.engines.verify import read_identity_file
from gpen_watch.restore.nets.face_descriptor import FaceDescriptorNet
from gpen_watch.restore.nets.shape_predictor import ShapePredictor
from gpen_watch.restore.stages import align
from gpen_watch.restore.stages.detect import Face
from gpen_watch.restore.stages.faces import LeftOut
from gpen_watch.restore.stages.identity import IdentityModels
from gpen_watch.restore.stages.sharpness import Detail, face_detail
from gpen_watch.restore.stages.staged import StagedPhoto

log = logging.getLogger(__name__)

SHARP_REASON = "left as it was: already sharp"
# Flagged faces a photo's note names by number; more are counted.
_NAMED = 6


# --- faces already sharp -------------------------------------------------------------------------


def leave_sharp(
    work: StagedPhoto, detected: list[Face], faces: list[Face], left_out: list[LeftOut]
) -> list[Face]:
    """Of ``faces`` (those the settings chose, in detection order), the ones to restore: each
    face's detail is measured, and with restore.skip_sharp the sharp ones are left as they are,
    each with its reason in ``left_out``, unless a redo picked faces by number (a person asked
    for those). Starts ``work.result.checks``: the faces to restore in order, then the sharp ones."""
    assert work.image is not None
    cfg = work.cfg
    number = {id(face): i for i, face in enumerate(detected)}
    measured = [(face, face_detail(work.image.bgr8, face.landmarks)) for face in faces]
    skipping = cfg.skip_sharp and work.job.face_ids is None
    kept: list[tuple[Face, Detail | None]] = []
    sharp: list[tuple[Face, Detail]] = []
    for face, detail in measured:
        if skipping and detail is not None and detail.measure >= cfg.sharp_above:
            sharp.append((face, detail))
        else:
            kept.append((face, detail))
    for face, detail in sharp:
        left_out.append(
            (face, f"{SHARP_REASON} ({detail.text()}, restore.sharp_above = {cfg.sharp_above:g})")
        )
    if sharp:
        n = len(sharp)
        work.result.notes.append(
            f"{n} face{'s' if n > 1 else ''} left as {'they were' if n > 1 else 'it was'}: already sharp "
            "(restore.skip_sharp; a redo that picks a face restores it anyway)"
        )
    work.result.checks = [FaceCheck(number[id(f)], True, d.measure if d else None) for f, d in kept] + [
        FaceCheck(number[id(f)], False, d.measure) for f, d in sharp
    ]
    return [face for face, _ in kept]


# --- the identity check --------------------------------------------------------------------------


class IdentityCheck:
    """The restorer's identity check: dlib's two model files, read at its first use from the
    restorer's model folders (never downloaded: the check is optional), onto its device."""

    def __init__(self, model_dir: Path | None, device: torch.device) -> None:
        self._model_dir = model_dir
        self._device = device
        self._models: IdentityModels | None = None
        # Why the check cannot run, once that is known; "" while it can (or is not yet tried).
        self.why_not = ""

    def _ready(self) -> IdentityModels | None:
        if self._models is None and not self.why_not:
            try:
                self._models = load_identity_models(self._model_dir, self._device)
            except ModelError as exc:
                self.why_not = f"the identity check did not run: {exc}"
                log.warning("%s", self.why_not)
        return self._models

    def check(self, works: Sequence[StagedPhoto]) -> None:
        """Describe the faces of ``works`` (photos whose faces are all back, or that have none to
        restore) before and after, and set each face's distance, flag and descriptor in its
        photo's ``result.checks``."""
        todo = [w for w in works if w.image is not None and w.result.checks and w.cfg.identity_check]
        if not todo:
            return
        models = self._ready()
        if models is None:
            for work in todo:
                if any(c.restored for c in work.result.checks):
                    work.result.notes.append(self.why_not)
            return
        t0 = time.perf_counter()
        try:
            _describe(models, todo)
        except Exception as exc:  # a failed check must not fail the photo it only measures
            log.exception("the identity check failed")
            for work in todo:
                work.result.notes.append(f"the identity check failed: {exc}")
            return
        share = (time.perf_counter() - t0) / sum(len(w.result.checks) for w in todo)
        for work in todo:
            work.result.timings["identity"] = share * len(work.result.checks)
            _flagged_note(work)


def _describe(models: IdentityModels, works: Sequence[StagedPhoto]) -> None:
    before: list[np.ndarray] = []
    after: list[np.ndarray] = []
    points: list[np.ndarray] = []
    photos: list[np.ndarray] = []
    sharp_points: list[np.ndarray] = []
    for work in works:
        restored = np.concatenate(work.restored) if work.restored else None
        for k, check in enumerate(work.result.checks):
            if check.restored:
                assert restored is not None and work.crops is not None and work.affines is not None
                before.append(work.crops[k])
                after.append(restored[k])
                points.append(align.transform_points(work.affines[k], work.faces[k].landmarks))
            else:
                assert work.image is not None
                photos.append(work.image.bgr8)
                sharp_points.append(work.shown[check.index][0].landmarks)
    descriptors, distances = (
        models.compare(before, after, points) if before else (np.zeros((0, 128)), np.zeros(0))
    )
    left_alone = models.describe_faces(photos, sharp_points)
    i = j = 0
    for work in works:
        threshold = work.cfg.identity_threshold
        checks = []
        for check in work.result.checks:
            if check.restored:
                d = float(distances[i])
                checks.append(
                    dataclasses.replace(
                        check, distance=d, flagged=d > threshold, descriptor=_packed(descriptors[i])
                    )
                )
                i += 1
            else:
                checks.append(dataclasses.replace(check, descriptor=_packed(left_alone[j])))
                j += 1
        work.result.checks = checks


def _packed(descriptor: np.ndarray) -> bytes:
    return np.asarray(descriptor, dtype="<f4").tobytes()


def _flagged_note(work: StagedPhoto) -> None:
    flagged = sorted(c.index for c in work.result.checks if c.flagged)
    if not flagged:
        return
    n = len(flagged)
    restored = sum(c.restored for c in work.result.checks)
    if n == 1:
        faces = f"face {flagged[0]}"
    elif n <= _NAMED:
        faces = "faces " + ", ".join(map(str, flagged[:-1])) + f" and {flagged[-1]}"
    else:
        shown = ", ".join(map(str, flagged[: _NAMED - 1]))
        faces = f"{'all ' if n == restored else ''}{n} faces ({shown} and {n - _NAMED + 1} more)"
    work.result.notes.append(
        f"{faces} may not look like the same person (identity distance over "
        f"restore.identity_threshold = {work.cfg.identity_threshold:g})"
    )


# --- the files ------------------------------------------------------------------------------------


def load_identity_models(model_dir: Path | None, device: torch.device) -> IdentityModels:
    """dlib's two model files from the model folders, read and checked; ModelError says which
    is missing or wrong and what to do."""
    net_spec, predictor_spec = identity_specs()
    paths = [find_model(spec, model_dir) for spec in (net_spec, predictor_spec)]
    missing = [spec for spec, path in zip((net_spec, predictor_spec), paths) if path is None]
    if missing:
        names = " and ".join(spec.filename for spec in missing)
        fetch = command("models fetch " + " ".join(spec.name for spec in missing))
        raise ModelError(
            f"dlib's {names} {'is' if len(missing) == 1 else 'are'} in no model folder (`{fetch}` "
            "gets them, or set restore.identity_check = false)"
        )
    assert paths[0] is not None and paths[1] is not None
    net = read_identity_file(net_spec, paths[0])
    predictor = read_identity_file(predictor_spec, paths[1])
    assert isinstance(net, FaceDescriptorNet) and isinstance(predictor, ShapePredictor)
    # channels_last: a third less work a chip on a CPU (measured); the chips come in that layout.
    return IdentityModels(net.to(device).to(memory_format=torch.channels_last), predictor, device)
