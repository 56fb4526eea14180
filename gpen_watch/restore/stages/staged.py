"""One photo on its way through the engine's stages, and the memory readings it carries."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gpen_watch.base.errors import ErrorKind
from gpen_watch.catalog.face_frames import GPEN_FRAME, FaceFrame
from gpen_watch.config import RestoreConfig, SettingsUsed
from gpen_watch.imaging.load import LoadedImage
from gpen_watch.restore.api import FileJob, FileResult, ModelKey
from gpen_watch.restore.runtime import memory
from gpen_watch.restore.stages.detect import Face, Prepared


@dataclass
class StagedPhoto:
    """One photo on its way through the stages."""

    job: FileJob
    result: FileResult
    # The restore settings this photo is restored with: its inbox's profile over the restorer's.
    cfg: RestoreConfig = field(default_factory=RestoreConfig)
    models: ModelKey = field(init=False)  # the model set its settings need
    image: LoadedImage | None = None
    detect_input: Prepared | None = None  # made on a decode thread when the detector supports it
    found: int = 0  # faces the detector found that can be faces of the photo
    faces: list[Face] = field(default_factory=list)  # those of them being restored
    # Every face the detector found, in its order, at the decoded size, with why it is left out
    # (None: it is restored): for the photo's views.
    shown: list[tuple[Face, str | None]] = field(default_factory=list)
    face_size: int = 0  # the side of the generator's crops (the model's resolution)
    face_frame: FaceFrame = GPEN_FRAME  # its family's template and paste mask
    crops: np.ndarray | None = None  # (F,S,S,3) uint8
    affines: np.ndarray | None = None  # (F,2,3)
    restored: list[np.ndarray] = field(default_factory=list)
    masks: list[np.ndarray] = field(default_factory=list)
    pending: int = 0  # faces not yet restored
    upscaled: int = 1  # the factor the photo was upscaled by (restore.upscale), 1 until it is
    cost: int = 0  # bytes of the memory budget this photo holds until its result is yielded

    def __post_init__(self) -> None:
        self.models = ModelKey.of(self.cfg)
        self.result.used = SettingsUsed.of(self.cfg, self.job.format, self.job.jpeg_quality)

    def fail(self, reason: str, oom: bool = False) -> None:
        """End this photo with ``reason``: nothing more is computed or written for it."""
        self.result.error, self.result.error_kind = reason, ErrorKind.FAILED
        self.result.out_of_memory = oom
        self.pending = 0
        self.image = None


def note_rss(result: FileResult, stage: str) -> None:
    """The process's resident memory as ``stage`` of this photo ends (the highest reading if the
    stage ran more than once, as restore does for a photo split over batches), and its peak."""
    now = memory.rss()
    if now is not None:
        result.rss_mb[stage] = max(now.now_mb, result.rss_mb.get(stage, 0.0))
        result.rss_mb["peak"] = now.peak_mb
