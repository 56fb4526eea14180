"""The settings of gpen-watch as typed dataclasses, with their defaults, and an inbox's profile
resolved over the global settings (``inbox_config``).

The lowest of the config modules: ``checks`` says which values are valid, ``parse`` fills these
from TOML and the command line, ``toml`` writes them back, and ``gpen_watch.config`` is the one
public face of them all.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gpen_watch.config.api_schema import ApiConfig
from gpen_watch.platform import paths

Precision = Literal["auto", "fp32", "fp16", "bf16"]
# What "auto" becomes on a given device.
ResolvedPrecision = Literal["fp32", "fp16", "bf16"]
OriginalsPolicy = Literal["archive", "keep", "delete"]
UnkeptResult = Literal["remove", "keep"]
OutputFormat = Literal["same", "jpeg", "png", "webp", "tiff"]
# Which of the faces found are restored: every one, the largest, or the one nearest the centre.
FaceChoice = Literal["all", "largest", "center"]
# The number format ParseNet runs in; "auto" follows restore.precision. int8 is for CPUs only.
ParsePrecision = Literal["auto", "fp32", "bf16", "int8"]
# How inboxes are watched: "auto" polls those on network and FUSE filesystems (where OS events
# miss other machines' writes) and uses OS events elsewhere; "always" and "never" decide for all.
PollingMode = Literal["auto", "always", "never"]
# What runs the networks: PyTorch, or ONNX Runtime on restore.provider (the project's own exports).
EngineName = Literal["torch", "onnx"]


DASHBOARD_PORT = 4736


def default_inbox() -> Path:
    return paths.pictures_dir() / "GPEN" / "inbox"


def default_outbox() -> Path:
    return paths.pictures_dir() / "GPEN" / "outbox"


@dataclass
class InboxConfig:
    """One watched folder."""

    path: Path
    recursive: bool = True
    # Outputs of this inbox go here instead of the global outbox.
    outbox: Path | None = None
    # This inbox's profile: its own restore.* and output.* settings (typed, by name), over the
    # global [restore] and [output]; ``inbox_config`` gives the effective settings.
    restore: dict[str, Any] = field(default_factory=dict)
    output: dict[str, Any] = field(default_factory=dict)


@dataclass
class RestoreConfig:
    """How faces are found and restored (used by `restore` and by every worker)."""

    model: str = "GPEN-BFR-512"
    detector: str = "retinaface_resnet50"
    # Face-parsing mask for paste-back; without it a feathered ellipse is used.
    use_parse: bool = True
    # "auto": as restore.precision; "int8" (CPU only, elsewhere taken as auto) or "bf16" are faster
    # on a CPU and change the mask a little (docs/settings.md).
    parse_precision: ParsePrecision = "auto"
    # Faces pasted back at under this many px get their mask from ParseNet run at 256 px (a
    # quarter of the work) instead of 512 px; 0: always 512, as upstream GPEN does.
    parse_small_below: int = 0
    detect_threshold: float = 0.9
    # Photos whose long side is over detect_shrink_above are detected on a copy whose long side is
    # detect_max_side (the detector's cost grows with pixels); smaller ones at their own size, where
    # shrinking costs small faces. 1000 and 1500 are upstream GPEN's; never enlarged.
    detect_max_side: int = 1000
    detect_shrink_above: int = 1500
    # Faces smaller than this (eye-to-mouth extent, pixels) are left alone. 0: restore every face
    # the detector reports, as upstream GPEN does (less duplicates and faces under 8 px: faces.py).
    min_face: int = 0
    # Which faces, of those at least min_face, are restored; max_faces then keeps the N largest
    # (0: no limit). Faces left out are not computed.
    faces: FaceChoice = "all"
    max_faces: int = 0
    # How much of the restored face replaces the original: 1 all of it (upstream GPEN's default),
    # 0 none (the photo comes back as it was); blended in crop space before paste-back.
    strength: float = 1.0
    # CodeFormer's fidelity weight w (a model family that takes one: registry.has_fidelity): 0 the
    # codebook's face alone, 1 the most faithful to the photo; 0.5 is CodeFormer's own default.
    fidelity: float = 0.5
    # Restored faces whose detection box has a side under this many pixels are smoothed (3x3)
    # before paste-back, as upstream GPEN does; 0: never.
    smooth_below: int = 100
    # Faces per generator forward pass; 0 picks a size from the device's free memory.
    face_batch: int = 0
    # Images whose long side exceeds this are pre-scaled before anything else (0: never).
    max_side: int = 4096
    precision: Precision = "auto"
    channels_last: bool = True
    # "auto": the first CUDA GPU, else Apple's GPU (mps), else the CPU.
    device: str = "auto"
    # Checked before the download cache; for offline machines (env GPEN_WATCH_MODEL_DIR too).
    model_dir: Path | None = None
    # The model terms the user has seen and said yes to (catalog.licences: "GPEN", "PSFR-GAN",
    # "S-Lab-1.0"): a model whose terms do not allow paid work is downloaded only once its are here.
    accepted_terms: list[str] = field(default_factory=list)
    # Largest image accepted, in megapixels, before anything is decoded (decompression bombs).
    max_megapixels: float = 200.0
    # Resident memory (MB) one restorer process aims to stay under: each daemon worker, or
    # `gpen-watch restore`. Photos are read ahead only while their decoded frames fit beside the
    # models; over it, freed memory is handed back between photos. 0: a quarter of the machine's
    # memory, at least 2048.
    memory_mb: int = 0
    # Background super-resolution factor, 1 (off), 2 or 4: the whole photo is upscaled after
    # pre-scaling (so the result's long side is at most max_side * upscale) and the faces are
    # restored into the upscaled photo.
    upscale: int = 1
    # Which upscaler runs: "" for upstream GPEN's RealESRNet of that factor, another registry name,
    # or an RRDBNet .pth file of that factor.
    upscale_model: str = ""
    # "onnx": the networks run through ONNX Runtime, exported from the same weights files at first
    # use; restore.provider then names its execution provider (catalog.providers).
    engine: EngineName = "torch"
    provider: str = "cpu"
    # Each restored face's identity distance (docs/identity.md): dlib's face descriptors of the
    # face before and after restoring, where its model files are present; a face further than
    # identity_threshold from itself is flagged "may not look like the same person", and faces of
    # a batch closer than it are grouped as one person.
    identity_check: bool = True
    identity_threshold: float = 0.32
    # Faces whose detail measure (docs/identity.md) is at least sharp_above are left as they are,
    # decided before the generator runs.
    skip_sharp: bool = False
    sharp_above: float = 0.27


@dataclass
class OutputConfig:
    format: OutputFormat = "same"
    jpeg_quality: int = 95
    # Fields: {stem} {ext} {name} {date} {model}. The result may not leave the outbox.
    name_template: str = "{stem}{ext}"
    originals: OriginalsPolicy = "archive"
    # Where originals go after success when originals = "archive" (default: <outbox>/../originals).
    archive_dir: Path | None = None
    # Of two results of a photo compared on the dashboard, the one not kept: removed, or left in
    # the outbox under its own name (no longer gpen-watch's result).
    unkept_result: UnkeptResult = "remove"


@dataclass
class WatchConfig:
    inboxes: list[InboxConfig] = field(default_factory=lambda: [InboxConfig(default_inbox())])
    outbox: Path = field(default_factory=default_outbox)
    # A file is taken once its size and mtime have not changed for this long (an empty file:
    # at least 30 s, so a copy that stalls before its first byte is not taken for an empty photo).
    settle_seconds: float = 1.0
    # "auto": poll inboxes on network shares and FUSE mounts (OS events miss remote writes),
    # OS events elsewhere; "always" or "never" for every inbox.
    polling: PollingMode = "auto"
    poll_interval: float = 2.0
    # Full rescan of the inboxes as a safety net for lost events.
    rescan_seconds: float = 60.0


@dataclass
class WorkerConfig:
    # "auto": every CUDA GPU, else CPU. Or a list like ["cuda:0", "cuda:1"] or ["cpu"].
    devices: list[str] = field(default_factory=lambda: ["auto"])
    workers_per_device: int = 1
    # Workers when running on CPU; each uses cores // cpu_workers torch threads.
    cpu_workers: int = 1
    # Images handed to one worker at once, so CPU stages overlap with the GPU. 0 (auto): what
    # the worker's engine asks for: 2 per decode thread, and on a GPU enough to fill a face batch.
    images_in_flight: int = 0
    image_timeout: float = 600.0
    max_attempts: int = 3
    # When workers take photos ("mon-fri 19:00-07:00": config.schedule); empty: always.
    schedule: list[str] = field(default_factory=list)
    pause_on_battery: bool = True  # no new photo while on battery


@dataclass
class ClusterConfig:
    """Restorer workers on other machines, through a Ray cluster (the optional extra `cluster`)."""

    # "" (off), "auto" (the Ray node already running on this machine) or "host:port" of its head.
    address: str = ""
    # The cluster's shared token (Ray's token authentication); unset: `ray-token` in gpen-watch's
    # config folder, which `gpen-watch cluster head` creates, readable by the user only.
    token_file: Path | None = None
    # GPUs (or the CPU) of this machine keep their own local workers beside the cluster's.
    local_workers: bool = True
    # Photo bytes in flight per remote worker (MB); more photos wait on this machine.
    mb_in_flight: int = 256


@dataclass
class DashboardConfig:
    """The local web page of the running service (docs/dashboard.md)."""

    enabled: bool = True
    # 4736 spells GPEN on a phone keypad; 0 takes any free port (the URL is in `dashboard --url`).
    port: int = DASHBOARD_PORT
    # Loopback only unless changed on purpose: any other address shows the photos to the network.
    address: str = "127.0.0.1"
    # The before/after previews and face crops kept for the newest photos, in MB in all.
    views_mb: int = 500


@dataclass
class NotifyConfig:
    """Notices beyond the tray (docs/notices.md): on the desktop without a tray, and a webhook."""

    # Without a tray (--no-tray, or none could be shown), the service shows the notices itself where
    # a desktop session exists; with a tray, the tray shows them.
    desktop: bool = True
    # An http(s) URL each finished batch, failure burst and problem is POSTed to as JSON; "": off.
    webhook: str = ""
    # Seconds a post waits for the server to connect and to answer.
    webhook_timeout: float = 5.0


@dataclass
class Config:
    watch: WatchConfig = field(default_factory=WatchConfig)
    restore: RestoreConfig = field(default_factory=RestoreConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    workers: WorkerConfig = field(default_factory=WorkerConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    dashboard: DashboardConfig = field(default_factory=DashboardConfig)
    api: ApiConfig = field(default_factory=ApiConfig)
    notify: NotifyConfig = field(default_factory=NotifyConfig)


# --- per-inbox profiles -----------------------------------------------------------------------

# Settings one restorer process holds for every photo it restores, whichever inbox a photo came
# from: an inbox cannot have its own (each worker serves every inbox).
GLOBAL_ONLY: dict[str, str] = {
    "restore.device": "every inbox's photos go through the same workers, on the same device",
    "restore.precision": "each worker runs all its models in one number format, chosen for its device",
    "restore.parse_precision": "each worker prepares one face parser, shared by every inbox's models",
    "restore.parse_small_below": "it decides the passes of the one face parser each worker shares between inboxes",
    "restore.channels_last": "each worker lays out all its models' memory one way, chosen for its device",
    "restore.face_batch": "it sizes each worker's generator passes, which serve every inbox",
    "restore.memory_mb": "it is the budget of a whole worker process, shared by every inbox's models and photos",
    "restore.model_dir": "every worker looks for every model in the same folders",
    "restore.accepted_terms": "the terms of a model are accepted once, for every inbox",
    "restore.engine": "each worker loads its networks into one runtime, shared by every inbox",
    "restore.provider": "each worker runs its networks on one ONNX Runtime provider, for every inbox",
    "restore.max_megapixels": "it protects the worker processes' memory, which every inbox shares",
}
_PROFILE_SECTIONS = ("restore", "output")


def inbox_label(index: int, inbox: InboxConfig) -> str:
    """How messages name an inbox: ``watch.inboxes[1] (~/Phone)``."""
    return f"watch.inboxes[{index}] ({short_path(inbox.path)})"


def short_path(path: Path) -> str:
    """``path`` with the home folder written as ~, as users write it in the file."""
    home, text = str(Path.home()), str(path)
    if text == home or text.startswith(home + os.sep):
        return "~" + text[len(home) :]
    return text


def inbox_config(cfg: Config, inbox: InboxConfig) -> Config:
    """The settings in effect for photos of ``inbox``: the global config with the inbox's own
    restore.* and output.* settings over it. The one place a profile is resolved; an inbox that
    is no longer configured (``outbox.naming.find_inbox`` makes a plain one) gets the global ones."""
    if not inbox.restore and not inbox.output:
        return cfg
    return dataclasses.replace(
        cfg,
        restore=dataclasses.replace(cfg.restore, **inbox.restore),
        output=dataclasses.replace(cfg.output, **inbox.output),
    )


def inbox_profiles(cfg: Config) -> list[tuple[str, RestoreConfig]]:
    """(label, restore settings in effect) of each inbox that has restore settings of its own."""
    return [
        (inbox_label(i, inbox), inbox_config(cfg, inbox).restore)
        for i, inbox in enumerate(cfg.watch.inboxes)
        if inbox.restore
    ]


def profile_note(cfg: Config, inbox: InboxConfig) -> str:
    """What an inbox's photos get that the global settings would not give them, for the result's
    notes ("model GPEN-BFR-256, strength 0.8 (inbox ~/Phone)"); "" when nothing differs."""
    own = inbox_config(cfg, inbox)
    parts = [
        f"{name} {getattr(getattr(own, section), name)}"
        for section in _PROFILE_SECTIONS
        for name in getattr(inbox, section)
        if getattr(getattr(own, section), name) != getattr(getattr(cfg, section), name)
    ]
    if not parts:
        return ""
    return f"{', '.join(parts)} (inbox {short_path(inbox.path)})"
