"""Licences before downloads through a real `gpen-watch run` (the real engine's model gate, on an
empty model folder, the network closed): the first run asks for a yes to the terms instead of
downloading, the dashboard's accept endpoint holds to the dashboard's rules against hostile
requests, and a yes given with `gpen-watch models accept` reaches the running service at once and
is there again after a restart."""

from __future__ import annotations

import contextlib
import html
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from conftest import isolated_env
from dashboard_client import Dashboard, Reply, served_dashboard
from service_harness import ServiceProcess

from gpen_watch import cli, config

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SETTINGS = """\
# the studio's laptop
[restore]
model = "GPEN-BFR-256"  # quick
detector = "retinaface_mobile0.25"
"""
WAITING = "GPEN-BFR-256 and ParseNet are downloaded only once you accept their terms"


class HeldService(ServiceProcess):
    """A service whose workers wait for their model files: started, not ready."""

    def start(self, wait: bool = False) -> HeldService:
        super().start(wait=False)
        return self


@contextlib.contextmanager
def held_dashboard(tmp_path: Path) -> Iterator[tuple[Dashboard, Path]]:
    """The dashboard of a service held at its model gate, and its settings file; the caller is in
    the service's user folders (its control channel, its settings file)."""
    path = tmp_path / "settings.toml"
    path.write_text(SETTINGS, encoding="utf-8")
    models = str(tmp_path / "models")
    with (
        served_dashboard(
            tmp_path, "--config", str(path), "--model-dir", models, restorer=None, service=HeldService
        ) as d,
        isolated_env(d.home),
    ):
        yield d, path


@pytest.fixture
def dash(tmp_path: Path) -> Iterator[tuple[Dashboard, Path]]:
    with held_dashboard(tmp_path) as served:
        yield served


def asking(s: dict[str, Any]) -> bool:
    return WAITING in (s.get("problem") or "")


def form(
    d: Dashboard, path: str, fields: dict[str, str] | str, headers: dict[str, str] | None = None
) -> Reply:
    body = (fields if isinstance(fields, str) else urlencode(fields)).encode()
    return d.post(path, {"Content-Type": "application/x-www-form-urlencoded", **(headers or {})}, body)


def page_error(reply: Reply) -> str:
    found = re.search(r'id="settings-error">(.*?)</p>', reply.text, re.S)
    assert found, reply.text[:2000]
    return html.unescape(found[1]).strip()


def test_the_first_run_asks_for_a_yes_and_the_accept_endpoint_refuses_hostile_requests(
    dash: tuple[Dashboard, Path],
) -> None:
    d, path = dash
    s = d.svc.wait(asking, 60, "the terms' problem")
    assert "for paid work, restore with GFPGAN-v1.4 (Apache-2.0), without the face parser" in s["problem"]
    files = {f["name"]: f for f in s["models"]["files"]}
    assert files["GPEN-BFR-256"]["terms"] == "GPEN" and files["ParseNet"]["terms"] == "PSFR-GAN"
    assert files["RetinaFace-MobileNet0.25"]["terms"] is None  # MIT: its download was tried
    overview = d.get("/")
    assert 'id="terms-ask"' in overview.text and 'action="/settings/terms"' in overview.text
    assert "For paid work: restore with GFPGAN-v1.4" in html.unescape(overview.text)
    before = path.read_text(encoding="utf-8")

    own = {"Origin": f"http://{d.host}"}
    body = urlencode({"terms": "GPEN"}).encode()
    hostile = [
        # Not signed in; another site's page; a form from elsewhere without an Origin.
        (
            d.raw(
                "POST",
                "/settings/terms",
                {**own, "Content-Type": "application/x-www-form-urlencoded"},
                body,
                signed_in=False,
            ),
            401,
        ),
        (form(d, "/settings/terms", {"terms": "GPEN"}, {"Origin": "http://evil.example"}), 403),
        (
            d.raw(
                "POST",
                "/settings/terms",
                {"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "cross-site"},
                body,
            ),
            403,
        ),
        (
            d.raw(
                "POST",
                "/settings/terms",
                {**own, "Content-Type": "application/x-www-form-urlencoded", "Host": "evil.example:80"},
                body,
            ),
            421,
        ),
        (d.get("/settings/terms"), 405),
        # What no button of the page sends.
        (form(d, "/settings/terms", {"terms": "GFPGAN"}), 400),  # terms that ask for no yes
        (form(d, "/settings/terms", {"terms": "nonsense"}), 400),
        (form(d, "/settings/terms", {"terms": ""}), 400),
        (form(d, "/settings/terms", {"terms": ",".join(["GPEN"] * 50)}), 400),
        (form(d, "/settings/terms", {"terms": "GPEN", "restore.model": "x.pth"}), 400),
        (form(d, "/settings/terms", "terms=GPEN&terms=S-Lab-1.0"), 400),
        (d.post("/settings/terms", {"Content-Type": "application/json"}, b'{"terms": "GPEN"}'), 400),
        (form(d, "/settings/paid-work", {"restore.model": "CodeFormer"}), 400),
    ]
    for reply, status in hostile:
        assert reply.status == status, (status, reply.status, reply.text[:300])
    assert path.read_text(encoding="utf-8") == before  # nothing written
    assert (
        page_error(form(d, "/settings/terms", {"terms": "GFPGAN"}))
        == "terms: name the terms to accept, of GPEN, GPEN-ModelScope, PSFR-GAN, S-Lab-1.0"
    )

    # The page's own button: the terms in the file, the user's comments kept, and the
    # downloads tried at once (offline here: they fail for want of a network, no more for terms).
    ok = form(d, "/settings/terms", {"terms": "GPEN,PSFR-GAN"})
    assert ok.status == 200 and 'id="settings-saved"' in ok.text, ok.text[:2000]
    assert "restore.accepted_terms" in ok.text
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# the studio's laptop\n") and 'model = "GPEN-BFR-256"  # quick' in text
    assert config.load(path).restore.accepted_terms == ["GPEN", "PSFR-GAN"]
    s = d.svc.wait(
        lambda s: not asking(s) and "GPEN-BFR-256.pth" in (s.get("problem") or ""), 60, "the downloads tried"
    )
    assert "no internet connection" in s["problem"]
    assert all(f["terms"] is None for f in s["models"]["files"])


def test_a_yes_from_the_command_line_reaches_the_running_service_and_outlasts_a_restart(
    dash: tuple[Dashboard, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    d, path = dash
    d.svc.wait(asking, 60, "the terms' problem")
    assert cli.main(["models", "accept", "GPEN-BFR-256", "ParseNet", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "The running service read its settings again (restore.accepted_terms)" in out
    d.svc.wait(lambda s: not asking(s) and bool(s.get("problem")), 60, "the terms accepted")
    d.svc.stop()
    d.svc.start()
    s = d.svc.wait(lambda s: bool(s.get("problem")), 60, "the restarted service's problem")
    assert not asking(s) and "no internet connection" in s["problem"]
    assert "restore.accepted_terms" not in d.svc.stderr.read_text()
