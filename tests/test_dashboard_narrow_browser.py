"""Every page of the dashboard at a phone's width (390 px), in headless Chromium against a real
running service whose inbox path is long and whose failure has a long reason: nothing is wider
than the screen, so nothing pushes the page sideways."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import chromium, wait_until
from dashboard_client import Dashboard, served_dashboard
from service_harness import write_atomic

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

PHONE = 390
# Long names without a space to break at, as scanners and archive folders make them.
LONG = "Photos_from_grandmothers_attic_scanned_in_2024_by_the_family_archive_project_" * 2


@pytest.fixture(scope="module")
def dash() -> Iterator[Dashboard]:
    base = Path(tempfile.mkdtemp(prefix="gw-narrow-"))
    root = base / LONG
    root.mkdir()
    broken = base / ("a_part_the_restorer_needs_and_cannot_find_" * 3)  # in the failure's reason
    broken.touch()
    with served_dashboard(root, env={"FAKE_BROKEN_WHILE": str(broken)}) as d:
        write_atomic(d.svc.inbox / "family.jpg", b"\xff\xd8 family")
        write_atomic(d.svc.inbox / ("fixable_scan_of_a_wedding_photo_from_1962_" * 2 + ".jpg"), b"\xff\xd8 x")
        d.wait(lambda s: s["queue"]["done"] == 1 and s["queue"]["failed"] == 1, 30, "a result and a failure")
        yield d


@pytest.fixture(scope="module")
def phone(dash: Dashboard) -> Iterator[Any]:
    # Headless Chromium keeps a window at least 500 px wide: the page is laid out at a phone's
    # width by the DevTools device metrics instead, as a phone would lay it out.
    with chromium(500, 844) as driver:
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": PHONE, "height": 844, "deviceScaleFactor": 1, "mobile": True},
        )
        driver.get(f"{dash.url}?token={dash.token}")
        yield driver


def failed_photo(dash: Dashboard) -> int:
    found = re.search(r'href="/photo/(\d+)"', dash.get("/failed").text)
    assert found
    return int(found[1])


@pytest.mark.parametrize("page", ["", "activity", "results", "failed", "photo", "settings"])
def test_no_page_is_wider_than_a_phone(dash: Dashboard, phone: Any, page: str) -> None:
    path = f"photo/{failed_photo(dash)}" if page == "photo" else page
    phone.get(dash.url + path)
    wait_until(phone, lambda d: d.execute_script("return document.readyState") == "complete")
    assert phone.execute_script("return document.documentElement.clientWidth") == PHONE
    # The long path or reason is on the page (it is what would push it sideways).
    text = phone.execute_script("return document.body.innerText")
    assert (
        "Photos_from_grandmothers_attic" in text or "a_part_the_restorer_needs" in text or page == "results"
    )
    wide = phone.execute_script("return document.documentElement.scrollWidth")
    assert wide <= PHONE, (path, wide)


def test_the_inboxes_table_shows_every_count_at_a_phones_width(dash: Dashboard, phone: Any) -> None:
    from selenium.webdriver.common.by import By

    phone.get(dash.url)
    wait_until(phone, lambda d: d.find_element(By.CSS_SELECTOR, ".table-wrap td"))
    cells = phone.find_elements(By.CSS_SELECTOR, ".table-wrap tbody td")
    for cell in cells:  # every cell inside the screen, none cut off behind a scroll
        left, right = phone.execute_script(
            "const r = arguments[0].getBoundingClientRect(); return [r.left, r.right]", cell
        )
        assert left >= 0 and right <= PHONE, (cell.text, left, right)
    # Each count is labelled, the table's head being out of sight in this layout.
    done = phone.find_element(By.CSS_SELECTOR, '.table-wrap td[data-label="Done today"]')
    assert done.text == "1"
    before = phone.execute_script("return getComputedStyle(arguments[0], '::before').content", done)
    assert before not in ("none", "normal", ""), before
