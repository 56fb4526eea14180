"""The settings of gpen-watch as typed dataclasses, with their defaults, an inbox's profile
resolved over the global settings (``inbox_config``), and which values are valid (``_validate``).

The lowest of the config modules: ``parse`` fills these from TOML and the command line,
``toml`` writes them back, and ``gpen_watch.config`` is the one public face of all three. It is
over 400 lines because the settings, their defaults and their checks are read together: a check
kept beside its dataclass is the one place a new setting is added.
"""

from __future__ import annotations

import dataclasses
import os
import typing
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gpen_watch.base.errors import ConfigError
from gpen_watch.catalog.licences import unknown_terms
from gpen_watch.catalog.providers import PROVIDERS
from gpen_watch.catalog.registry import (
    DETECTOR_NAMES,
    FACE_MODEL_NAMES,
    UPSCALER_CONFIGS,
    fidelity_families,
    has_fidelity,
)
from gpen_watch.config.api_schema import ApiConfig, api_checks, valid_bind_address
from gpen_watch.config.name_template import check_name_template
from gpen_watch.config.schedule import check as check_schedule
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

    def validate(self) -> Config:
        _validate(self)
        return self


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


def _validate(cfg: Config, where: typing.Callable[[str], str] = lambda name: "") -> None:
    """Raise ConfigError for the first invalid setting; ``where(name)`` prefixes its message.

    An inbox's profile is checked as the settings in effect for it (once the global ones passed,
    what fails there is the inbox's own doing), its message naming the inbox."""
    w, wk = cfg.watch, cfg.workers
    checks: list[tuple[bool, str, str]] = [
        *_profile_checks(cfg.restore, cfg.output),
        (w.settle_seconds >= 0, "watch.settle_seconds", "must not be negative"),
        (w.poll_interval > 0, "watch.poll_interval", "must be positive"),
        (w.rescan_seconds > 0, "watch.rescan_seconds", "must be positive"),
        (len(w.inboxes) > 0, "watch.inboxes", "needs at least one folder"),
        (wk.workers_per_device >= 1, "workers.workers_per_device", "must be at least 1"),
        (wk.cpu_workers >= 1, "workers.cpu_workers", "must be at least 1"),
        (wk.images_in_flight >= 0, "workers.images_in_flight", "must be 0 (auto) or a positive number"),
        (wk.image_timeout > 0, "workers.image_timeout", "must be positive"),
        (wk.max_attempts >= 1, "workers.max_attempts", "must be at least 1"),
        # An empty list starts no worker at all: photos would wait forever.
        (len(wk.devices) > 0, "workers.devices", "needs at least one device (auto, cpu, cuda or cuda:N)"),
        (
            all(d == "auto" or _valid_device(d) for d in wk.devices),
            "workers.devices",
            "each must be auto, cpu, cuda or cuda:N",
        ),
        (
            _valid_cluster_address(cfg.cluster.address),
            "cluster.address",
            'must be empty (off), "auto" or host:port (the Ray head, e.g. 192.168.1.10:6379)',
        ),
        (cfg.cluster.mb_in_flight >= 1, "cluster.mb_in_flight", "must be at least 1"),
        (0 <= cfg.dashboard.port <= 65535, "dashboard.port", "must be 0 (any free port) to 65535"),
        (
            valid_bind_address(cfg.dashboard.address),
            "dashboard.address",
            'must be an IP address of this machine, such as 127.0.0.1 (loopback only) or "::1"',
        ),
        (cfg.dashboard.views_mb >= 0, "dashboard.views_mb", "must be 0 (keep none) or more"),
        (not (why := unknown_terms(cfg.restore.accepted_terms)), "restore.accepted_terms", why),
        *api_checks(cfg.api),
        (
            cfg.notify.webhook == "" or valid_webhook_url(cfg.notify.webhook),
            "notify.webhook",
            f"{cfg.notify.webhook!r} is not an http:// or https:// URL with a host; write one such as"
            ' "https://example.com/hook", or "" to post no notices',
        ),
        (
            0 < cfg.notify.webhook_timeout <= 60,
            "notify.webhook_timeout",
            "must be more than 0 and at most 60 seconds",
        ),
    ]
    for ok, name, reason in checks:
        if not ok:
            raise ConfigError(f"{where(name)}{name}: {reason}")
    try:
        check_name_template(cfg.output.name_template)
    except ConfigError as exc:
        raise ConfigError(f"{where('output.name_template')}{exc}") from None
    check_schedule(wk.schedule, where("workers.schedule"))
    for i, inbox in enumerate(w.inboxes):
        if not inbox.restore and not inbox.output:
            continue
        own = inbox_config(cfg, inbox)
        label = inbox_label(i, inbox)
        for ok, name, reason in _profile_checks(own.restore, own.output):
            if not ok:
                raise ConfigError(f"{where(f'watch.inboxes[{i}].{name}')}{label}: {name}: {reason}")
        try:
            check_name_template(own.output.name_template)
        except ConfigError as exc:
            raise ConfigError(f"{where(f'watch.inboxes[{i}].output.name_template')}{label}: {exc}") from None


def _profile_checks(r: RestoreConfig, o: OutputConfig) -> list[tuple[bool, str, str]]:
    """(valid, setting, why not) for each restore.* and output.* setting."""
    return [
        (
            r.model in FACE_MODEL_NAMES or r.model.endswith((".pth", ".pt")),
            "restore.model",
            f"must be one of {', '.join(FACE_MODEL_NAMES)} or a .pth file",
        ),
        (r.detector in DETECTOR_NAMES, "restore.detector", f"must be one of {', '.join(DETECTOR_NAMES)}"),
        (r.provider in PROVIDERS, "restore.provider", f"must be one of {', '.join(PROVIDERS)}"),
        (0.0 < r.detect_threshold <= 1.0, "restore.detect_threshold", "must be in (0, 1]"),
        (r.detect_max_side >= 64, "restore.detect_max_side", "must be at least 64"),
        (r.detect_shrink_above >= 64, "restore.detect_shrink_above", "must be at least 64"),
        (r.min_face >= 0, "restore.min_face", "must be 0 (restore every face) or a positive number"),
        (r.max_faces >= 0, "restore.max_faces", "must be 0 (no limit) or a positive number"),
        (0.0 <= r.strength <= 1.0, "restore.strength", "must be between 0 (leave faces as they are) and 1"),
        (
            0.0 <= r.fidelity <= 1.0,
            "restore.fidelity",
            "must be between 0 (the codebook's face, the most restored) and 1 (the most faithful to the photo)",
        ),
        (
            r.fidelity == RestoreConfig.fidelity or has_fidelity(r.model),
            "restore.fidelity",
            f"is a weight of {' and '.join(fidelity_families())} only, and restore.model = {r.model} takes "
            f"none: remove it, or choose restore.model = {' or '.join(fidelity_families())} (an inbox's "
            "profile may set both)",
        ),
        (r.smooth_below >= 0, "restore.smooth_below", "must be 0 (never smooth) or a positive number"),
        (
            0.0 < r.identity_threshold <= 2.0,
            "restore.identity_threshold",
            "must be a descriptor distance above 0 and at most 2 (0.32 measured: docs/identity.md)",
        ),
        (
            0.0 < r.sharp_above <= 5.0,
            "restore.sharp_above",
            "must be a detail measure above 0 and at most 5 (0.27 measured: docs/identity.md)",
        ),
        (
            r.parse_small_below >= 0,
            "restore.parse_small_below",
            "must be 0 (always parse at 512 px) or a size in px",
        ),
        (r.face_batch >= 0, "restore.face_batch", "must be 0 (auto) or a positive number"),
        (r.max_side == 0 or r.max_side >= 256, "restore.max_side", "must be 0 (off) or at least 256"),
        (r.max_megapixels > 0, "restore.max_megapixels", "must be positive"),
        (r.memory_mb == 0 or r.memory_mb >= 256, "restore.memory_mb", "must be 0 (auto) or at least 256"),
        (
            _valid_device(r.device) or r.device == "mps",
            "restore.device",
            "must be auto, cpu, cuda, cuda:N or mps",
        ),
        (r.upscale in (1, 2, 4), "restore.upscale", "must be 1 (off), 2 or 4"),
        (
            r.upscale_model == ""
            or r.upscale_model in UPSCALER_CONFIGS
            or r.upscale_model.endswith((".pth", ".pt")),
            "restore.upscale_model",
            f"must be empty (the default for the factor), one of {', '.join(UPSCALER_CONFIGS)} or a .pth file",
        ),
        (
            r.upscale == 1 or _upscaler_factor(r.upscale_model) in (None, r.upscale),
            "restore.upscale_model",
            f"{r.upscale_model} upscales x{_upscaler_factor(r.upscale_model)}, but restore.upscale is "
            f"{r.upscale}: choose a model of that factor, or leave restore.upscale_model empty",
        ),
        (1 <= o.jpeg_quality <= 100, "output.jpeg_quality", "must be between 1 and 100"),
    ]


def _upscaler_factor(name: str) -> int | None:
    """The factor of a registry upscaler; None for "" or a file (read from the file when loaded)."""
    cfg = UPSCALER_CONFIGS.get(name)
    return cfg.scale if cfg is not None else None


def _valid_cluster_address(address: str) -> bool:
    if address in ("", "auto"):
        return True
    host, sep, port = address.rpartition(":")
    return bool(sep and host.strip("[]") and port.isdigit() and 0 < int(port) < 65536)


def valid_webhook_url(url: str) -> bool:
    """An http(s) URL with a host: the only kind notify.webhook posts to."""
    try:
        parts = urllib.parse.urlsplit(url)
        return parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
    except ValueError:
        return False


def _valid_device(dev: str) -> bool:
    if dev in ("auto", "cpu", "cuda"):
        return True
    kind, _, index = dev.partition(":")
    return kind == "cuda" and index.isdigit()
