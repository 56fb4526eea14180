"""The API of a real running service, as the tests call it: requests with a bearer token, tokens
made in the service's own state folder, and the files of its inbox and outbox counted, so a test
can say that nothing was lost, doubled or overwritten."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from conftest import isolated_env
from dashboard_client import Dashboard, Reply

from gpen_watch.dashboard.api.tokens import TokenStore
from gpen_watch.journal import Journal


def token(d: Dashboard, name: str, scopes: tuple[str, ...] = ("submit", "read"), **limits: int) -> str:
    with isolated_env(d.home):
        _, made = TokenStore().create(name, scopes, limits)
    return made


def revoke(d: Dashboard, name: str) -> None:
    with isolated_env(d.home):
        TokenStore().revoke(name)


def call(
    d: Dashboard,
    method: str,
    path: str,
    bearer: str | None,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> Reply:
    sent = dict(headers or {})
    if bearer is not None:
        sent["Authorization"] = f"Bearer {bearer}"
    return d.raw(method, path, sent, body, signed_in=False)


def send(
    d: Dashboard,
    bearer: str | None,
    name: str,
    data: bytes,
    key: str | None = None,
    **query: str,
) -> Reply:
    q = urlencode({"name": name, **query})
    return call(d, "POST", f"/api/v1/photos?{q}", bearer, data, {"Idempotency-Key": key} if key else None)


def wait_final(d: Dashboard, bearer: str, photo_id: int, timeout: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        r = call(d, "GET", f"/api/v1/photos/{photo_id}", bearer)
        assert r.status == 200, r.text
        last = r.json()
        if last["final"]:
            return last
        time.sleep(0.1)
    raise AssertionError(f"photo {photo_id} did not end: {last}")


def files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def uploads_left(d: Dashboard) -> list[str]:
    return [p.name for p in d.svc.inbox.iterdir() if p.name.startswith(".gpen-upload-")]


def jobs(d: Dashboard) -> list[Any]:
    """Every job of the service's journal (read beside the running service)."""
    with isolated_env(d.home), Journal.open(readonly=True) as j:
        return [
            job
            for state in ("queued", "running", "done", "failed", "unsupported", "duplicate", "gone")
            for job in j.jobs(state)
        ]


def raw_socket(d: Dashboard, head: str) -> socket.socket:
    """A connection that has sent ``head`` (request line and headers, no body yet)."""
    s = socket.create_connection(("127.0.0.1", d.port), timeout=30)
    s.sendall(head.encode())
    return s


def read_reply(s: socket.socket) -> tuple[int, str]:
    """The status and body of what the server answered on ``s`` (until it closes)."""
    data = b""
    while True:
        try:
            chunk = s.recv(65536)
        except (ConnectionResetError, TimeoutError):
            break
        if not chunk:
            break
        data += chunk
        if b"\r\n\r\n" in data and b'"}\n' in data:
            break
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head else 0
    return status, body.decode("utf-8", "replace")


def upload_head(d: Dashboard, bearer: str, name: str, length: int) -> str:
    return (
        f"POST /api/v1/photos?{urlencode({'name': name})} HTTP/1.1\r\nHost: {d.host}\r\n"
        f"Authorization: Bearer {bearer}\r\nContent-Type: application/octet-stream\r\n"
        f"Content-Length: {length}\r\n\r\n"
    )


def error_of(r: Reply) -> str:
    assert r.headers.get("Content-Type", "").startswith("application/json"), (r.status, r.text)
    return str(json.loads(r.body)["error"])
