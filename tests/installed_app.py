"""What the tests of an installed gpen-watch (the Debian package, the one-folder bundle) share: the
user's settings for a service on the tiny models, an X server with a tray host, and the wait for
the running service's dashboard."""

from __future__ import annotations

import http.cookiejar
import os
import shutil
import urllib.request
from pathlib import Path

import pytest
from conftest import TinyModels
from test_tray_xvfb import XServer, xserver  # noqa: F401 - the X server fixture, for the users of this one

from gpen_watch.service import control


def write_config(tmp_path: Path, models: TinyModels) -> Path:
    """The user's settings file, in the isolated config folder: the tiny models, a test inbox."""
    folder = Path(os.environ["XDG_CONFIG_HOME"]) / "gpen-watch"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.toml").write_text(
        f"""[watch]
inboxes = [{str(tmp_path / "inbox")!r}]
outbox = {str(tmp_path / "outbox")!r}
settle_seconds = 0.2

[restore]
model = {str(models.gpen)!r}
model_dir = {str(models.model_dir)!r}
detector = "retinaface_mobile0.25"
use_parse = false

[workers]
devices = ["cpu"]

[dashboard]
port = 0
""",
        encoding="utf-8",
    )
    return tmp_path / "inbox"


@pytest.fixture
def xserver_with_tray(xserver: XServer, tmp_path: Path) -> XServer:  # noqa: F811 - test_tray_xvfb's fixture
    if shutil.which("Xvfb") is None:
        pytest.skip("Xvfb not installed (Debian: xvfb)")
    xserver.start_tray_host(tmp_path)
    return xserver


def status_with_dashboard() -> dict[str, object] | None:
    try:
        reply = control.request("status", timeout=5)
    except control.ControlError:
        return None
    return reply if reply.get("dashboard") else None


def open_signed_in(url: str) -> str:
    """The page at a login URL, signed in (the token traded for the session cookie): its text."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    with opener.open(url, timeout=10) as page:
        assert page.status == 200
        text: str = page.read().decode("utf-8", "replace")
    return text
