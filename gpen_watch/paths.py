"""Where gpen-watch keeps its files, per platform conventions (platformdirs).

Tests redirect everything through the XDG_* variables (Linux) rather than a global switch.
"""

from __future__ import annotations

from pathlib import Path

import platformdirs

APP = "gpen-watch"


def config_dir() -> Path:
    return Path(platformdirs.user_config_dir(APP, appauthor=False))


def config_file() -> Path:
    return config_dir() / "config.toml"


def cache_dir() -> Path:
    return Path(platformdirs.user_cache_dir(APP, appauthor=False))


def model_cache_dir() -> Path:
    return cache_dir() / "models"


def state_dir() -> Path:
    return Path(platformdirs.user_state_dir(APP, appauthor=False))


def log_dir() -> Path:
    return Path(platformdirs.user_log_dir(APP, appauthor=False))


def runtime_dir() -> Path:
    """Per-user folder for the control socket and lock (not world-readable)."""
    try:
        return Path(platformdirs.user_runtime_dir(APP, appauthor=False))
    except Exception:  # pragma: no cover - platforms without a runtime dir
        return state_dir() / "run"


def pictures_dir() -> Path:
    return Path(platformdirs.user_pictures_dir())
