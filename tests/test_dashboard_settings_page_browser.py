"""The Settings page in headless Chromium against a real running service: a person changes an
inbox's strength, saves, and the service's TOML file says so, its comments kept."""

from __future__ import annotations

from pathlib import Path

import pytest
from browser import chromium, wait_until
from dashboard_client import served_dashboard
from test_dashboard_settings_page import user_file

from gpen_watch import config

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

STRENGTH = "watch.inboxes[0].restore.strength"


def test_settings_page_in_a_browser_changes_an_inbox_strength_in_the_file(tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    path, before = user_file(tmp_path)
    with served_dashboard(tmp_path, "--config", str(path)) as dash, chromium() as page:
        page.get(f"{dash.url}?token={dash.token}")
        page.find_element(By.CSS_SELECTOR, "nav a[href='/settings']").click()
        wait_until(page, lambda d: d.find_element(By.ID, "settings-form"))
        field = page.find_element(By.NAME, STRENGTH)
        assert field.get_attribute("value") == "0.9"  # the file's value, not the default
        field.clear()
        field.send_keys("0.4")
        page.find_element(By.ID, "save").click()
        saved = wait_until(page, lambda d: d.find_element(By.ID, "settings-saved"))
        assert "watch.inboxes.restore" in saved.text and "The workers restart" in saved.text
        text = path.read_text(encoding="utf-8")
        assert text == before.replace("strength = 0.9", "strength = 0.4")
        assert config.load(path).watch.inboxes[0].restore == {"strength": 0.4}
        assert page.find_element(By.NAME, STRENGTH).get_attribute("value") == "0.4"
