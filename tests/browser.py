"""Headless Chromium for the dashboard's browser tests: Debian's `chromium` driven through its own
`chromedriver` (the same version, so Selenium never downloads a driver).

Where they are missing the tests skip, except in CI (``CI`` set), which installs both (.ci/run)
and must run every browser test."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

CHROMIUM = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> tuple[str, str] | None:
    browser = next((p for p in map(shutil.which, CHROMIUM) if p), None)
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def require_chromium() -> tuple[str, str]:
    found = find_chromium()
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("CI must run the browser tests: install chromium and chromium-driver")
        pytest.skip("chromium and chromedriver are not installed (apt install chromium chromium-driver)")
    return found


@contextmanager
def chromium(width: int = 1280, height: int = 900, *, javascript: bool = True) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver_path = require_chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root, where Chromium's sandbox cannot start
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={width},{height}",
        "--force-device-scale-factor=1",
        "--no-first-run",
        "--disable-background-networking",
    ):
        options.add_argument(arg)
    if not javascript:
        options.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        driver.set_page_load_timeout(30)
        yield driver
    finally:
        driver.quit()


def wait_until(driver: Any, cond: Any, timeout: float = 20.0) -> Any:
    """Wait for ``cond``; an element the live page replaced meanwhile is looked up again."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    ignored = (StaleElementReferenceException, NoSuchElementException)
    return WebDriverWait(driver, timeout, poll_frequency=0.1, ignored_exceptions=ignored).until(cond)


def click(driver: Any, css: str, nth: int = 0) -> None:
    """Click the ``nth`` element ``css`` finds, once there is one; an element the live page
    replaced between the look-up and the click is looked up again."""
    from selenium.webdriver.common.by import By

    def clicked(d: Any) -> bool:
        found = d.find_elements(By.CSS_SELECTOR, css)
        if len(found) <= nth:
            return False
        found[nth].click()
        return True

    wait_until(driver, clicked)


# The page's first request to an address holding ``part`` waits until the test lets it go; what
# came of it is then in window.held: "answered", or the error's name ("AbortError" for a request
# the page called off meanwhile). Any other request goes at once.
_HOLD_FIRST = """
const part = arguments[0];
const real = window.fetch;
let holding = true;
window.letGo = false;
window.held = null;
window.fetch = (url, opts) => {
  if (!holding || !String(url).includes(part)) return real(url, opts);
  holding = false;
  return new Promise((ok) => {
    const wait = setInterval(() => { if (window.letGo) { clearInterval(wait); ok(); } }, 20);
  }).then(() => real(url, opts)).then(
    (r) => { window.held = "answered"; return r; },
    (e) => { window.held = e.name; throw e; });
};
"""


def hold_first_request(driver: Any, part: str) -> None:
    """Hold back the page's next request to an address holding ``part``, so that what the page
    does after it is asked for comes first (``let_go`` sends it): a reply that comes late."""
    driver.execute_script(_HOLD_FIRST, part)


def let_go(driver: Any) -> None:
    driver.execute_script("window.letGo = true")
