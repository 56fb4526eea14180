"""Where gpen-watch keeps its files, per platform conventions (platformdirs).

Tests redirect everything through the XDG_* variables (Linux) rather than a global switch.
"""

from __future__ import annotations

import os
import sys
import warnings
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


def log_file() -> Path:
    """The service's log (rotated: ``.1``, ``.2``, ``.3`` beside it)."""
    return log_dir() / "gpen-watch.log"


def runtime_dir() -> Path:
    """Per-user folder for the control socket (not world-readable).

    Without XDG_RUNTIME_DIR (ssh sessions, cron, containers) platformdirs warns on every call and
    guesses /run/user/<uid>, which may not exist; the state dir is private to the user as well.
    """
    if sys.platform.startswith("linux") and not os.environ.get("XDG_RUNTIME_DIR"):
        return state_dir() / "run"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Path(platformdirs.user_runtime_dir(APP, appauthor=False))


def pictures_dir() -> Path:
    return Path(platformdirs.user_pictures_dir())
