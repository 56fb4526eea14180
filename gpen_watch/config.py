"""The one typed configuration of gpen-watch.

Everything a user can set lives in the dataclasses below. A TOML file (``gpen-watch config path``)
fills them, and the command line overrides single settings by dotted name (``restore.face_batch``).
Validation names the setting and the reason.

Every setting, its default, its parsing and its validation are in this one module (some 480
lines) on purpose: it is the one typed place for configuration; the notes written into a new
config file are in config_template.py.
"""

from __future__ import annotations

import dataclasses
import difflib
import sys
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from string import Formatter
from typing import Any, Literal

from gpen_watch import paths
from gpen_watch.errors import ConfigError
from gpen_watch.modelstore.registry import DETECTOR_NAMES, GPEN_NAMES, UPSCALER_CONFIGS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

Precision = Literal["auto", "fp32", "fp16", "bf16"]
# What "auto" becomes on a given device.
ResolvedPrecision = Literal["fp32", "fp16", "bf16"]
OriginalsPolicy = Literal["archive", "keep", "delete"]
OutputFormat = Literal["same", "jpeg", "png", "webp", "tiff"]
# Which of the faces found are restored: every one, the largest, or the one nearest the centre.
FaceChoice = Literal["all", "largest", "center"]
# The number format ParseNet runs in; "auto" follows restore.precision. int8 is for CPUs only.
ParsePrecision = Literal["auto", "fp32", "bf16", "int8"]


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


@dataclass
class RestoreConfig:
    """How faces are found and restored (used by `restore` and by every worker)."""

    model: str = "GPEN-BFR-512"
    detector: str = "retinaface_resnet50"
    # Face-parsing mask for paste-back; without it a feathered ellipse is used.
    use_parse: bool = True
    # "auto": as restore.precision; "int8" (CPU only, elsewhere taken as auto) or "bf16" are faster
    # on a CPU and change the mask a little (README, "Settings").
    parse_precision: ParsePrecision = "auto"
    # Faces pasted back at under this many px get their mask from ParseNet run at 256 px (a
    # quarter of the work) instead of 512 px; 0: always 512, as upstream GPEN does.
    parse_small_below: int = 0
    detect_threshold: float = 0.9
    # Detection runs on a copy whose long side is at most this (the detector's cost grows with pixels).
    detect_max_side: int = 1000
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


@dataclass
class OutputConfig:
    format: OutputFormat = "same"
    jpeg_quality: int = 95
    # Fields: {stem} {ext} {name} {date} {model}. The result may not leave the outbox.
    name_template: str = "{stem}{ext}"
    originals: OriginalsPolicy = "archive"
    # Where originals go after success when originals = "archive" (default: <outbox>/../originals).
    archive_dir: Path | None = None


@dataclass
class WatchConfig:
    inboxes: list[InboxConfig] = field(default_factory=lambda: [InboxConfig(default_inbox())])
    outbox: Path = field(default_factory=default_outbox)
    # A file is taken once its size and mtime have not changed for this long (an empty file:
    # at least 30 s, so a copy that stalls before its first byte is not taken for an empty photo).
    settle_seconds: float = 1.0
    # Poll instead of OS events: needed for network shares (inotify misses remote writes).
    polling: bool = False
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
class Config:
    watch: WatchConfig = field(default_factory=WatchConfig)
    restore: RestoreConfig = field(default_factory=RestoreConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    workers: WorkerConfig = field(default_factory=WorkerConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)

    def validate(self) -> Config:
        _validate(self)
        return self


# --- loading ------------------------------------------------------------------------------------


def load(
    path: Path | None = None, overrides: dict[str, Any] | None = None, must_exist: bool = False
) -> Config:
    """Read the TOML file (defaults when it does not exist), apply overrides, validate.

    A problem with a value that came from the file names the file; one from an override does not.
    ``must_exist``: the user named this file (``--config``), so a missing one is a typo to report,
    not a reason to run on defaults.
    """
    if must_exist and path is not None and not path.exists():
        raise ConfigError(f"{path}: config file not found")
    path = path or paths.config_file()
    overrides = overrides or {}
    data: dict[str, Any] = {}
    if path.exists():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read config: {exc}") from exc
    try:
        cfg: Config = _build(Config, data, "")
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    for key, value in overrides.items():
        set_value(cfg, key, value)

    def where(name: str) -> str:
        section, _, key = name.partition(".")
        in_file = isinstance(data.get(section), dict) and key in data[section]
        return f"{path}: " if in_file and name not in overrides else ""

    _validate(cfg, where)
    return cfg


def set_value(cfg: Config, dotted: str, value: Any) -> None:
    """Set one setting by dotted name, converting strings from the command line."""
    section_name, _, name = dotted.partition(".")
    sections = [f.name for f in dataclasses.fields(cfg)]
    section = getattr(cfg, section_name) if section_name in sections else None
    hints = typing.get_type_hints(type(section)) if section is not None else {}
    if name not in hints:
        known = [f"{s}.{f.name}" for s in sections for f in dataclasses.fields(getattr(cfg, s))]
        raise ConfigError(f"{dotted}: no such setting{_suggest(dotted, known)}")
    setattr(section, name, _convert(hints[name], value, dotted))


def _suggest(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    if close:
        return f"; did you mean {close[0]}?"
    return f"; known: {', '.join(known)}"


def _build(cls: type, data: Any, prefix: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: expected a table, got {data!r}")
    hints = typing.get_type_hints(cls)
    known = [f.name for f in dataclasses.fields(cls)]
    for key in data:
        if key not in known:
            hint = _suggest(prefix + key, [prefix + k for k in known])
            raise ConfigError(f"{prefix}{key}: unknown setting{hint}")
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            kwargs[f.name] = _convert(hints[f.name], data[f.name], prefix + f.name)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{prefix}{f.name}: missing (required)")
    return cls(**kwargs)


def _convert(tp: Any, value: Any, name: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        unset = value is None or (isinstance(value, str) and value.lower() in ("", "none"))
        if unset and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _convert(inner[0], value, name)
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"{name}: must be one of {', '.join(map(str, args))}, got {value!r}")
        return value
    if origin is list:
        (item,) = args
        if isinstance(value, str) and value.strip().startswith("["):
            # A TOML list from the command line: --set 'workers.devices=["cuda:0", "cuda:1"]'.
            try:
                value = tomllib.loads(f"v = {value.strip()}")["v"]
            except tomllib.TOMLDecodeError as exc:
                raise ConfigError(f'{name}: expected a list like ["a", "b"] or a,b: {exc}') from None
        elif isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, list):
            raise ConfigError(f"{name}: expected a list, got {value!r}")
        return [_convert(item, v, f"{name}[{i}]") for i, v in enumerate(value)]
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if tp is InboxConfig and isinstance(value, (str, Path)):
            return InboxConfig(Path(value).expanduser())
        return _build(tp, value, name + ".")
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on"):
            return True
        if isinstance(value, str) and value.lower() in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{name}: expected true or false, got {value!r}")
    if tp in (int, float):
        if isinstance(value, bool):
            raise ConfigError(f"{name}: expected a number, got {value!r}")
        if tp is int and isinstance(value, float) and not value.is_integer():
            # int() would silently cut 1.5 to 1.
            raise ConfigError(f"{name}: expected a whole number, got {value!r}")
        try:
            return tp(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{name}: expected a number, got {value!r}") from None
    if tp is Path:
        if not isinstance(value, (str, Path)):
            raise ConfigError(f"{name}: expected a path, got {value!r}")
        return Path(value).expanduser()
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{name}: expected text, got {value!r}")
        return value
    return value


def _validate(cfg: Config, where: typing.Callable[[str], str] = lambda name: "") -> None:
    """Raise ConfigError for the first invalid setting; ``where(name)`` prefixes its message."""
    r, o, w, wk = cfg.restore, cfg.output, cfg.watch, cfg.workers
    checks: list[tuple[bool, str, str]] = [
        (
            r.model in GPEN_NAMES or r.model.endswith((".pth", ".pt")),
            "restore.model",
            f"must be one of {', '.join(GPEN_NAMES)} or a .pth file",
        ),
        (r.detector in DETECTOR_NAMES, "restore.detector", f"must be one of {', '.join(DETECTOR_NAMES)}"),
        (0.0 < r.detect_threshold <= 1.0, "restore.detect_threshold", "must be in (0, 1]"),
        (r.detect_max_side >= 64, "restore.detect_max_side", "must be at least 64"),
        (r.min_face >= 0, "restore.min_face", "must be 0 (restore every face) or a positive number"),
        (r.max_faces >= 0, "restore.max_faces", "must be 0 (no limit) or a positive number"),
        (0.0 <= r.strength <= 1.0, "restore.strength", "must be between 0 (leave faces as they are) and 1"),
        (r.smooth_below >= 0, "restore.smooth_below", "must be 0 (never smooth) or a positive number"),
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
    ]
    for ok, name, reason in checks:
        if not ok:
            raise ConfigError(f"{where(name)}{name}: {reason}")
    try:
        check_name_template(o.name_template)
    except ConfigError as exc:
        raise ConfigError(f"{where('output.name_template')}{exc}") from None


def _upscaler_factor(name: str) -> int | None:
    """The factor of a registry upscaler; None for "" or a file (read from the file when loaded)."""
    cfg = UPSCALER_CONFIGS.get(name)
    return cfg.scale if cfg is not None else None


def _valid_cluster_address(address: str) -> bool:
    if address in ("", "auto"):
        return True
    host, sep, port = address.rpartition(":")
    return bool(sep and host.strip("[]") and port.isdigit() and 0 < int(port) < 65536)


def _valid_device(dev: str) -> bool:
    if dev in ("auto", "cpu", "cuda"):
        return True
    kind, _, index = dev.partition(":")
    return kind == "cuda" and index.isdigit()


# The fields output.name_template may use (outbox.naming fills them in).
TEMPLATE_FIELDS = ("stem", "ext", "name", "date", "model")


def check_name_template(template: str) -> None:
    """Refuse anything but plain {field} substitutions of the known fields, in one file name. The
    one rule for the template: checked when the config loads, or the service would start and then
    stop at the first photo, and again by outbox.naming before it renders one."""
    allowed = set(TEMPLATE_FIELDS)
    try:
        fields = [(f, spec, conv) for _, f, spec, conv in Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise ConfigError(f"output.name_template: {exc}") from None
    for f, spec, conv in fields:
        if f not in allowed:
            raise ConfigError(
                f"output.name_template: unknown field {{{f}}}; use {', '.join(sorted(allowed))}"
            )
        if spec or conv:
            raise ConfigError(
                f"output.name_template: only plain fields like {{{f}}} are allowed "
                "(no conversion or format spec)"
            )
    if "/" in template.replace("{", "").replace("}", "") or "\\" in template or ".." in template:
        raise ConfigError("output.name_template: must be a file name, not a path")


# --- writing ------------------------------------------------------------------------------------


def to_toml(cfg: Config, notes: Mapping[str, str] | None = None, header: str = "") -> str:
    """Serialise a config as TOML (the subset the dataclasses use). With ``notes`` (dotted name ->
    one line), each setting gets its note above it as a "## " comment (``config init``). Unset
    settings are written as ``# name = ""``, which stays valid TOML with the "# " removed ("" reads
    back as unset)."""

    def setting(dotted: str, name: str, value: Any) -> list[str]:
        note = [f"## {notes[dotted]}"] if notes is not None else []
        return [*note, f'# {name} = ""' if value is None else f"{name} = {_toml_value(value)}"]

    lines: list[str] = [header] if header else []
    for section in dataclasses.fields(cfg):
        obj = getattr(cfg, section.name)
        tables: list[tuple[str, list[Any]]] = []
        lines.append(f"[{section.name}]")
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if isinstance(value, list) and value and dataclasses.is_dataclass(value[0]):
                tables.append((f.name, value))  # arrays of tables go after the plain keys
                continue
            lines += setting(f"{section.name}.{f.name}", f.name, value)
        for name, items in tables:
            dotted = f"{section.name}.{name}"
            for item in items:
                lines += ["", *([f"## {notes[dotted]}"] if notes is not None else []), f"[[{dotted}]]"]
                for f in dataclasses.fields(item):
                    lines += setting(f"{dotted}.{f.name}", f.name, getattr(item, f.name))
        lines.append("")
    return "\n".join(lines)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, str):
        return '"' + "".join(_toml_char(c) for c in value) + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} as TOML")


def _toml_char(c: str) -> str:
    # A TOML basic string: backslash and quote escaped, control characters (a newline in a path)
    # as \uXXXX, or the file would not load back.
    if c in ('"', "\\"):
        return "\\" + c
    if ord(c) < 0x20 or ord(c) == 0x7F:
        return f"\\u{ord(c):04X}"
    return c
