"""Reviewing a batch in headless Chromium against a real running service: typing a name narrows
Results as you type, the next key steps to the next photo of the view, three photos selected with
a click and a shift-click are redone together with their progress shown, a photo zooms with the
keys and the wheel with both halves together, and a key (P) picks it."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest
from browser import chromium, click, hold_first_request, let_go, wait_until
from dashboard_client import Dashboard, served_dashboard
from PIL import Image
from service_harness import write_atomic
from test_dashboard_browser import text_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

NAMES = ["alpha_1.jpg", "alpha_2.jpg", "alpha_3.jpg", "beta_1.jpg", "beta_2.jpg", "gamma noface.jpg"]


def jpeg(shade: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (320, 240), (shade, 120, 255 - shade)).save(out, "JPEG")
    return out.getvalue()


@pytest.fixture(scope="module")
def dash(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    with served_dashboard(tmp_path_factory.mktemp("review-browser")) as d:
        for i, name in enumerate(NAMES):
            write_atomic(d.svc.inbox / name, jpeg(40 * i))
        d.wait(lambda s: s["queue"]["done"] >= len(NAMES))
        yield d


@pytest.fixture(scope="module")
def page(dash: Dashboard) -> Iterator[Any]:
    with chromium() as driver:
        driver.get(f"{dash.url}?token={dash.token}")
        yield driver


def tiles(driver: Any) -> list[str]:
    from selenium.webdriver.common.by import By

    return [str(e.text) for e in driver.find_elements(By.CSS_SELECTOR, ".grid .tile .name")]


def test_typing_a_name_shows_only_its_tiles(page: Any, dash: Dashboard) -> None:
    from selenium.webdriver.common.by import By

    page.get(dash.url + "results")
    wait_until(page, lambda d: len(tiles(d)) == len(NAMES))
    page.find_element(By.CSS_SELECTOR, "input[type=search][name=q]").send_keys("alpha")
    wait_until(page, lambda d: sorted(tiles(d)) == ["alpha_1.jpg", "alpha_2.jpg", "alpha_3.jpg"])
    assert page.current_url.endswith("/results?q=alpha")  # the view is in the URL: a bookmark
    assert "3 photos match" in text_of(page, ".matches")
    # The live stream follows the view: a new photo that matches shows up, one that does not, not.
    write_atomic(dash.svc.inbox / "alpha_4.jpg", jpeg(7))
    write_atomic(dash.svc.inbox / "delta.jpg", jpeg(9))
    wait_until(page, lambda d: "alpha_4.jpg" in tiles(d), 30)
    assert "delta.jpg" not in tiles(page)


def test_an_older_searchs_late_reply_never_replaces_the_newer_one(page: Any, dash: Dashboard) -> None:
    """On a busy machine the reply to what was typed first may come last: it is called off, and
    the grid and its live stream stay on what was typed last."""
    page.get(dash.url + "results")
    wait_until(page, lambda d: len(tiles(d)) >= len(NAMES))
    hold_first_request(page, "q=beta")
    search = "const q = document.querySelector('input[type=search][name=q]'); q.value = arguments[0];"
    search += "q.dispatchEvent(new Event('input', {bubbles: true}));"
    page.execute_script(search, "beta")
    wait_until(page, lambda d: d.current_url.endswith("/results?q=beta"))  # its search is on its way
    page.execute_script(search, "alpha")
    wait_until(page, lambda d: tiles(d) and all(t.startswith("alpha_") for t in tiles(d)))
    let_go(page)  # the reply to "beta" may come now, after the one to "alpha"
    wait_until(page, lambda d: d.execute_script("return window.held") is not None, 30)
    assert page.execute_script("return window.held") == "AbortError"
    assert tiles(page) and all(t.startswith("alpha_") for t in tiles(page))
    assert page.execute_script("return document.getElementById('live').dataset.live").endswith("?q=alpha")
    assert page.current_url.endswith("/results?q=alpha")


def test_the_next_key_lands_on_the_next_photo_of_the_view(page: Any, dash: Dashboard) -> None:
    order = [p["id"] for p in dash.get("/api/results?q=alpha&sort=name").json()["photos"]]
    page.get(f"{dash.url}photo/{order[0]}?q=alpha&sort=name")
    wait_until(page, lambda d: "1 of 4" in text_of(d, ".step"))
    page.find_element("css selector", "body").send_keys("j")
    wait_until(page, lambda d: f"/photo/{order[1]}?q=alpha&sort=name" in d.current_url)
    assert "2 of 4 in this view" in text_of(page, ".step")
    page.find_element("css selector", "body").send_keys("k")
    wait_until(page, lambda d: f"/photo/{order[0]}?" in d.current_url)
    page.find_element("css selector", "body").send_keys("?")
    wait_until(page, lambda d: d.execute_script("return document.querySelector('[data-keys-dialog]').open"))


def test_select_three_photos_and_redo_them(page: Any, dash: Dashboard) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    page.get(dash.url + "results?q=beta")
    wait_until(page, lambda d: len(tiles(d)) == 2)
    page.get(dash.url + "results?q=a&sort=name")  # alpha_1..4, beta_1, beta_2, gamma, delta
    wait_until(page, lambda d: len(tiles(d)) >= 6)
    boxes = page.find_elements(By.CSS_SELECTOR, "[data-select]")
    boxes[0].click()
    ActionChains(page).key_down(Keys.SHIFT).click(boxes[2]).key_up(Keys.SHIFT).perform()
    wait_until(page, lambda d: text_of(d, "[data-bulk-count]") == "3")
    picked = [int(b.get_attribute("value")) for b in boxes[:3]]
    click(page, '[data-bulk-action="redo"]')
    wait_until(page, lambda d: "Redo: 3 of 3 done" in text_of(d, "[data-bulk-progress]"), 60)
    redone = {p["redo_of"] for p in dash.get("/api/results?state=redone").json()["photos"]}
    assert redone == set(picked)


def test_a_photo_zooms_both_halves_together_and_a_key_picks_it(page: Any, dash: Dashboard) -> None:
    photo = dash.get("/api/results?q=gamma").json()["photos"][0]
    page.get(f"{dash.url}photo/{photo['id']}")
    wait_until(page, lambda d: d.execute_script("return document.querySelector('img.after').complete"))
    body = page.find_element("css selector", "body")
    body.send_keys("+")
    transforms = page.execute_script(
        "return ['img.after', 'img.before', '.boxes'].map(s => document.querySelector(s).style.transform)"
    )
    assert len(set(transforms)) == 1 and "scale(1.5)" in transforms[0]
    assert text_of(page, "[data-zoom-level]") != "fit"
    page.execute_script(
        "const f = document.querySelector('[data-zoomable]'); const r = f.getBoundingClientRect();"
        "f.dispatchEvent(new WheelEvent('wheel', {deltaY: -100, clientX: r.left + 10, clientY: r.top + 10,"
        " bubbles: true, cancelable: true}));"
    )
    assert "scale(1.875)" in page.execute_script(
        "return document.querySelector('img.before').style.transform"
    )
    click(page, '[data-zoom="fit"]')
    assert page.execute_script("return document.querySelector('img.after').style.transform") == ""
    assert text_of(page, "[data-zoom-level]").startswith("fit")
    after = page.find_element("css selector", 'a[data-key="j"]').get_attribute("href")
    body.send_keys("p")
    wait_until(page, lambda d: dash.get("/api/results?q=gamma&review=accepted").json()["total"] == 1, 20)
    # Picked, the page moves to the next photo and says what was done. Waited for here: a move
    # still on its way when the next test opens its page would land that test on this one's.
    wait_until(page, lambda d: d.current_url == after, 20)
    wait_until(page, lambda d: "Picked gamma noface.jpg" in text_of(d, "[data-undo-line]"), 20)


def test_a_redo_from_a_photos_page_moves_the_page_to_the_new_run(page: Any, dash: Dashboard) -> None:
    photo = dash.get("/api/results?q=beta_2").json()["photos"][0]
    page.get(f"{dash.url}photo/{photo['id']}?q=beta")
    click(page, "form[data-redo] button.primary")
    wait_until(page, lambda d: f"/photo/{photo['id']}?" not in d.current_url, 30)
    new = int(page.current_url.split("/photo/")[1].split("?")[0])
    assert new > photo["id"] and page.current_url.endswith("?q=beta")  # still within its view
    assert f"run {new}" in text_of(page, "h1")
    assert dash.get(f"/api/photo/{new}").json()["photo"]["state"] == "done"
