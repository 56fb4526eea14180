"""The dashboard in headless Chromium against a real running service: signing in from the login
URL, live updates without a reload, Pause and Resume, the keyboard, and a phone-sized window."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from browser import chromium, click, wait_until
from dashboard_client import Dashboard, served_dashboard
from service_harness import write_atomic

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def dash(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    with served_dashboard(tmp_path_factory.mktemp("browser")) as d:
        yield d


@pytest.fixture(scope="module")
def page(dash: Dashboard) -> Iterator[Any]:
    with chromium() as driver:
        driver.get(f"{dash.url}?token={dash.token}")
        yield driver


def text_of(driver: Any, css: str) -> str:
    from selenium.webdriver.common.by import By

    return str(driver.find_element(By.CSS_SELECTOR, css).text)


def test_the_login_url_signs_in_and_leaves_the_address_bar(page: Any, dash: Dashboard) -> None:
    page.get(f"{dash.url}?token={dash.token}")
    assert page.current_url == dash.url
    assert "gpen-watch" in page.title
    assert page.get_cookie("gpen_watch_session")["httpOnly"] is True
    assert page.execute_script("return document.cookie") == ""  # HttpOnly: no script can read it
    wait_until(page, lambda d: text_of(d, "#conn") == "live")


def test_a_new_photo_shows_up_without_a_reload(page: Any, dash: Dashboard) -> None:
    page.get(dash.url + "activity")
    wait_until(page, lambda d: text_of(d, "#conn") == "live")
    marker = page.execute_script("window.__same_page = 1; return 1")
    write_atomic(dash.svc.inbox / "arrived-live.jpg", b"\xff\xd8 any bytes")
    wait_until(page, lambda d: "arrived-live.jpg" in text_of(d, "#live"))
    assert page.execute_script("return window.__same_page") == marker  # no navigation happened


def test_pause_and_resume_from_the_overview(page: Any, dash: Dashboard) -> None:
    page.get(dash.url)
    wait_until(page, lambda d: text_of(d, "#conn") == "live")
    click(page, "form[action='/api/pause'] button")
    wait_until(page, lambda d: text_of(d, ".headline h1").startswith("Paused"))
    assert dash.status()["paused"] is True
    click(page, "form[action='/api/resume'] button")
    wait_until(page, lambda d: not text_of(d, ".headline h1").startswith("Paused"))
    assert dash.status()["paused"] is False


def test_the_pages_are_reachable_by_keyboard(page: Any, dash: Dashboard) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    page.get(dash.url)
    focused = []
    for _ in range(8):
        ActionChains(page).send_keys(Keys.TAB).perform()
        focused.append(page.execute_script("return document.activeElement.textContent.trim()"))
        if focused[-1] == "Results":
            break
    assert focused[0] == "Skip to content"
    assert "Results" in focused, focused
    ActionChains(page).send_keys(Keys.ENTER).perform()
    wait_until(page, lambda d: d.current_url == dash.url + "results")


def test_the_keyboard_focus_survives_a_live_update(page: Any, dash: Dashboard) -> None:
    page.get(dash.url + "activity")
    wait_until(page, lambda d: text_of(d, "#conn") == "live")
    page.execute_script("document.querySelector('nav a[href=\"/results\"]').focus()")
    write_atomic(dash.svc.inbox / "while-focused.jpg", b"\xff\xd8 any bytes")
    wait_until(page, lambda d: "while-focused.jpg" in text_of(d, "#live"))
    assert page.execute_script("return document.activeElement.getAttribute('href')") == "/results"
    link = page.execute_script("return document.querySelector('#live a[href^=\"/photo/\"]')")
    page.execute_script("arguments[0].focus()", link)
    href = page.execute_script("return document.activeElement.getAttribute('href')")
    write_atomic(dash.svc.inbox / "second-while-focused.jpg", b"\xff\xd8 any bytes")
    wait_until(page, lambda d: "second-while-focused.jpg" in text_of(d, "#live"))
    assert page.execute_script("return document.activeElement.getAttribute('href')") == href


def test_a_phone_sized_window_has_no_sideways_scroll(dash: Dashboard) -> None:
    with chromium(390, 844) as phone:
        phone.get(f"{dash.url}?token={dash.token}")
        for path in ("", "activity", "results", "failed"):
            phone.get(dash.url + path)
            wide = phone.execute_script("return document.documentElement.scrollWidth")
            view = phone.execute_script("return document.documentElement.clientWidth")
            assert wide <= view, (path, wide, view)


def test_pause_works_as_a_plain_form_without_the_pages_script(dash: Dashboard) -> None:
    from selenium.webdriver.common.by import By

    with chromium(javascript=False) as page:
        page.get(f"{dash.url}?token={dash.token}")
        try:
            page.find_element(By.CSS_SELECTOR, "form[action='/api/pause'] button").click()
            wait_until(page, lambda d: d.current_url == dash.url and "Paused" in text_of(d, ".headline h1"))
            assert dash.status()["paused"] is True
            page.find_element(By.CSS_SELECTOR, "form[action='/api/resume'] button").click()
            wait_until(page, lambda d: "Paused" not in text_of(d, ".headline h1"))
        finally:
            dash.control("resume")
