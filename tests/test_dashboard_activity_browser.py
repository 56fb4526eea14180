"""The Activity page in headless Chromium against a real running service: a run's steps a person
unfolded stay unfolded while the page updates live, and "Failures only" follows the journal live
with its filter."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from browser import chromium, wait_until
from dashboard_client import Dashboard, served_dashboard
from service_harness import write_atomic
from test_dashboard_browser import text_of

from gpen_watch.dashboard.live import TICK_S

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def dash(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    with served_dashboard(tmp_path_factory.mktemp("activity")) as d:
        write_atomic(d.svc.inbox / "first.jpg", b"\xff\xd8 first")
        d.wait(lambda s: s["queue"]["done"] == 1, 30, "the first photo")
        yield d


def test_unfolded_steps_stay_unfolded_through_a_live_update(dash: Dashboard) -> None:
    from selenium.webdriver.common.by import By

    with chromium() as page:
        page.get(f"{dash.url}?token={dash.token}")
        page.get(dash.url + "activity")
        wait_until(page, lambda d: text_of(d, "#conn") == "live")
        page.find_element(By.CSS_SELECTOR, ".runs-activity details summary").click()
        key = page.execute_script("return document.querySelector('.runs-activity details[open]').dataset.key")
        assert "finished" in text_of(page, f"details[data-key='{key}']")
        page.execute_script(
            "document.querySelector(`details[data-key='${arguments[0]}'] summary`).focus()", key
        )
        write_atomic(dash.svc.inbox / "second bad.jpg", b"\xff\xd8 fails")
        wait_until(page, lambda d: "second bad.jpg" in text_of(d, "#live"))
        assert (
            page.execute_script(f"return document.querySelector(\"details[data-key='{key}']\").open") is True
        )
        # The keyboard focus stays on the line it was on.
        assert page.execute_script("return document.activeElement.parentElement.dataset.key") == key
        # The line of the new photo came folded, as every line does.
        assert (
            page.execute_script("return document.querySelectorAll('.runs-activity details[open]').length")
            == 1
        )

        page.find_element(By.LINK_TEXT, "Failures only").click()
        wait_until(page, lambda d: d.current_url.endswith("/activity?only=failed"))
        wait_until(page, lambda d: text_of(d, "#conn") == "live")
        assert page.find_element(By.ID, "live").get_attribute("data-live") == "/live/activity?only=failed"
        assert "first.jpg" not in text_of(page, "#live")
        write_atomic(dash.svc.inbox / "third bad.jpg", b"\xff\xd8 fails too")
        wait_until(page, lambda d: "third bad.jpg" in text_of(d, "#live"))
        write_atomic(dash.svc.inbox / "fourth.jpg", b"\xff\xd8 restored")
        dash.wait(lambda s: s["queue"]["done"] == 2, 30, "the fourth photo")
        time.sleep(2 * TICK_S)  # a render of the stream since
        assert "fourth.jpg" not in text_of(page, "#live")  # the live stream keeps the filter
