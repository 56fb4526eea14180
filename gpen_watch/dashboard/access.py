"""Who may use the dashboard: the login token, the session cookie, and the Host and Origin rules.

The page shows private photos and can pause the service, and any web page the user visits can send
requests to a loopback port. So:

* The login token is 32 random bytes in a 0600 file in the user's private state folder; another
  local user cannot read it. It survives restarts, so a bookmarked session keeps working; deleting
  the file makes a new one at the next start and ends every session.
* Opening a URL with ``?token=`` sets a session cookie (HttpOnly, SameSite=Strict) and redirects
  to the same URL without the token, so the token does not stay in the address bar or history.
  The cookie holds its issue time and an HMAC of it under the token: it needs no server-side
  store, and it expires after ``SESSION_DAYS``.
* Scripts may send ``Authorization: Bearer <token>`` instead.
* A request whose Host header is not this server's own name and port is refused: that stops DNS
  rebinding, where a hostile name resolves to 127.0.0.1 and the browser takes the page for the
  hostile site's own.
* A request that changes anything (POST) must come from the dashboard's own origin: an Origin
  header equal to it, or, with no Origin, the ``X-GPEN-Watch`` header (which a cross-site form
  cannot set). SameSite=Strict already keeps the cookie off cross-site requests; this is the
  second lock.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
import socket
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from gpen_watch import platform as platforms
from gpen_watch.base.fsutil import write_text_atomic
from gpen_watch.platform import paths, program

TOKEN_NAME = "dashboard.token"
COOKIE = "gpen_watch_session"
CSRF_HEADER = "X-GPEN-Watch"
SESSION_DAYS = 30
SESSION_S = SESSION_DAYS * 86400
_TOKEN_CHARS = frozenset("0123456789abcdef")


def token_path() -> Path:
    return paths.state_dir() / TOKEN_NAME


def load_or_create_token(path: Path | None = None) -> str:
    """The login token, made on first use; a file another user could read is replaced."""
    path = path or token_path()
    try:
        st = path.stat()
        text = path.read_text(encoding="ascii").strip()
        private = not platforms.current().posix_permissions or not st.st_mode & (stat.S_IRWXG | stat.S_IRWXO)
        if private and valid_token_text(text):
            return text
    except (OSError, UnicodeDecodeError):
        pass
    token = secrets.token_hex(32)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_text_atomic(path, token + "\n", mode=0o600)
    return token


def read_token(path: Path | None = None) -> str | None:
    """The token a running service uses (None: it has none yet), for `gpen-watch dashboard`."""
    try:
        text = (path or token_path()).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if valid_token_text(text) else None


def login_url(url: str, path: Path | None = None) -> str | None:
    """The dashboard's ``url`` with the token that signs a browser in (None: no token yet)."""
    token = read_token(path)
    return f"{url}?token={token}" if token else None


def no_browser(why: str, url: str) -> str:
    """Where no browser opened the dashboard at ``url`` (no token: this goes to notices and
    logs), the sentence that says so and how to get in anyway."""
    return (
        f"No browser opened ({why}). The dashboard is at {url}; "
        f"`{program.command('dashboard --url')}` prints the link that signs you in."
    )


def valid_token_text(text: str) -> bool:
    return len(text) == 64 and set(text) <= _TOKEN_CHARS


def token_matches(token: str, given: str) -> bool:
    return hmac.compare_digest(token.encode(), given.encode("utf-8", "replace"))


def make_session(token: str, now: float | None = None) -> str:
    issued = str(int(time.time() if now is None else now))
    return f"{issued}.{_sign(token, issued)}"


def session_valid(token: str, cookie: str, now: float | None = None) -> bool:
    """A cookie this token signed, issued within ``SESSION_S`` and not in the future."""
    issued, sep, mac = cookie.partition(".")
    if not sep or not issued.isdigit() or len(issued) > 12:
        return False
    if not hmac.compare_digest(_sign(token, issued), mac):
        return False
    age = (time.time() if now is None else now) - int(issued)
    return -60 <= age <= SESSION_S


def _sign(token: str, issued: str) -> str:
    return hmac.new(token.encode(), f"session:{issued}".encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Origin:
    """The names a listener answers to: loopback's, the bound address's when it is another, and
    for one bound to every address ("0.0.0.0", "::") any of this machine's addresses as an IP
    (a DNS rebinding needs a name, never an IP) and this machine's own name. ``scheme``: "https"
    beyond loopback (``dashboard.api.tls``)."""

    address: str
    port: int
    scheme: str = "http"

    @property
    def everywhere(self) -> bool:
        return self.address in ("0.0.0.0", "::")

    @property
    def hosts(self) -> frozenset[str]:
        names = {"127.0.0.1", "localhost", "[::1]"}
        if not is_loopback(self.address) and not self.everywhere:
            names.add(_host_literal(self.address))
        if self.everywhere:
            host = socket.gethostname().lower()
            names |= {host, f"{host}.local"} if host else set()
        return frozenset(f"{n}:{self.port}" for n in names)

    @property
    def url(self) -> str:
        """The URL to open: loopback's unless the service is bound elsewhere only."""
        host = "127.0.0.1" if is_loopback(self.address) or self.everywhere else None
        return f"{self.scheme}://{host or _host_literal(self.address)}:{self.port}/"

    @property
    def network_url(self) -> str:
        """The URL other machines use: the bound address, or this machine's name when bound to all."""
        host = socket.gethostname() if self.everywhere else _host_literal(self.address)
        return f"{self.scheme}://{host}:{self.port}/"

    def host_allowed(self, host: str | None) -> bool:
        if host is None:
            return False
        host = host.lower()
        return host in self.hosts or (self.everywhere and _ip_host(host, self.port))

    def origin_allowed(self, origin: str, host: str) -> bool:
        """Origin is the page's own: the scheme and the very Host this request came to."""
        return self.host_allowed(host) and origin.lower() == f"{self.scheme}://{host.lower()}"


def _ip_host(host: str, port: int) -> bool:
    """Whether a Host header is an IP address literal with this port ("192.168.1.5:4737")."""
    name, sep, given = host.rpartition(":")
    if not sep or given != str(port):
        return False
    try:
        ipaddress.ip_address(name[1:-1] if name.startswith("[") and name.endswith("]") else name)
    except ValueError:
        return False
    return True


def is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _host_literal(address: str) -> str:
    return f"[{address}]" if ":" in address else address
