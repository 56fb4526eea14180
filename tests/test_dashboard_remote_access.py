"""The certificate's fingerprint where a person setting up another machine looks: a real `gpen-watch
run` with api.address set makes its own certificate at start; its Settings page (the API section)
and its Overview show the SHA-256 fingerprint of the very certificate its HTTPS listener answers
with, and the ways to check it on the other machine, of which the OpenSSL line is run here as
printed; the private key shows nowhere. Without api.address, or with a certificate that cannot be
read, the page says so instead."""

from __future__ import annotations

import hashlib
import html
import re
import socket
import ssl
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from conftest import isolated_env
from dashboard_client import Dashboard, served_dashboard

from gpen_watch.dashboard.api import tls

pytestmark = pytest.mark.timeout(120)


def served_fingerprint(url: str) -> str:
    """The SHA-256 of the certificate the listener at ``url`` answers with, as the other machine
    sees it (no authority checks it: that is what the fingerprint is for)."""
    parts = urlsplit(url)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection((parts.hostname, parts.port), timeout=20) as raw,
        ctx.wrap_socket(raw, server_hostname=parts.hostname) as conn,
    ):
        der = conn.getpeercert(binary_form=True)
    assert der is not None
    return tls.format_fingerprint(hashlib.sha256(der).hexdigest())


def private_key_lines(d: Dashboard) -> list[str]:
    with isolated_env(d.home):
        key = tls.folder() / tls.KEY_NAME
    text = key.read_text(encoding="ascii")
    assert "PRIVATE KEY" in text
    return [line for line in text.splitlines() if line and not line.startswith("-----")]


def shown(page: str, css_id: str) -> str:
    """The text of the element ``css_id``, as copied from the page (its line-break hints are no text)."""
    found = re.search(rf'id="{css_id}">([^<]*(?:<wbr>[^<]*)*)<', page)
    assert found, f"no #{css_id} on the page"
    return html.unescape(found.group(1).replace("<wbr>", ""))


def test_the_settings_page_and_the_overview_show_the_certificates_fingerprint(tmp_path: Path) -> None:
    with served_dashboard(tmp_path, "--set", "api.address=127.0.0.1", "--set", "api.port=0") as d:
        status = d.wait(lambda s: bool(s.get("api")), 30, "the API for other machines")
        url, fingerprint = status["api"], status["api_fingerprint"]
        assert url.startswith("https://127.0.0.1:") and re.fullmatch(
            r"([0-9A-F]{2}:){31}[0-9A-F]{2}", fingerprint
        )
        # The very certificate the listener answers with.
        assert served_fingerprint(url) == fingerprint
        settings = d.get("/settings")
        assert settings.status == 200
        page = settings.text
        assert shown(page, "api-fingerprint") == fingerprint and shown(page, "api-url") == url
        section = page[page.index('id="sec-api"') : page.index('id="sec-notify"')]
        assert 'id="other-machines"' in section  # in the API section, above its settings
        # Each way to check it names this service and this fingerprint.
        # By the plain name on the other machine; the token is made here, by this install's command.
        assert (
            f'<code class="path">gpen-watch submit --to {url} --token TOKEN --fingerprint {fingerprint} PHOTO...</code>'
            in page
        )
        assert "api token create --name laptop --scope submit,read" in page
        openssl = html.unescape(re.search(r"<code class=\"path\">(openssl s_client[^<]*)</code>", page)[1])  # type: ignore[index]
        assert f"-connect 127.0.0.1:{urlsplit(url).port} " in openssl
        printed = subprocess.run(["bash", "-c", openssl], capture_output=True, text=True, timeout=60)
        assert printed.stdout.strip().lower() == f"sha256 fingerprint={fingerprint}".lower(), printed
        overview = d.get("/").text
        assert f'<code class="fingerprint">{fingerprint.replace(":", ":<wbr>")}</code>' in overview
        assert '<a href="/settings#other-machines">how to check it there</a>' in overview
        # The key stays in its file: no line of it, nor its name, on any page.
        lines = private_key_lines(d)
        for text in (page, overview, d.get("/api/status").text):
            assert "PRIVATE KEY" not in text and tls.KEY_NAME not in text
            assert not any(line in text for line in lines)


def test_without_an_address_for_other_machines_the_page_says_how_to_set_one(tmp_path: Path) -> None:
    with served_dashboard(tmp_path) as d:
        page = d.get("/settings").text
        assert 'id="api-fingerprint"' not in page
        assert "This service listens on this machine only" in page
        assert '"Listen for other machines on (HTTPS)" (<code>api.address</code>)' in page
        overview = d.get("/").text
        assert 'class="fingerprint"' not in overview and "remote-line" not in overview


def test_a_certificate_that_cannot_be_read_is_said_instead_of_a_fingerprint(tmp_path: Path) -> None:
    cert, key = tmp_path / "mine.pem", tmp_path / "mine.key"
    cert.write_text("not a certificate\n")
    key.write_text("not a key\n")
    extra = ("--set", "api.address=127.0.0.1", "--set", "api.port=0")
    mine = ("--set", f"api.certificate={cert}", "--set", f"api.private_key={key}")
    with served_dashboard(tmp_path, *extra, *mine) as d:
        status = d.wait(lambda s: bool(s.get("api_problem")), 30, "the API's problem")
        assert not status["api"] and not status["api_fingerprint"]
        page = d.get("/settings").text
        assert 'id="api-fingerprint"' not in page
        said = html.unescape(re.search(r'<p class="banner warn">(The API is not served[^<]*)</p>', page)[1])  # type: ignore[index]
        assert str(cert) in said and "cannot be read as a PEM certificate" in said
        assert "The API is not served to other machines" in d.get("/").text
