"""The [api] section (docs/api.md): where the HTTP API listens for other machines, its TLS
certificate, the web pages allowed to call it, and each token's limits; with its checks, and the
check of an address to listen on that the dashboard's section shares."""

from __future__ import annotations

import ipaddress
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

# The API's port for other machines (api.address), beside the dashboard's 4736.
API_PORT = 4737


@dataclass
class ApiConfig:
    """The HTTP API under /api/v1/ (docs/api.md): photos sent by other programs and machines."""

    # Served by the dashboard's own server on this machine (the dashboard's token or a token of
    # `gpen-watch api token create`).
    enabled: bool = True
    # Other machines: "" (none), or an address of this machine to listen on ("0.0.0.0": all of
    # them). Always HTTPS: plain HTTP beyond loopback would show photos and tokens to the network.
    address: str = ""
    port: int = API_PORT
    # The certificate and its key (PEM); unset: the service's own, self-signed, made at first start.
    certificate: Path | None = None
    private_key: Path | None = None
    # Web pages of other origins ("https://photos.example") allowed to call it from a browser
    # (CORS); empty: none.
    cors_origins: list[str] = field(default_factory=list)
    # Each token's limits (a token may have its own, `gpen-watch api token create`).
    requests_per_minute: int = 600
    mb_per_day: int = 50_000
    max_file_mb: int = 200
    # Photos one token may be sending at once.
    uploads_at_once: int = 8
    # An upload that sends nothing for this long, or less than min_upload_kbs KB/s once its first
    # 10 seconds are over, is cut off: a slow or stalled client holds a slot that briefly.
    upload_idle_s: float = 30.0
    min_upload_kbs: int = 8


def api_checks(a: ApiConfig) -> list[tuple[bool, str, str]]:
    """(valid, setting, why not) for each api.* setting."""
    return [
        (
            a.address == "" or valid_bind_address(a.address),
            "api.address",
            'must be "" (this machine only) or an IP address of this machine, such as 192.168.1.5 or "0.0.0.0" (all)',
        ),
        (0 <= a.port <= 65535, "api.port", "must be 0 (any free port) to 65535"),
        (
            (a.certificate is None) == (a.private_key is None),
            "api.certificate",
            "and api.private_key go together: set both (your own certificate) or neither (the service's own)",
        ),
        (
            all(_valid_origin(o) for o in a.cors_origins),
            "api.cors_origins",
            'each must be a web origin such as "https://photos.example" or "http://localhost:8080" '
            "(scheme, host and port, no path)",
        ),
        (a.requests_per_minute >= 1, "api.requests_per_minute", "must be at least 1"),
        (a.mb_per_day >= 1, "api.mb_per_day", "must be at least 1"),
        (a.max_file_mb >= 1, "api.max_file_mb", "must be at least 1"),
        (a.uploads_at_once >= 1, "api.uploads_at_once", "must be at least 1"),
        (1 <= a.upload_idle_s <= 3600, "api.upload_idle_s", "must be 1 to 3600 seconds"),
        (a.min_upload_kbs >= 0, "api.min_upload_kbs", "must be 0 (no floor) or more"),
    ]


def _valid_origin(origin: str) -> bool:
    try:
        parts = urllib.parse.urlsplit(origin)
        parts.port  # noqa: B018 (raises ValueError for a port that is no number)
    except ValueError:
        return False
    return (
        parts.scheme in ("http", "https")
        and bool(parts.hostname)
        and not parts.path
        and not parts.query
        and not parts.fragment
        and "@" not in parts.netloc
        and origin == origin.lower().rstrip("/")
    )


def valid_bind_address(address: str) -> bool:
    try:
        ipaddress.ip_address(address)
    except ValueError:
        return False
    return True
