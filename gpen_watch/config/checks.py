"""Which setting values are valid: ``validate`` raises ConfigError naming the first invalid
setting and what it may be, for the global settings and then each inbox's profile as it resolves
(``schema.inbox_config``). ``parse`` calls it once a config is filled; a new setting's check goes
here beside the others of its section."""

from __future__ import annotations

import typing
import urllib.parse

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
from gpen_watch.config.api_schema import api_checks, valid_bind_address
from gpen_watch.config.name_template import check_name_template
from gpen_watch.config.schedule import check as check_schedule
from gpen_watch.config.schema import Config, OutputConfig, RestoreConfig, inbox_config, inbox_label

# A setting's message begins with the file that set it ("/home/ann/.config/gpen-watch/config.toml: "),
# or with "" where a default or a --set gave it.
Where = typing.Callable[[str], str]


def validate(cfg: Config, where: Where = lambda name: "") -> Config:
    """``cfg``, once every setting is valid; ConfigError for the first that is not, ``where(name)``
    prefixing its message.

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
    _raise_first(checks, cfg.output.name_template, where)
    check_schedule(wk.schedule, where("workers.schedule"))
    for i, inbox in enumerate(w.inboxes):
        if not inbox.restore and not inbox.output:
            continue
        own = inbox_config(cfg, inbox)
        _raise_first(
            _profile_checks(own.restore, own.output),
            own.output.name_template,
            _in_inbox(where, i, inbox_label(i, inbox)),
        )
    return cfg


def _raise_first(checks: list[tuple[bool, str, str]], name_template: str, prefix: Where) -> None:
    """ConfigError for the first of ``checks`` that failed, else for the name template if it is
    invalid; ``prefix(setting)`` begins the message."""
    for ok, name, reason in checks:
        if not ok:
            raise ConfigError(f"{prefix(name)}{name}: {reason}")
    try:
        check_name_template(name_template)
    except ConfigError as exc:
        raise ConfigError(f"{prefix('output.name_template')}{exc}") from None


def _in_inbox(where: Where, index: int, label: str) -> Where:
    """An inbox's profile setting named where the file sets it, then the inbox."""
    return lambda name: f"{where(f'watch.inboxes[{index}].{name}')}{label}: "


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
