"""The first run's question about the models' terms in headless Chromium, against a real service
held at its model gate (empty model folder, network closed): the Overview shows the terms with
one button for each way on; Accept writes the yes into the service's settings file, through the
dashboard's same-origin rules, and the question is gone; "for paid work" switches the models."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import chromium, wait_until
from dashboard_client import Dashboard
from test_model_terms_service import asking, held_dashboard

from gpen_watch import config

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture
def dash(tmp_path: Path) -> Iterator[tuple[Dashboard, Path]]:
    with held_dashboard(tmp_path) as (d, path):
        d.svc.wait(asking, 60, "the terms' problem")
        yield d, path


def test_accept_on_the_overview_writes_the_yes_and_the_question_goes(dash: tuple[Dashboard, Path]) -> None:
    from selenium.webdriver.common.by import By

    d, path = dash
    with chromium() as page:
        page.get(f"{d.url}?token={d.token}")
        ask = wait_until(page, lambda p: p.find_element(By.ID, "terms-ask"))
        assert "GPEN-BFR-256 and ParseNet are downloaded only once you accept their terms" in ask.text
        assert "academic and non-commercial use only" in ask.text and "CC BY-NC-SA 4.0" in ask.text
        assert (
            "For paid work: restore with GFPGAN-v1.4 (Apache-2.0)"
            in page.find_element(By.ID, "paid-work").text
        )
        page.find_element(By.ID, "accept-terms").click()
        saved = wait_until(page, lambda p: p.find_element(By.ID, "settings-saved"))
        assert "restore.accepted_terms" in saved.text
        # The Settings page's table says so too.
        assert "accepted" in page.find_element(By.ID, "terms-GPEN").text
        assert config.load(path).restore.accepted_terms == ["GPEN", "PSFR-GAN"]
        d.svc.wait(lambda s: not asking(s), 60, "the question answered")
        page.get(d.url)
        wait_until(page, lambda p: p.find_element(By.CSS_SELECTOR, "section.headline"))
        assert not page.find_elements(By.ID, "terms-ask")


def test_for_paid_work_switches_the_settings_to_models_that_allow_it(dash: tuple[Dashboard, Path]) -> None:
    from selenium.webdriver.common.by import By

    d, path = dash
    with chromium() as page:
        page.get(f"{d.url}?token={d.token}")
        wait_until(page, lambda p: p.find_element(By.ID, "paid-work")).click()
        saved = wait_until(page, lambda p: p.find_element(By.ID, "settings-saved"))
        assert "restore.model" in saved.text and "restore.use_parse" in saved.text
        restore = config.load(path).restore
        assert (restore.model, restore.use_parse, restore.accepted_terms) == ("GFPGAN-v1.4", False, [])
        assert "The settings use only models whose terms allow paid work" in page.page_source
    # The workers restart on the new models; none of them asks for a yes.
    s = d.svc.wait(lambda s: "GFPGANv1.4.pth" in (s.get("problem") or ""), 90, "GFPGAN-v1.4 awaited")
    assert not asking(s) and "accept" not in s["problem"]
