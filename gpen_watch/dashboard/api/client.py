"""A small client of the API, with nothing but the standard library: `gpen-watch submit` uses it,
and so can a script (docs/api.md, "From a script")::

    from gpen_watch.dashboard.api.client import ApiClient

    api = ApiClient.local()                     # this machine's service, its own token
    # api = ApiClient("https://studio-pc:4737/", token, fingerprint="AB:CD:...")
    photo = api.submit(Path("IMG_1.jpg"), settings={"restore.strength": "0.8"})
    done = api.wait(photo["id"])
    api.download(done["id"], Path("IMG_1.restored.jpg"))

Over HTTPS with a fingerprint, the certificate is checked against it (pinned) before anything is
sent, the token included; without one, by the system's certificate authorities and the host name,
as for any web site. Every refusal is an ``ApiError`` with the status and the server's sentence.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import ssl
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpen_watch.base.errors import GpenWatchError
from gpen_watch.base.fsutil import remove_quietly
from gpen_watch.dashboard.api.tls import format_fingerprint, normalize_fingerprint
from gpen_watch.outbox.naming import candidates
from gpen_watch.platform.files import publish_file

CHUNK = 1 << 16
BASE = "/api/v1"
# Statuses worth another try, after a pause: the limits (429) and a service briefly unable (503).
RETRY = (429, 503)


class ApiError(GpenWatchError):
    """The API refused, or could not be reached: ``status`` (0: no answer) and the sentence."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.retry_after: float | None = None


class CertificateError(ApiError):
    """The service's certificate is not the one pinned, or not one this machine trusts: never
    worth another try, and nothing was sent."""


@dataclass
class ApiClient:
    url: str  # the service's address: "http://127.0.0.1:4736/", "https://studio-pc:4737/"
    token: str
    fingerprint: str | None = None  # the certificate's SHA-256, pinned (HTTPS)
    timeout: float = 60.0
    tries: int = 5

    def __post_init__(self) -> None:
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ApiError(0, f"{self.url!r} is not an http:// or https:// address of a gpen-watch service")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        if self.fingerprint is not None:
            try:
                self._pin: str | None = normalize_fingerprint(self.fingerprint)
            except ValueError as exc:
                raise ApiError(0, str(exc)) from None
            if not self._https:
                raise ApiError(0, "a fingerprint is for https:// addresses; this one is plain http://")
        else:
            self._pin = None

    @classmethod
    def local(cls) -> ApiClient:
        """The service running on this machine, with its own token (``NotRunning`` without one)."""
        from gpen_watch.dashboard import access
        from gpen_watch.service import control

        reply = control.request("status")
        url = str(reply.get("dashboard") or "")
        if not url:
            why = reply.get("dashboard_problem") or "its dashboard is off (dashboard.enabled = false)"
            raise ApiError(0, f"the running service serves no API here: {why}")
        token = access.read_token()
        if token is None:
            raise ApiError(0, f"{access.token_path()}: no token of the service to read")
        return cls(url, token)

    # --- the connection -------------------------------------------------------------------------

    def _connect(self) -> http.client.HTTPConnection:
        if not self._https:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)
            conn.connect()
            return conn
        if self._pin is None:
            ctx = ssl.create_default_context()
        else:
            # Checked by its fingerprint below, before any byte is sent; no authority signed it.
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        tls_conn = http.client.HTTPSConnection(self._host, self._port, timeout=self.timeout, context=ctx)
        try:
            tls_conn.connect()
        except ssl.SSLCertVerificationError as exc:
            tls_conn.close()
            raise CertificateError(
                0,
                f"{self.url}: its certificate is not signed by an authority this machine trusts ({exc.verify_message}); "
                "if it is gpen-watch's own, give its fingerprint (`gpen-watch status` on that machine shows it) "
                "with --fingerprint",
            ) from None
        if self._pin is not None:
            assert tls_conn.sock is not None
            der = tls_conn.sock.getpeercert(binary_form=True) or b""
            got = hashlib.sha256(der).hexdigest()
            if got != self._pin:
                tls_conn.close()
                raise CertificateError(
                    0,
                    f"{self.url}: its certificate's fingerprint is {format_fingerprint(got)}, not the one given "
                    f"({format_fingerprint(self._pin)}): this is not that service (or its certificate was made "
                    "again); nothing was sent",
                )
        return tls_conn

    def _send(
        self,
        method: str,
        path: str,
        body: bytes | Path | None = None,
        headers: Mapping[str, str] | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> http.client.HTTPResponse:
        """One request; its response, open (the caller reads and closes it). ApiError for any
        status of 400 or more, or for no answer at all."""
        try:
            conn = self._connect()
        except OSError as exc:
            raise ApiError(0, f"{self.url}: cannot connect ({exc.strerror or exc})") from None
        try:
            conn.putrequest(method, path, skip_accept_encoding=True)
            conn.putheader("Authorization", f"Bearer {self.token}")
            for k, v in (headers or {}).items():
                conn.putheader(k, v)
            if isinstance(body, Path):
                size = body.stat().st_size
                conn.putheader("Content-Type", "application/octet-stream")
                conn.putheader("Content-Length", str(size))
                conn.endheaders()
                with open(body, "rb") as f:
                    while chunk := f.read(CHUNK):
                        conn.send(chunk)
                        if progress is not None:
                            progress(len(chunk))
            else:
                if body is not None:
                    conn.putheader("Content-Length", str(len(body)))
                conn.endheaders(body)
            response = conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise ApiError(0, f"{self.url}: the connection broke ({exc})") from None
        if response.status >= 400:
            text = response.read().decode("utf-8", "replace")
            conn.close()
            try:
                text = str(json.loads(text)["error"])
            except (ValueError, KeyError, TypeError):
                text = text.strip() or response.reason
            error = ApiError(response.status, text)
            retry = response.getheader("Retry-After")
            error.retry_after = float(retry) if retry and retry.isdigit() else None
            raise error
        return response

    def _json(
        self, method: str, path: str, body: bytes | None = None, headers: Mapping[str, str] | None = None
    ) -> Any:
        response = self._retrying(lambda: self._send(method, path, body, headers))
        with contextlib.closing(response):
            return json.loads(response.read())

    def _retrying(self, attempt: Callable[[], http.client.HTTPResponse]) -> http.client.HTTPResponse:
        """``attempt`` again after a pause while the service says to wait (429, 503) or gives no
        answer; the request must be one that is safe to repeat (a read, or a submit with a key)."""
        for i in range(self.tries):
            try:
                return attempt()
            except ApiError as exc:
                if i == self.tries - 1 or isinstance(exc, CertificateError) or exc.status not in (*RETRY, 0):
                    raise
                time.sleep(min(30.0, exc.retry_after or 0.5 * 2**i))
        raise AssertionError("unreachable")

    # --- the API --------------------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        found: dict[str, Any] = self._json("GET", BASE + "/")
        return found

    def submit(
        self,
        path: Path,
        name: str | None = None,
        *,
        inbox: int | None = None,
        batch: str | None = None,
        settings: Mapping[str, str] | None = None,
        key: str | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> dict[str, Any]:
        """Send the photo at ``path``; the photo as the service took it. With ``key`` (an
        Idempotency-Key) a send repeated after a lost answer gives the same photo."""
        query = {"name": name or path.name, **({"inbox": str(inbox)} if inbox is not None else {})}
        if batch:
            query["batch"] = batch
        query.update(settings or {})
        target = f"{BASE}/photos?{urllib.parse.urlencode(query)}"
        headers = {"Idempotency-Key": key} if key else {}

        def attempt() -> http.client.HTTPResponse:
            return self._send("POST", target, path, headers, progress)

        response = self._retrying(attempt) if key else attempt()
        with contextlib.closing(response):
            found: dict[str, Any] = json.loads(response.read())
            return found

    def photo(self, photo_id: int) -> dict[str, Any]:
        found: dict[str, Any] = self._json("GET", f"{BASE}/photos/{photo_id}")
        return found

    def cancel(self, photo_id: int) -> dict[str, Any]:
        found: dict[str, Any] = self._json("POST", f"{BASE}/photos/{photo_id}/cancel")
        return found

    def report(self, photo_id: int) -> dict[str, Any]:
        found: dict[str, Any] = self._json("GET", f"{BASE}/photos/{photo_id}/report")
        return found

    def batch(self, batch: str) -> dict[str, Any]:
        """The batch with every photo (all its pages)."""
        first: dict[str, Any] = self._json("GET", f"{BASE}/batches/{urllib.parse.quote(batch)}")
        while first.get("next"):
            more = self._json("GET", f"{BASE}/batches/{urllib.parse.quote(batch)}?after={first['next']}")
            first["photos"] += more["photos"]
            first["next"] = more.get("next")
        return first

    def events(self, path: str) -> Iterator[tuple[str, Any]]:
        """The Server-Sent Events at ``path`` as (event, JSON data), until the server ends them."""
        response = self._retrying(lambda: self._send("GET", path, headers={"Accept": "text/event-stream"}))
        with contextlib.closing(response):
            event, data = "message", []
            while True:
                line = response.readline()
                if not line:
                    return
                text = line.decode("utf-8").rstrip("\r\n")
                if text.startswith("event:"):
                    event = text[6:].strip()
                elif text.startswith("data:"):
                    data.append(text[5:].lstrip(" "))
                elif not text and data:
                    yield event, json.loads("\n".join(data))
                    event, data = "message", []

    def wait(
        self, photo_id: int, on_change: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, Any]:
        """Follow the photo until it has ended; the photo then."""
        last: dict[str, Any] = {}
        for _ in range(self.tries * 20):
            with contextlib.suppress(ApiError):
                for _event, last in self.events(f"{BASE}/photos/{photo_id}/events"):
                    if on_change is not None:
                        on_change(last)
                    if last.get("final"):
                        return last
            last = self.photo(photo_id)  # the stream ended early (a restart): look, then follow again
            if last.get("final"):
                return last
            time.sleep(1.0)
        return last

    def wait_batch(
        self, batch: str, on_change: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, Any]:
        """Follow a batch until none of its photos waits; the batch then, every photo in it."""
        for _ in range(self.tries * 20):
            with contextlib.suppress(ApiError):
                for _event, counts in self.events(f"{BASE}/batches/{urllib.parse.quote(batch)}/events"):
                    if on_change is not None:
                        on_change(counts)
                    if counts.get("final"):
                        return self.batch(batch)
            found = self.batch(batch)
            if found.get("final"):
                return found
            time.sleep(1.0)
        return self.batch(batch)

    def download(self, photo_id: int, dest: Path) -> Path:
        """The photo's result into ``dest`` (or ``dest (1)...`` where a file is there already:
        never replaced); the path written. The bytes go to a hidden temp name first."""
        response = self._retrying(lambda: self._send("GET", f"{BASE}/photos/{photo_id}/result"))
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.gpen-part-{os.getpid()}")
        try:
            with contextlib.closing(response), open(tmp, "wb") as f:
                while chunk := response.read(CHUNK):
                    f.write(chunk)
                f.flush()
                os.fsync(f.fileno())
            for candidate in candidates(dest.name):
                try:
                    publish_file(tmp, dest.with_name(candidate))
                    return dest.with_name(candidate)
                except FileExistsError:
                    continue
            raise ApiError(0, f"{dest}: no free name beside it")
        finally:
            remove_quietly(tmp)
