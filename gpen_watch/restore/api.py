"""The contract between the restoration engine and its callers (`restore` CLI, daemon workers).

Kept free of torch imports so callers can type against it; `Restorer` itself lives in
``gpen_watch.restore.engines.restorer`` and is imported only inside worker processes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from gpen_watch.base.errors import ErrorKind
from gpen_watch.base.strenum import StrEnum
from gpen_watch.catalog.registry import DEFAULT_UPSCALERS, face_family, model_label
from gpen_watch.config import RestoreConfig, SettingsUsed


@dataclass(frozen=True)
class ModelKey:
    """The restore settings that decide which generator-side models a photo needs (its model set,
    restore.engines.modelsets)."""

    model: str
    use_parse: bool
    upscale: int
    upscale_model: str

    @classmethod
    def of(cls, cfg: RestoreConfig) -> ModelKey:
        return cls(cfg.model, cfg.use_parse, cfg.upscale, cfg.upscale_model if cfg.upscale > 1 else "")

    @property
    def model_name(self) -> str:
        return model_label(self.model)

    @property
    def label(self) -> str:
        """For the log: "GPEN-BFR-512, feathered mask, upscaled x2" (GFPGAN's and CodeFormer's plain
        mask is a square one)."""
        text = self.model_name
        if not self.use_parse:
            text += f", {face_family(self.model).frame.mask.plain_label}"
        if self.upscale > 1:
            text += f", upscaled x{self.upscale}"
        return text

    @property
    def networks(self) -> str:
        """For the status, the networks it holds: "GPEN-BFR-512 + ParseNet + RealESRNet-x2"."""
        parts = [self.model_name]
        if self.use_parse:
            parts.append("ParseNet")
        if self.upscale > 1:
            parts.append(
                Path(self.upscale_model).name if self.upscale_model else DEFAULT_UPSCALERS[self.upscale]
            )
        return " + ".join(parts)


@dataclass
class FileJob:
    """One image to restore: read ``src``, write the result to ``dst`` (a temp name the caller renames)."""

    src: Path
    dst: Path
    # "same" keeps the input's format; else jpeg/png/webp/tiff.
    format: str = "same"
    jpeg_quality: int = 95
    # Scale factor applied on top of restore.max_side (the daemon lowers it after an out-of-memory).
    scale: float = 1.0
    # The restore settings of this photo's inbox (its profile); None: the restorer's own. Of these
    # the restorer takes only what may differ per inbox (config.GLOBAL_ONLY stay its own).
    restore: RestoreConfig | None = None
    # What the profile changed, for the result's notes ("model GPEN-BFR-256 (inbox ~/Phone)").
    note: str = ""
    # A folder the engine writes this photo's views into once its result is written (previews,
    # thumbnail, face crops, faces.json: docs/architecture.md); None: no views.
    views: Path | None = None
    # A redo's picked faces, by their numbers in detection order (faces.json's "index", the photo
    # page's face numbers): only these are restored. None: every face the settings choose.
    face_ids: tuple[int, ...] | None = None
    # Whose settings ``restore`` holds, for a message about them ("this redo's settings
    # (restore.upscale=2)"); "": the photo's inbox's.
    settings_label: str = ""
    # The file system (``st_dev``) ``dst``'s folder was on when the job was handed out; a result
    # is written only while it still is (``base.fsutil.require_device``). None: not checked.
    dst_device: int | None = None


def face_ids_refusal(name: str, detected: int, ids: Iterable[int]) -> str | None:
    """Why the face numbers ``ids`` are not all faces of the photo ``name``, whose detector found
    ``detected`` faces (numbered from 0 in its order, as its page shows them); None when they are."""
    bad = sorted({i for i in ids if not 0 <= i < detected})
    if not bad:
        return None
    faces = f"face {bad[0]}" if len(bad) == 1 else f"faces {_and(bad)}"
    if detected < 2:
        has = "no face (the detector found none)" if detected == 0 else "one face, face 0"
        return f"{name} has {has}; there is no {faces}"
    has = _and(range(detected)) if detected <= 6 else f"0 to {detected - 1}"
    return f"{name} has faces {has}; {faces} {'is not one' if len(bad) == 1 else 'are not any'} of them"


def _and(numbers: Iterable[int]) -> str:
    """The numbers in words: "0, 1 and 2"."""
    words = [str(n) for n in numbers]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


class Stage(StrEnum):
    """Where one photo is in the engine, for status (``PhotoProgress``)."""

    WAITING = "waiting"  # taken, waiting for a decode thread or for its turn on the device
    DECODING = "decoding"  # being read, oriented and pre-scaled
    DETECTING = "detecting"  # faces being found and aligned
    UPSCALING = "upscaling"  # the whole photo upscaled (restore.upscale): tiles done of total
    RESTORING = "restoring"  # faces through the generator: faces done of total
    WRITING = "writing"  # faces pasted back, the result encoded and written


@dataclass(frozen=True)
class PhotoProgress:
    """One photo an engine holds and where it is; ``done`` of ``total`` counts faces
    (restoring) or tiles (upscaling), 0 of 0 in the other stages."""

    src: str  # the job's src, as the engine was given it
    stage: Stage
    done: int = 0
    total: int = 0


@dataclass(frozen=True)
class FaceCheck:
    """What the engine measured of one face the detector found (docs/identity.md): a face it
    restored, or one it left as it was because it was already sharp."""

    index: int  # the face's number on the photo's page: its place in the detector's order
    restored: bool
    # restore.skip_sharp's detail measure of the face before restoring; None: not measured.
    detail: float | None = None
    # How far the restored face's descriptor moved from the original's; None: not checked.
    distance: float | None = None
    flagged: bool = False  # distance over the photo's restore.identity_threshold
    # The original face's descriptor: 128 float32, little-endian; b"": not described.
    descriptor: bytes = b""


@dataclass
class FileResult:
    src: Path
    ok: bool
    dst: Path | None = None
    faces: int = 0  # restored
    # Faces the detector found that can be faces of the photo, restored or not (a redo's picked
    # faces, strength 0 and the faces setting leave some out).
    found: int = 0
    # Human-readable reason when ok is False ("not an image", "truncated JPEG", ...).
    error: str | None = None
    error_kind: ErrorKind | None = None
    # Notes a user should see: "no face found", "pre-scaled from 8000x6000 to 4096x3072".
    notes: list[str] = field(default_factory=list)
    # Seconds per stage: decode, prescale, detect, align, restore, identity (the identity check's
    # share), paste, encode.
    timings: dict[str, float] = field(default_factory=dict)
    # Resident memory of the restorer process (MB) when each stage of this photo ended, and "peak":
    # the process's high-water mark by then. Empty where the OS does not tell (no /proc).
    rss_mb: dict[str, float] = field(default_factory=dict)
    width: int = 0
    height: int = 0
    # Format actually written ("JPEG", "PNG"...): a file's content, not its name, decides "same".
    format: str | None = None
    out_of_memory: bool = False
    # Each restored face's checks, and each face left as it was because it was already sharp.
    checks: list[FaceCheck] = field(default_factory=list)
    # The settings this photo was restored with (its profile or redo over the engine's own), with
    # the format it was written in; None: the engine did not say (a stand-in that does not).
    used: SettingsUsed | None = None


class ModelSetWatch(Protocol):
    """The model sets an engine holds now, and the hook it calls after each load and unload."""

    @property
    def loaded(self) -> list[ModelKey]:
        """Least recently used first."""
        ...

    on_change: Callable[[list[ModelKey]], None] | None


class Engine(Protocol):
    """What a worker drives: ``restore.engines.restorer.Restorer``, or a stand-in (tests, benchmarks).

    The worker (``dispatch.worker_main``, ``cluster.actor``) reads the hints once it is loaded
    (``device_label``, ``engine_label``, ``engine_note``, ``read_ahead``, ``loaded``, ``memory_budget_mb``, ``models``), the progress
    with each heartbeat (``steps``, ``restoring``, ``progress``), and drives ``restore_files``
    over a live source until it is asked to stop.
    """

    @property
    def device_label(self) -> str:
        """What status and the tray show for its device ("Apple GPU (mps)"); "": say the slot's."""
        ...

    @property
    def engine_label(self) -> str:
        """What runs its networks, for status and the dashboard: "PyTorch 2.14.1", "ONNX Runtime
        1.24.1, OpenVINO provider"; "": it says nothing (a stand-in)."""
        ...

    @property
    def engine_note(self) -> str:
        """Why what runs is not what the settings asked for, in one sentence ("restore.provider =
        directml: ... is not installed, so the CPU provider runs instead (pip install ...)"); ""
        when it is."""
        ...

    @property
    def read_ahead(self) -> int:
        """Photos worth handing it at once; 0: it says nothing and the pool picks."""
        ...

    @property
    def loaded(self) -> str:
        """What it loaded, said once at start ("GPEN-BFR-512 (512 px), retinaface, ...")."""
        ...

    @property
    def memory_budget_mb(self) -> int:
        """The memory it keeps within (restore.memory_mb resolved); 0: it keeps no budget."""
        ...

    @property
    def models(self) -> ModelSetWatch | None:
        """The model sets it holds, for the status; None: it has no sets to tell of."""
        ...

    @property
    def steps(self) -> int:
        """Units of device work finished so far (tells a slow photo from a hung one); 0: it
        keeps no count, and its photos get the plain per-image timeout."""
        ...

    @property
    def restoring(self) -> int:
        """Photos past decoding and not yet handed back; -1: it keeps no count."""
        ...

    @property
    def progress(self) -> tuple[PhotoProgress, ...]:
        """The photos it holds now, each with its stage; read from the heartbeat's thread, so
        it must be safe to call while ``restore_files`` runs. (): it says nothing."""
        ...

    def restore_files(self, jobs: Iterable[FileJob | None]) -> Iterator[FileResult]:
        """Restore each job's file, yielding results as photos finish. ``jobs`` may be a live
        source that yields None for "nothing right now" (see ``Restorer.restore_files``)."""
        ...

    def stop(self) -> None:
        """Ask a running ``restore_files`` (on another thread) to end at its next step."""
        ...

    def close(self) -> None:
        """Release its threads; called once, after the last ``restore_files``."""
        ...


class EngineFactory(Protocol):
    """What ``dispatch.protocol.DEFAULT_FACTORY`` (or a stand-in's "module:attr") names."""

    def __call__(self, cfg: RestoreConfig, device: str, *, threads: int | None = None) -> Engine: ...
