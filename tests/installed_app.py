"""What the tests of an installed gpen-watch (the Debian package, the one-folder bundle) share: the
user's settings for a service on the tiny models, an X server with a tray host, and the waits for
the running service's tray icon, its dashboard and a restored photo."""

from __future__ import annotations

import http.cookiejar
import os
import shutil
import urllib.request
from pathlib import Path

import cv2
import numpy as np
import pytest
from conftest import TinyModels
from test_tray_xvfb import XServer, find_window, wait_for, xserver  # noqa: F401 - xserver: the X server fixture

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
def xserver_with_tray(request: pytest.FixtureRequest, tmp_path: Path) -> XServer:
    # Checked before test_tray_xvfb's fixture is asked for: it starts Xvfb at once.
    if shutil.which("Xvfb") is None:
        pytest.skip("Xvfb not installed (Debian: xvfb)")
    x: XServer = request.getfixturevalue("xserver")
    x.start_tray_host(tmp_path)
    return x


def wait_for_tray_icon(x: XServer) -> None:
    """Until gpen-watch's icon has docked in the tray host on ``x``."""
    wait_for(
        lambda: find_window(x.display, lambda w: (w.get_wm_name() or "").startswith("gpen-watch")),
        "the tray icon to dock",
        90,
    )


def drop_and_wait(inbox: Path, outbox: Path, bgr: np.ndarray) -> None:
    """Drop a photo into the running service's inbox; wait until its result is in the outbox."""
    cv2.imwrite(str(inbox / "astronaut.png"), bgr)
    wait_for(lambda: (outbox / "astronaut.png").is_file(), "the dropped photo restored", 120)


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
