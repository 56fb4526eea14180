"""The cluster's shared token: where it lives, making it, and the environment that makes Ray use it.

Ray 2.60's token authentication refuses every node, driver and client that does not present the
cluster's token. Every Ray process gpen-watch starts, and the service's own connection, run with
``RAY_AUTH_MODE=token`` and ``RAY_AUTH_TOKEN_PATH`` naming this file, never the token itself on a
command line (where other users could read it in the process list).
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from gpen_watch import platform as platforms
from gpen_watch.base.errors import ClusterError
from gpen_watch.config import ClusterConfig
from gpen_watch.platform import paths

TOKEN_NAME = "ray-token"


def token_path(cfg: ClusterConfig) -> Path:
    return Path(cfg.token_file) if cfg.token_file else paths.config_dir() / TOKEN_NAME


def ensure_token(path: Path) -> bool:
    """Create the token file (readable by the user only) unless it exists; True if it was made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        check_token(path)
        return False
    with open(fd, "w", encoding="ascii") as f:
        f.write(secrets.token_hex(32))
    return True


def check_token(path: Path) -> None:
    """ClusterError unless ``path`` holds a token that only its owner can read."""
    try:
        st = os.stat(path)
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        raise ClusterError(
            f"{path}: no cluster token here; copy the file from the head machine (where "
            "`gpen-watch cluster head` made it) or set cluster.token_file"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ClusterError(f"{path}: cannot read the cluster token ({exc})") from None
    if platforms.current().posix_permissions and st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ClusterError(
            f"{path}: the cluster token is readable by other users (mode {stat.S_IMODE(st.st_mode):o}); "
            f"run `chmod 600 {path}`"
        )
    if len(text) < 32:
        raise ClusterError(f"{path}: not a cluster token (too short); copy it again from the head machine")


def ray_env(path: Path) -> dict[str, str]:
    """Environment for every Ray command and for the service's connection."""
    return {
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN_PATH": str(path),
        "RAY_USAGE_STATS_ENABLED": "0",
    }


def refused_token(path: Path) -> str:
    return (
        f"the cluster refused this machine's token ({path}); copy the token file from the head "
        "machine (where `gpen-watch cluster head` made it) to that place, mode 600"
    )
