"""API tokens: made, listed and revoked by `gpen-watch api token ...`, checked by the service.

A token is ``gwt_<id>_<secret>``: 8 hex characters that name its record, and 32 random bytes. The
file (``api-tokens.json`` in the state folder, readable by the user alone) keeps each record's
name, scopes, limits and the SHA-256 of the whole token, never the token itself, which is shown
once when it is made; a stolen file gives no token. A check hashes what was sent and compares in
constant time. The service reads the file again whenever it changed, so a token revoked from the
command line is refused from its next request on, an upload under way included.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import re
import secrets
import stat
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpen_watch import platform as platforms
from gpen_watch.base.errors import GpenWatchError
from gpen_watch.base.fsutil import write_text_atomic
from gpen_watch.platform import paths
from gpen_watch.platform.filelock import lock_file, unlock_file

FILE_NAME = "api-tokens.json"
SUBMIT = "submit"
READ = "read"
# What each scope allows: submit sends photos and cancels them while queued; read reads their
# state, results, reports and batches. A token sees only the photos sent with it.
SCOPES = {
    SUBMIT: "send photos and cancel them while they wait",
    READ: "read photos' state, results and reports",
}
LIMITS = ("requests_per_minute", "mb_per_day", "max_file_mb")
_TOKEN_RE = re.compile(r"^gwt_([0-9a-f]{8})_[A-Za-z0-9_-]{43}$")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}$")


class TokenError(GpenWatchError):
    """A token cannot be made, found or revoked; the message says why."""


@dataclass(frozen=True)
class TokenRecord:
    id: str
    name: str
    scopes: tuple[str, ...]
    sha256: str
    created: float
    revoked: float | None = None
    # This token's own limits over the api.* settings (None: the setting's).
    limits: dict[str, int] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.revoked is None

    def allows(self, scope: str) -> bool:
        return self.active and scope in self.scopes

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["scopes"] = list(self.scopes)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TokenRecord:
        return cls(
            id=str(data["id"]),
            name=str(data["name"]),
            scopes=tuple(str(s) for s in data["scopes"]),
            sha256=str(data["sha256"]),
            created=float(data["created"]),
            revoked=None if data.get("revoked") is None else float(data["revoked"]),
            limits={str(k): int(v) for k, v in dict(data.get("limits") or {}).items()},
        )


def default_path() -> Path:
    return paths.state_dir() / FILE_NAME


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()


def parse_scopes(text: str) -> tuple[str, ...]:
    scopes = tuple(dict.fromkeys(s.strip() for s in text.split(",") if s.strip()))
    unknown = [s for s in scopes if s not in SCOPES]
    if unknown or not scopes:
        raise TokenError(
            f"{', '.join(unknown) or 'no scope'}: a token's scopes are "
            + ", ".join(f"{k} ({v})" for k, v in SCOPES.items())
            + ", comma-separated"
        )
    return scopes


class TokenStore:
    """The token file: ``create``, ``list``, ``revoke`` (the CLI) and ``verify`` (the service)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_path()
        self._seen: tuple[int, int, int] | None = None
        self._records: dict[str, TokenRecord] = {}

    # --- reading ------------------------------------------------------------------------------

    def records(self) -> list[TokenRecord]:
        self._refresh()
        return sorted(self._records.values(), key=lambda r: r.created)

    def verify(self, token: str) -> TokenRecord | None:
        """The active record of ``token``, or None (unknown, revoked, malformed)."""
        m = _TOKEN_RE.match(token)
        if m is None:
            return None
        self._refresh()
        record = self._records.get(m[1])
        if record is None or not hmac.compare_digest(record.sha256, digest(token)):
            return None
        return record if record.active else None

    def _refresh(self) -> None:
        """Read the file again when it changed (its inode, size or time): a revoke from the CLI
        is seen at the next request."""
        try:
            st = self.path.stat()
        except FileNotFoundError:
            self._seen, self._records = None, {}
            return
        seen = (st.st_ino, st.st_size, st.st_mtime_ns)
        if seen == self._seen:
            return
        if platforms.current().posix_permissions and st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise TokenError(f"{self.path}: readable by other users; remove it and make the tokens again")
        self._records = {r.id: r for r in _load(self.path)}
        self._seen = seen

    # --- changing -----------------------------------------------------------------------------

    def create(
        self, name: str, scopes: tuple[str, ...], limits: dict[str, int] | None = None
    ) -> tuple[TokenRecord, str]:
        """A new token named ``name``: its record and the token, to show once."""
        if not _NAME_RE.match(name):
            raise TokenError(
                f"{name!r}: a token's name is 1 to 64 letters, digits, spaces, dots, dashes or underscores"
            )
        with self._locked() as records:
            if any(r.name == name and r.active for r in records):
                raise TokenError(f"a token named {name!r} exists; revoke it first or choose another name")
            token_id = secrets.token_hex(4)
            while any(r.id == token_id for r in records):
                token_id = secrets.token_hex(4)
            token = f"gwt_{token_id}_{secrets.token_urlsafe(32)}"
            record = TokenRecord(token_id, name, scopes, digest(token), time.time(), None, dict(limits or {}))
            records.append(record)
        return record, token

    def revoke(self, which: str) -> TokenRecord:
        """Revoke the active token named ``which`` (or with that id)."""
        with self._locked() as records:
            for i, r in enumerate(records):
                if r.active and which in (r.name, r.id):
                    records[i] = TokenRecord(
                        r.id, r.name, r.scopes, r.sha256, r.created, time.time(), r.limits
                    )
                    return records[i]
        raise TokenError(f"no active token is called {which!r}; `gpen-watch api token list` lists them")

    @contextlib.contextmanager
    def _locked(self) -> Iterator[list[TokenRecord]]:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        lock_path = self.path.with_name(FILE_NAME + ".lock")
        with open(lock_path, "a", encoding="utf-8") as lock:
            deadline = time.monotonic() + 10.0
            while True:
                try:
                    lock_file(lock)
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise TokenError(f"{lock_path}: another gpen-watch is changing the tokens") from None
                    time.sleep(0.05)
            try:
                records = _load(self.path)
                yield records
                text = json.dumps({"tokens": [r.to_json() for r in records]}, indent=1) + "\n"
                write_text_atomic(self.path, text, mode=0o600, fsync=True)
            finally:
                unlock_file(lock)
        self._seen = None


def _load(path: Path) -> list[TokenRecord]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise TokenError(f"{path}: cannot be read ({exc}); move it aside and make the tokens again") from None
    try:
        return [TokenRecord.from_json(t) for t in data["tokens"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise TokenError(f"{path}: not a token file gpen-watch wrote ({exc}); move it aside") from None
