"""A running service with its dashboard, and a raw HTTP client for it: the tests send exactly the
bytes they mean (a foreign Host, an encoded traversal, no cookie), which a browser-like client
would tidy away.

``served_dashboard`` starts one `gpen-watch run` (the stand-in restorer unless told otherwise) on
its own user folders with ``dashboard.port = 0``, waits for its dashboard, and reads its login
token the way `gpen-watch dashboard` does."""

from __future__ import annotations

import contextlib
import http.client
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from conftest import isolated_env
from service_harness import ServiceProcess

from gpen_watch.dashboard import access
from gpen_watch.service import control

FAKE = "fake_restorer:FakeRestorer"


@dataclass
class Reply:
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Dashboard:
    svc: ServiceProcess
    home: Path
    url: str
    token: str
    cookie: str = field(default="")

    @property
    def port(self) -> int:
        return int(urlsplit(self.url).port or 0)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def raw(
        self,
        method: str,
        path: str,
        headers: dict[str, str] | None = None,
        body: bytes | None = None,
        *,
        signed_in: bool = True,
    ) -> Reply:
        """One request as given; ``signed_in`` adds the session cookie (and Host unless given)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=20)
        sent = {"Host": self.host}
        if signed_in:
            sent["Cookie"] = f"{access.COOKIE}={self.session()}"
        sent.update(headers or {})
        try:
            conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            for k, v in sent.items():
                conn.putheader(k, v)
            if body is not None:
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body)
            r = conn.getresponse()
            return Reply(r.status, r.headers, r.read())
        finally:
            conn.close()

    def get(self, path: str, **kw: Any) -> Reply:
        return self.raw("GET", path, **kw)

    def post(self, path: str, headers: dict[str, str] | None = None, body: bytes | None = None) -> Reply:
        """A POST as the dashboard's own page sends it."""
        own = {"Origin": f"http://{self.host}", **(headers or {})}
        return self.raw("POST", path, own, body)

    def session(self) -> str:
        """A session cookie, got by signing in with the token as a browser does."""
        if not self.cookie:
            r = self.raw("GET", f"/?token={self.token}", signed_in=False)
            assert r.status == 303, r.text
            value = r.headers["Set-Cookie"].split(";", 1)[0]
            self.cookie = value.split("=", 1)[1]
        return self.cookie

    def restart(self) -> None:
        """Start the service again (after a kill or stop) and follow its dashboard to its new port."""
        with isolated_env(self.home):
            self.svc.start()
            s = self.svc.wait(lambda s: bool(s.get("dashboard")), 30, "the dashboard again")
        self.url = s["dashboard"]

    def cli(
        self, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`gpen-watch ARGS` as the user who runs this service (its user folders and environment)."""
        with isolated_env(self.home):
            return subprocess.run(
                [sys.executable, "-m", "gpen_watch", *args],
                capture_output=True,
                text=True,
                timeout=60,
                env={**self.svc.env, **(env or {})},
                cwd=cwd,
            )

    def control(self, cmd: str) -> dict[str, Any]:
        with isolated_env(self.home):
            return control.request(cmd)

    def status(self) -> dict[str, Any]:
        return self.control("status")

    def wait(self, cond: Any, timeout: float = 30.0, what: str = "condition") -> dict[str, Any]:
        with isolated_env(self.home):
            return self.svc.wait(cond, timeout, what)


@contextlib.contextmanager
def served_dashboard(
    root: Path,
    *extra: str,
    restorer: str | None = FAKE,
    env: dict[str, str] | None = None,
    service: type[ServiceProcess] = ServiceProcess,
) -> Iterator[Dashboard]:
    # The user folders in a short temp folder of their own: the control socket's path must stay
    # under the OS's ~100 bytes, which a test's own tmp_path under pytest-xdist can pass.
    home = Path(tempfile.mkdtemp(prefix="gw-home-"))
    with isolated_env(home):
        svc = service(root, "--set", "dashboard.port=0", *extra, restorer=restorer, env=env)
        try:
            svc.start()
            s = svc.wait(lambda s: bool(s.get("dashboard")), 30, "the dashboard")
            token = access.read_token()
            assert token is not None
        except BaseException:
            svc.close()
            raise
    try:
        yield Dashboard(svc, home, s["dashboard"], token)
    finally:
        with isolated_env(home):
            if svc.alive():
                with contextlib.suppress(Exception):
                    svc.stop(timeout=20)
            svc.close()
        shutil.rmtree(home, ignore_errors=True)


def wait_for(cond: Any, timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
