"""The one typed configuration of gpen-watch.

Everything a user can set lives in dataclasses. A TOML file (``gpen-watch config path``) fills
them, and the command line overrides single settings by dotted name (``restore.face_batch``,
``watch.inboxes[1].restore.strength``). Validation names the setting and the reason.

An inbox may carry its own restore.* and output.* settings (its profile); ``inbox_config`` is the
one place they are resolved over the global ones.

This package is the configuration's one public face: callers write ``from gpen_watch import config;
config.load(...)`` or ``from gpen_watch.config import RestoreConfig``. The work is split by job,
each module importing only those below it:

- ``schema``: the dataclasses, their defaults and profile resolution;
- ``checks``: which values are valid (``validate``), each refusal naming the setting;
- ``parse``: reading TOML, converting values, command-line overrides;
- ``toml``: writing a config back as TOML;
- ``used``: the settings one photo was really restored with, recorded with its result.

The notes written into a new config file are in ``template``; the ``config`` command is
gpen_watch.cli.config.
"""

from __future__ import annotations

from gpen_watch.base.errors import ConfigError
from gpen_watch.catalog.registry import DETECTOR_NAMES, FACE_MODEL_NAMES, UPSCALER_CONFIGS
from gpen_watch.config.api_schema import ApiConfig
from gpen_watch.config.checks import validate
from gpen_watch.config.name_template import TEMPLATE_FIELDS, NameSource, check_name_template, name_fields
from gpen_watch.config.parse import from_text, load, set_value
from gpen_watch.config.schema import (
    GLOBAL_ONLY,
    ClusterConfig,
    Config,
    DashboardConfig,
    EngineName,
    FaceChoice,
    InboxConfig,
    NotifyConfig,
    OriginalsPolicy,
    OutputConfig,
    OutputFormat,
    ParsePrecision,
    PollingMode,
    Precision,
    ResolvedPrecision,
    RestoreConfig,
    WatchConfig,
    WorkerConfig,
    default_inbox,
    default_outbox,
    inbox_config,
    inbox_label,
    inbox_profiles,
    profile_note,
    short_path,
)
from gpen_watch.config.toml import to_toml
from gpen_watch.config.used import SettingsUsed

__all__ = [
    "DETECTOR_NAMES",
    "FACE_MODEL_NAMES",
    "GLOBAL_ONLY",
    "TEMPLATE_FIELDS",
    "UPSCALER_CONFIGS",
    "ApiConfig",
    "ClusterConfig",
    "Config",
    "ConfigError",
    "DashboardConfig",
    "EngineName",
    "FaceChoice",
    "InboxConfig",
    "NameSource",
    "NotifyConfig",
    "OriginalsPolicy",
    "OutputConfig",
    "OutputFormat",
    "ParsePrecision",
    "PollingMode",
    "Precision",
    "ResolvedPrecision",
    "RestoreConfig",
    "SettingsUsed",
    "WatchConfig",
    "WorkerConfig",
    "check_name_template",
    "default_inbox",
    "default_outbox",
    "from_text",
    "inbox_config",
    "inbox_label",
    "inbox_profiles",
    "load",
    "name_fields",
    "profile_note",
    "set_value",
    "short_path",
    "to_toml",
    "validate",
]
