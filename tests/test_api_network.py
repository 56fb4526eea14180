"""Another machine sends photos: the service runs in one network namespace ("studio") with
api.address on its link and the dashboard beyond loopback too, a client in another ("laptop") with
only that link. `gpen-watch submit --to https://... --token --fingerprint` restores a folder from
there; a wrong fingerprint sends nothing; plain HTTP gets one sentence; the dashboard's pages
answer over HTTPS only; the laptop reaches no loopback service of the studio."""

from __future__ import annotations

import contextlib
import html
import os
import random
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from api_harness import token
from dashboard_client import Dashboard, served_dashboard
from service_harness import ServiceProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def skip_reason() -> str | None:
    if not sys.platform.startswith("linux"):
        return "network namespaces are Linux only"
    if os.geteuid() != 0:
        return "making network namespaces needs root"
    if shutil.which("ip") is None:
        return "iproute2 (`ip`) is not installed"
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@contextlib.contextmanager
def two_machines() -> Iterator[tuple[str, str, str, str]]:
    """(studio namespace, its address, laptop namespace, its address), joined by one veth link."""
    tag = f"{os.getpid() % 10000}{random.randrange(1000)}"
    studio, laptop = f"gws{tag}", f"gwl{tag}"
    net = f"10.{random.randrange(200, 250)}.{random.randrange(1, 254)}"
    try:
        _ip("netns", "add", studio)
        _ip("netns", "add", laptop)
        _ip("link", "add", f"{studio}v", "type", "veth", "peer", "name", f"{laptop}v")
        for ns, ip in ((studio, f"{net}.1"), (laptop, f"{net}.2")):
            _ip("link", "set", f"{ns}v", "netns", ns)
            _ip("-n", ns, "addr", "add", f"{ip}/24", "dev", f"{ns}v")
            _ip("-n", ns, "link", "set", f"{ns}v", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        yield studio, f"{net}.1", laptop, f"{net}.2"
    finally:
        for ns in (laptop, studio):
            for pid in subprocess.run(
                ["ip", "netns", "pids", ns], capture_output=True, text=True
            ).stdout.split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), 9)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


@pytest.fixture(scope="module")
def network(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Dashboard, str, str, str]]:
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    with two_machines() as (studio, studio_ip, laptop, _):

        class InStudio(ServiceProcess):
            def command(self) -> list[str]:
                return ["ip", "netns", "exec", studio, *super().command()]

        root = tmp_path_factory.mktemp("studio")
        extra = (
            "--set",
            f"api.address={studio_ip}",
            "--set",
            "api.port=4737",
            "--set",
            f"dashboard.address={studio_ip}",
        )
        with served_dashboard(root, *extra, service=InStudio) as d:
            d.wait(lambda s: bool(s.get("api")), 30, "the API for other machines")
            yield d, studio_ip, laptop, studio


def on_laptop(
    d: Dashboard, laptop: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    home = d.home / "laptop"
    home.mkdir(exist_ok=True)
    # The laptop's own user folders: none of the studio's state (no token file, no control socket).
    own = {k: v for k, v in d.svc.env.items() if not k.startswith("XDG_")}
    own.update(
        HOME=str(home), XDG_STATE_HOME=str(home / "state"), XDG_RUNTIME_DIR=str(home / "run"), **(env or {})
    )
    (home / "run").mkdir(mode=0o700, exist_ok=True)
    return subprocess.run(
        ["ip", "netns", "exec", laptop, sys.executable, "-m", "gpen_watch", *args],
        env=own,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_submit_from_the_laptop_over_tls_with_a_token_restores_a_folder(
    network: tuple[Dashboard, str, str, str], tmp_path: Path
) -> None:
    d, studio_ip, laptop, _ = network
    status = d.status()
    assert status["api"] == f"https://{studio_ip}:4737/"
    shoot = tmp_path / "shoot"
    (shoot / "day 2").mkdir(parents=True)
    for rel in ("a.jpg", "day 2/b.jpg"):
        (shoot / rel).write_bytes(b"\xff\xd8 " + rel.encode())
    run = on_laptop(
        d,
        laptop,
        "submit",
        str(shoot),
        "-o",
        str(tmp_path / "back"),
        "--to",
        status["api"],
        "--token",
        token(d, "laptop"),
        "--fingerprint",
        status["api_fingerprint"],
        "--no-progress",
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "restored 2 of 2 photos" in run.stdout
    assert (tmp_path / "back" / "a.jpg").read_bytes() == b"\xff\xd8 a.jpg"
    assert (tmp_path / "back" / "day 2" / "b.jpg").read_bytes() == b"\xff\xd8 day 2/b.jpg"


def test_a_wrong_fingerprint_sends_nothing(network: tuple[Dashboard, str, str, str], tmp_path: Path) -> None:
    d, _, laptop, _ = network
    before = d.status()["queue"]["done"]
    (tmp_path / "x.jpg").write_bytes(b"\xff\xd8 x")
    run = on_laptop(
        d, laptop, "submit", str(tmp_path / "x.jpg"), "--to", d.status()["api"], "--token", token(d, "laptop2"),
        "--fingerprint", "AB" * 32, "--no-progress",
    )  # fmt: skip
    assert run.returncode == 2
    assert "not the one given" in run.stderr and "nothing was sent" in run.stderr
    assert d.status()["queue"]["done"] == before


def test_plain_http_is_answered_with_one_sentence_and_the_dashboard_speaks_https(
    network: tuple[Dashboard, str, str, str],
) -> None:
    d, studio_ip, laptop, _ = network
    probe = (
        "import http.client,sys\n"
        f"c = http.client.HTTPConnection('{studio_ip}', 4737, timeout=20)\n"
        "c.request('GET', '/api/v1/')\nr = c.getresponse()\nprint(r.status, r.read().decode())\n"
    )
    run = subprocess.run(
        ["ip", "netns", "exec", laptop, sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.stdout.startswith("400 This address speaks HTTPS only"), run.stdout + run.stderr
    assert f"Use https://{studio_ip}:4737/" in run.stdout
    # The dashboard, bound beyond loopback, answers over TLS with the same certificate.
    port = int(d.url.rsplit(":", 1)[1].strip("/"))
    assert d.url.startswith(f"https://{studio_ip}:")
    check = (
        "from gpen_watch.dashboard.api.client import ApiClient\n"
        f"c = ApiClient('https://{studio_ip}:{port}/', 'x', fingerprint='{d.status()['api_fingerprint']}')\n"
        "conn = c._connect(); conn.request('GET', '/api/v1/openapi.json'); r = conn.getresponse()\n"
        "print(r.status, r.getheader('Content-Type'))\n"
    )
    run = subprocess.run(
        ["ip", "netns", "exec", laptop, sys.executable, "-c", check],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.stdout.startswith("200 application/json"), run.stdout + run.stderr


def test_the_fingerprint_on_the_studios_settings_page_is_the_one_the_laptop_sees(
    network: tuple[Dashboard, str, str, str],
) -> None:
    """The dashboard's Settings page, read from the laptop over HTTPS pinned to the fingerprint
    the studio's status gives, shows that fingerprint; the OpenSSL line it prints, run on the
    laptop as printed, prints the same."""
    d, studio_ip, laptop, _ = network
    fingerprint = d.status()["api_fingerprint"]
    port = int(d.url.rsplit(":", 1)[1].strip("/"))
    fetch = (
        "from gpen_watch.dashboard.api.client import ApiClient\n"
        f"c = ApiClient('https://{studio_ip}:{port}/', 'x', fingerprint='{fingerprint}')\n"
        f"conn = c._connect(); conn.request('GET', '/settings', headers={{'Authorization': 'Bearer {d.token}'}})\n"
        "r = conn.getresponse(); print(r.status); print(r.read().decode())\n"
    )
    run = subprocess.run(
        ["ip", "netns", "exec", laptop, sys.executable, "-c", fetch],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.stdout.startswith("200\n"), run.stdout[:300] + run.stderr
    page = run.stdout.replace("<wbr>", "")
    assert f'<code class="fingerprint" id="api-fingerprint">{fingerprint}</code>' in page
    assert f'id="api-url">https://{studio_ip}:4737/</code>' in page
    assert "The dashboard too is served beyond this machine, over HTTPS with the same certificate" in page
    line = html.unescape(re.search(r'<code class="path">(openssl s_client[^<]*)</code>', page)[1])  # type: ignore[index]
    assert f"-connect {studio_ip}:4737 " in line
    seen = subprocess.run(
        ["ip", "netns", "exec", laptop, "bash", "-c", line], capture_output=True, text=True, timeout=60
    )
    assert seen.stdout.strip().lower() == f"sha256 fingerprint={fingerprint}".lower(), seen


def test_the_laptop_reaches_nothing_of_the_studio_but_its_link(
    network: tuple[Dashboard, str, str, str],
) -> None:
    d, _, laptop, _ = network
    probe = (
        f"import socket\ns = socket.socket()\ns.settimeout(3)\nprint(s.connect_ex(('127.0.0.1', {d.port})))\n"
    )
    run = subprocess.run(
        ["ip", "netns", "exec", laptop, sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.stdout.strip() != "0", "the laptop reached the studio's loopback"
