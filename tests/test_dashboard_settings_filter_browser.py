"""The Settings page's filter box in headless Chromium against a real running service: typing
hides the settings that do not match, as the person types, and the page without its script shows
every setting (and no box that would do nothing)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from browser import chromium, wait_until
from dashboard_client import Dashboard, served_dashboard
from test_dashboard_settings_page import user_file

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def dash(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    root = tmp_path_factory.mktemp("filter")
    path, _ = user_file(root)
    with served_dashboard(root, "--config", str(path)) as d:
        yield d


def shown(page: Any) -> list[str]:
    """The keys of the settings on show (laid out, not hidden)."""
    keys: list[str] = page.execute_script(
        "return Array.from(document.querySelectorAll('.setting'))"
        ".filter((s) => s.offsetParent !== null).map((s) => s.querySelector('code').textContent)"
    )
    return keys


def test_typing_in_the_filter_box_hides_the_settings_that_do_not_match(dash: Dashboard) -> None:
    from selenium.webdriver.common.by import By

    with chromium() as page:
        page.get(f"{dash.url}?token={dash.token}")
        page.get(dash.url + "settings")
        box = wait_until(page, lambda d: d.find_element(By.CSS_SELECTOR, "input[type=search]"))
        everything = shown(page)
        assert len(everything) > 40 and "restore.strength" in everything
        box.send_keys("strength")
        wait_until(page, lambda d: len(shown(d)) < len(everything))
        # The global strength and the inbox's own (its profile opens to show it); nothing else.
        assert sorted(shown(page)) == ["restore.strength", "restore.strength"], shown(page)
        assert "2 settings match" in page.find_element(By.ID, "settings-filter-count").text
        # Sections without a match go too; the one with it stays, with its heading.
        headings = [
            h.text for h in page.find_elements(By.CSS_SELECTOR, ".settings-section h2") if h.is_displayed()
        ]
        assert any(h.startswith("Restoring faces") for h in headings) and not any(
            h.startswith("Dashboard") for h in headings
        )
        # Several words: each must match (a label, a key or a note).
        box.clear()
        box.send_keys("dashboard port")
        wait_until(page, lambda d: shown(d) == ["dashboard.port"])
        # The readable label matches as the key does.
        box.clear()
        box.send_keys("file format")
        wait_until(page, lambda d: "output.format" in shown(d))
        box.clear()
        box.send_keys("no such setting here")
        wait_until(page, lambda d: shown(d) == [])
        assert page.find_element(By.ID, "settings-filter-count").text == "No setting matches."
        # Emptied: every setting again.
        box.clear()
        box.send_keys(" ")
        wait_until(page, lambda d: len(shown(d)) == len(everything))


def test_without_the_script_every_setting_shows_and_no_filter_box(dash: Dashboard) -> None:
    from selenium.webdriver.common.by import By

    with chromium(javascript=False) as page:
        page.get(f"{dash.url}?token={dash.token}")
        page.get(dash.url + "settings")
        wait_until(page, lambda d: d.find_element(By.ID, "settings-form"))
        assert not page.find_element(By.CSS_SELECTOR, "input[type=search]").is_displayed()
        rows = page.find_elements(By.CSS_SELECTOR, "#settings-form .setting")
        visible = [r for r in rows if r.is_displayed()]
        # The inbox's own settings are in a closed <details>, as they always were; all others show.
        closed = page.find_elements(By.CSS_SELECTOR, "details.profile:not([open]) .setting")
        assert len(visible) == len(rows) - len(closed) > 40
        labels = [r.find_element(By.CSS_SELECTOR, ".label").text for r in visible]
        assert "Strength" in labels and "Port" in labels
