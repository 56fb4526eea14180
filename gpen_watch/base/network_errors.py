"""Why a connection or an HTTP request failed, in words a photographer understands.

urllib hands on the resolver's and the socket's own words ("[Errno -2] Name or service not
known", "[SSL: CERTIFICATE_VERIFY_FAILED] ..."). ``in_words`` turns an exception into a
``Failure``: a headline of a few words that says what happened ("no internet connection", short
enough to follow "model files missing: " on a tray's menu line) and the particulars
("could not look up github.com"), which read as one reason "headline (particulars)"; messages that
name many files say the headline once. What to do is the caller's to say (a download can be copied
in by hand; the webhook is tried again by itself), but for a certificate, whose cause is local. The
one home of these words, for the model downloads and the webhook alike.
"""

from __future__ import annotations

import errno
import socket
import ssl
import urllib.error
from dataclasses import dataclass

NO_INTERNET = "no internet connection"

# getaddrinfo's failures (socket.gaierror) that mean the name could not be looked up at all: on a
# machine without a network they are what every download meets first.
_LOOKUP_FAILED = {
    getattr(socket, name)
    for name in ("EAI_NONAME", "EAI_AGAIN", "EAI_FAIL", "EAI_NODATA", "EAI_ADDRFAMILY")
    if hasattr(socket, name)
}
_NO_ROUTE = {errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN}


@dataclass(frozen=True)
class Failure:
    headline: str  # what happened, in a few words: "no internet connection"
    detail: str = ""  # the particulars: "could not look up github.com"

    @property
    def reason(self) -> str:
        """ "no internet connection (could not look up github.com)"."""
        return f"{self.headline} ({self.detail})" if self.detail else self.headline


def in_words(exc: BaseException, host: str, timeout: float | None = None) -> Failure:
    """``exc`` (from urllib.request.urlopen, or reading its reply) for a request to ``host``."""
    if isinstance(exc, urllib.error.HTTPError):
        return http_status(exc.code, str(exc.reason or ""), host)
    if isinstance(exc, urllib.error.URLError):
        inner = exc.reason
        if isinstance(inner, BaseException):
            return in_words(inner, host, timeout)
        return Failure("connection failed", f"{host}: {inner}")
    if isinstance(exc, socket.gaierror):
        if exc.errno in _LOOKUP_FAILED:
            return Failure(NO_INTERNET, f"could not look up {host}")
        return Failure("server name not found", f"{host}: {_plain(exc)}")
    if isinstance(exc, ConnectionRefusedError):
        return Failure("connection refused", host)
    if isinstance(exc, TimeoutError | socket.timeout):
        waited = f", waited {timeout:g} s" if timeout else ""
        return Failure("server did not answer", f"{host}{waited}")
    if isinstance(exc, ssl.SSLCertVerificationError):
        return Failure(
            "certificate not trusted",
            f"{host}: {exc.verify_message or _plain(exc)}; check this computer's date and time, "
            "or ask whoever runs the network whether it filters secure connections",
        )
    if isinstance(exc, ssl.SSLError):
        # OpenSSL's own code ("WRONG_VERSION_NUMBER": no TLS at the other end) in plain letters.
        said = exc.reason.replace("_", " ").lower() if exc.reason else _plain(exc)
        return Failure("no secure connection", f"{host}: {said}")
    if isinstance(exc, ConnectionResetError | ConnectionAbortedError | BrokenPipeError):
        return Failure("connection cut", host)
    if isinstance(exc, OSError) and exc.errno in _NO_ROUTE:
        return Failure(NO_INTERNET, f"{host} cannot be reached: {_plain(exc)}")
    return Failure("connection failed", f"{host}: {_plain(exc)}")


def http_status(code: int, reason: str, host: str) -> Failure:
    """A server's answer that is not what was asked for (a file, a notice received)."""
    status = f"HTTP {code}{' ' + reason if reason else ''} from {host}"
    if code in (404, 410):
        return Failure("not on the server", status)
    if code in (401, 403):
        return Failure("access refused", status)
    if code == 407:
        return Failure("proxy login needed", status)
    if code == 429:
        return Failure("server busy", status)
    if code >= 500:
        return Failure("server error", status)
    return Failure("unexpected answer", status)


def _plain(exc: BaseException) -> str:
    """An OSError's own words without its "[Errno -2]"."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
