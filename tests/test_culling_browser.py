"""Culling a batch in headless Chromium against a real running service, as a Lightroom user does
it: live updates that never take what the person is using (a note being typed, a slider being
dragged, a face opened large), P, X, U and the stars with the next photo after each and Ctrl+Z,
a bulk bar that never moves the grid, 1:1 zoom of real pixels at the same spot in both halves, a
copy dropped into another folder listed as a photo, the loupe fitted to the window, and a phone's
grid and swipes.

The stand-in restorer (``review_restorer``) writes results and views the way a worker does: the
result is the photo with its colours turned, so the two halves differ at the same framing."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from browser import chromium, click, hold_first_request, let_go, wait_until
from dashboard_client import Dashboard, served_dashboard
from PIL import Image, ImageDraw
from service_harness import write_atomic
from test_dashboard_browser import text_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

RESTORER = "review_restorer:ReviewRestorer"
NOTE = "eyes look glassy, check"  # holds k, l, g, a, c... every one a key on this page
MARKER = (40, 40)  # the red square's size, at a third of the photo's width and height


def photo(w: int, h: int, shade: int = 0) -> bytes:
    """A JPEG with a gradient, a red square at a third of its size and a round 'face' in its middle."""
    im = Image.new("RGB", (w, h))
    draw = ImageDraw.Draw(im)
    for x in range(0, w, 8):
        draw.rectangle([x, 0, x + 8, h], fill=((x * 255 // w + shade) % 256, 90, 200 - x * 150 // w))
    draw.rectangle([w // 3, h // 3, w // 3 + MARKER[0] - 1, h // 3 + MARKER[1] - 1], fill=(255, 0, 0))
    r = h // 8
    draw.ellipse([w // 2 - r, h // 2 - r, w // 2 + r, h // 2 + r], fill=(230, 200, 170))
    out = io.BytesIO()
    im.save(out, "JPEG", quality=95)
    return out.getvalue()


PHOTOS = {
    "wide 3x1.jpg": photo(2400, 800),
    "square 1x1.jpg": photo(1400, 1400, 30),
    "tall 2x3.jpg": photo(1000, 1500, 60),
    "cull_1.jpg": photo(1200, 800, 90),
    "cull_2.jpg": photo(1200, 800, 110),
    "cull_3.jpg": photo(1200, 800, 130),
    "cull_4.jpg": photo(1200, 800, 150),
    "cull_5.jpg": photo(1200, 800, 170),
    "note_1.jpg": photo(1200, 800, 190),
    "note_2.jpg": photo(1200, 800, 210),
    "marker x2.jpg": photo(900, 600, 230),
    "broken bad.jpg": b"not a photo",  # the stand-in sets it aside: a failure for the Failed page
}


@pytest.fixture(scope="module")
def dash(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    with served_dashboard(tmp_path_factory.mktemp("culling"), restorer=RESTORER) as d:
        for name, data in PHOTOS.items():
            write_atomic(d.svc.inbox / name, data)
        d.wait(lambda s: s["queue"]["done"] >= len(PHOTOS) - 1, 120, "every photo restored")
        yield d


@pytest.fixture(scope="module")
def page(dash: Dashboard) -> Iterator[Any]:
    with chromium(1440, 900) as driver:
        viewport(driver, 1440, 900)
        driver.get(f"{dash.url}?token={dash.token}")
        yield driver


@pytest.fixture(autouse=True)
def nothing_kept(page: Any) -> None:
    """Each test starts in a browser this dashboard has kept nothing in: a preference (tile size,
    the next photo after a mark) or an undo step a test before left would change what it sees,
    and a test that fails before its own clean-up would fail the ones after it too."""
    page.execute_script("localStorage.clear(); sessionStorage.clear()")


def viewport(driver: Any, width: int, height: int, *, touch: bool = False) -> None:
    """The page laid out at exactly ``width`` x ``height`` (a window's size includes its frame);
    ``touch``: a touch screen (a coarse pointer), as a phone's."""
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": touch},
    )
    driver.execute_cdp_cmd("Emulation.setTouchEmulationEnabled", {"enabled": touch, "maxTouchPoints": 5})


def ids(dash: Dashboard, query: str = "") -> dict[str, int]:
    return {p["name"]: p["id"] for p in dash.get("/api/results?limit=200" + query).json()["photos"]}


def record(dash: Dashboard, run: int) -> dict[str, Any]:
    photo: dict[str, Any] = dash.get(f"/api/photo/{run}").json()["photo"]
    return photo


def mark(dash: Dashboard, run: int, body: bytes) -> None:
    r = dash.post(f"/api/mark/{run}", {"Content-Type": "application/json"}, body)
    assert r.status == 200, r.text


def open_photo(driver: Any, dash: Dashboard, run: int, query: str = "") -> None:
    driver.get(f"{dash.url}photo/{run}{query}")
    wait_until(driver, lambda d: d.execute_script("return document.readyState") == "complete")
    driver.execute_script("window.__same_page = 1")


def updates(driver: Any) -> int:
    return int(driver.execute_script("return Number(document.getElementById('live').dataset.updates || 0)"))


def rect(driver: Any, css: str) -> dict[str, float]:
    found: dict[str, float] = driver.execute_script(
        "const r = document.querySelector(arguments[0]).getBoundingClientRect();"
        "return {top: r.top, bottom: r.bottom, left: r.left, right: r.right, width: r.width, height: r.height}",
        css,
    )
    return found


# --- live updates never take what the person is using --------------------------------------------


def test_a_note_typed_while_the_page_updates_keeps_every_letter_and_fires_no_key(
    page: Any, dash: Dashboard
) -> None:
    from selenium.webdriver.common.by import By

    runs = ids(dash, "&q=note_&sort=name")
    first = runs["note_1.jpg"]
    open_photo(page, dash, first, "?q=note_&sort=name&review=unreviewed")
    note = page.find_element(By.CSS_SELECTOR, "form[data-mark] input[name=note]")
    note.click()  # at once, as the page opens: its stream's first update comes while typing
    seen = updates(page)
    place = text_of(page, ".place")
    for i, ch in enumerate(NOTE):
        note.send_keys(ch)
        if i == 5:
            # What changes the page under the person: a rating given elsewhere (its badge and
            # stars), and a new photo of the view (its place, "1 of 3").
            mark(dash, first, b'{"stars": 2}')
            write_atomic(dash.svc.inbox / "note_3.jpg", photo(600, 400, 7))
        time.sleep(0.2)  # about five keys a second, as a person types
    wait_until(page, lambda d: text_of(d, ".place") != place, 30)
    assert updates(page) > seen  # the page was patched while the note was typed
    # Rated, it left the "not reviewed" view; the step bar says so in one sentence.
    wait_until(page, lambda d: text_of(d, ".place").startswith("no longer in this view ("), 20)
    assert text_of(page, ".place").endswith(" still are)") and "in this view in this view" not in text_of(
        page, ".step"
    )
    assert note.get_attribute("value") == NOTE
    assert page.execute_script("return document.activeElement.name") == "note"
    assert page.execute_script("return window.__same_page") == 1  # no key moved the page on
    assert f"/photo/{first}?" in page.current_url
    now = record(dash, first)
    assert now["mark"] is None and now["stars"] == 2  # l (look) and no other flag fired
    assert page.execute_script("return sessionStorage.getItem('gpen-watch:undo')") in (None, "[]")
    # Enter sends the note with "needs another look", and the next photo comes.
    note.send_keys("\n")
    wait_until(page, lambda d: f"/photo/{first}?" not in d.current_url, 20)
    assert record(dash, first)["mark"] == "look" and record(dash, first)["mark_note"] == NOTE


def test_a_slider_drag_and_an_open_face_survive_a_live_update(page: Any, dash: Dashboard) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    run = ids(dash)["square 1x1.jpg"]
    open_photo(page, dash, run)
    wait_until(page, lambda d: updates(d) >= 1, 20)  # the stream is open
    slider = page.find_element(By.CSS_SELECTOR, "[data-compare-range]")
    width = slider.size["width"]
    seen = updates(page)
    # The page's next render differs (a rating given elsewhere): it comes in the middle of a drag
    # from 50 % to 90 % that pauses three seconds (the stream renders once a second).
    rated = threading.Timer(0.5, mark, (dash, run, b'{"stars": 3}'))
    rated.start()
    drag = ActionChains(page, duration=50).click_and_hold(slider).move_by_offset(int(width * 0.1), 0)
    drag.pause(3).move_by_offset(int(width * 0.3), 0).pause(0.3)
    drag.perform()
    rated.join()
    assert updates(page) == seen  # held while the pointer is down
    ActionChains(page).release().perform()
    wait_until(page, lambda d: updates(d) > seen, 20)  # laid over once it is lifted
    wait_until(page, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".star.on")) == 3)
    value = float(slider.get_attribute("value"))
    assert 85 <= value <= 95, value  # dragged from the middle to 90 %: where the pointer left it
    clip = page.execute_script("return document.querySelector('.before-clip').style.width")
    assert clip == f"{slider.get_attribute('value')}%"
    # A face opened large stays open, both halves shown, across the next update.
    page.find_element(By.CSS_SELECTOR, "[data-face-open]").click()
    wait_until(page, lambda d: d.execute_script("return document.querySelector('[data-face-dialog]').open"))
    seen = updates(page)
    mark(dash, run, b'{"mark": "accepted"}')
    wait_until(page, lambda d: updates(d) > seen, 20)
    wait_until(page, lambda d: "picked" in text_of(d, ".mark-now"), 20)
    assert page.execute_script("return document.querySelector('[data-face-dialog]').open") is True
    assert page.execute_script("return document.querySelector('[data-face-after]').getAttribute('src')")
    # Large: each half at least a third of the window wide, not the crop's own 96 pixels.
    assert rect(page, "[data-face-after]")["width"] >= 1440 / 3
    page.find_element(By.CSS_SELECTOR, "body").send_keys("\ue00c")  # Escape
    wait_until(
        page, lambda d: not d.execute_script("return document.querySelector('[data-face-dialog]').open")
    )


# --- culling keys ---------------------------------------------------------------------------------


def test_pick_reject_unflag_and_stars_go_on_to_the_next_photo_and_undo(page: Any, dash: Dashboard) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    query = "?q=cull_&sort=name"
    order = [p["id"] for p in dash.get("/api/results" + query).json()["photos"]]
    assert len(order) == 5
    open_photo(page, dash, order[0], query)
    page.execute_script("localStorage.removeItem('gpen-watch:advance'); sessionStorage.clear()")
    page.refresh()
    assert page.execute_script("return document.querySelector('[data-auto-advance]').checked") is True

    def press(key: str, held: str | None = None) -> None:
        chain = ActionChains(page)
        if held is not None:
            chain.key_down(held)
        chain.send_keys(key)
        if held is not None:
            chain.key_up(held)
        chain.perform()

    def at(i: int) -> None:
        wait_until(page, lambda d: f"/photo/{order[i]}{query}" in d.current_url, 20)
        wait_until(page, lambda d: d.execute_script("return document.readyState") == "complete")

    press("p")
    at(1)
    assert record(dash, order[0])["mark"] == "accepted"
    assert "Picked cull_1.jpg" in text_of(page, "[data-undo-line]")
    press("x")
    at(2)
    assert record(dash, order[1])["mark"] == "rejected"
    press("4")
    at(3)
    assert record(dash, order[2])["stars"] == 4
    # Ctrl+Z undoes the last mark and goes back to its photo; again, the one before.
    press("z", Keys.CONTROL)
    at(2)
    wait_until(page, lambda d: record(dash, order[2])["stars"] is None)
    press("z", Keys.CONTROL)
    at(1)
    wait_until(page, lambda d: record(dash, order[1])["mark"] is None)
    assert record(dash, order[1])["reviewed"] is None  # nothing said of it: not reviewed again
    # U unflags; the box off, a mark stays on its photo; Shift with a mark moves on all the same.
    press("k")
    at(0)
    press("u")
    at(1)
    assert record(dash, order[0])["mark"] is None
    page.find_element("css selector", "[data-auto-advance]").click()
    press("p")
    wait_until(page, lambda d: record(dash, order[1])["mark"] == "accepted")
    # The page's own record of the mark comes with the reply, after the journal has it: Shift+X
    # below must find it there (its undo step keeps the mark it replaces).
    wait_until(page, lambda d: "Picked cull_2.jpg" in text_of(d, "[data-undo-line]"))
    assert f"/photo/{order[1]}{query}" in page.current_url
    press("x", Keys.SHIFT)
    at(2)
    assert record(dash, order[1])["mark"] == "rejected"
    press("5")
    wait_until(page, lambda d: record(dash, order[2])["stars"] == 5)
    wait_until(page, lambda d: len(d.find_elements("css selector", ".star.on")) == 5)
    wait_until(page, lambda d: "Rated ★★★★★ cull_3.jpg" in text_of(d, "[data-undo-line]"))
    assert f"/photo/{order[2]}{query}" in page.current_url
    # G goes back to the grid, at this photo's page of it.
    press("g")
    wait_until(page, lambda d: "/results" in d.current_url)


def test_marks_made_before_the_first_is_answered_end_as_the_last_one_said(page: Any, dash: Dashboard) -> None:
    """P, then X before P's reply is in: the photo ends rejected, as the last key said, and each
    key is one step to undo (two requests sent at once could be answered in either order); a star
    clicked twice as quickly ends with no stars."""
    run = ids(dash)["cull_5.jpg"]
    page.execute_script("localStorage.setItem('gpen-watch:advance', '0')")  # stay on the photo
    open_photo(page, dash, run)
    hold_first_request(page, "/api/mark/")
    try:
        body = page.find_element("css selector", "body")
        body.send_keys("p")
        body.send_keys("x")
        let_go(page)
        steps = "return JSON.parse(sessionStorage.getItem('gpen-watch:undo') || '[]').length"
        wait_until(page, lambda d: d.execute_script(steps) == 2, 30)
        assert record(dash, run)["mark"] == "rejected"
        assert "Rejected cull_5.jpg" in text_of(page, "[data-undo-line]")
        # A star clicked twice: the second click finds the first's rating and clears it.
        hold_first_request(page, "/api/mark/")
        click(page, ".stars button:nth-child(3)")
        click(page, ".stars button:nth-child(3)")
        let_go(page)
        wait_until(page, lambda d: d.execute_script(steps) == 4, 30)
        assert not record(dash, run)["stars"]
        assert "Stars cleared: cull_5.jpg" in text_of(page, "[data-undo-line]")
        assert f"/photo/{run}" in page.current_url and page.execute_script("return window.__same_page") == 1
    finally:
        mark(dash, run, b'{"mark": "none", "stars": 0}')


def test_the_mark_form_works_in_a_browser_without_the_pages_script(dash: Dashboard) -> None:
    """Script off: Pick, the note with Enter (needs another look, not the form's first button
    Pick), a star and the lit star again each post the form and come back to the photo's page in
    its view, showing the mark."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    run = ids(dash)["wide 3x1.jpg"]
    here = f"photo/{run}?q=wide&sort=name"
    with chromium(1440, 900, javascript=False) as driver:
        driver.get(f"{dash.url}{here}&token={dash.token}")
        wait_until(driver, lambda d: d.current_url == dash.url + here)

        def press(css: str) -> None:
            driver.find_element(By.CSS_SELECTOR, "form[data-mark] " + css).click()

        def back_with(badge: str) -> None:
            wait_until(
                driver, lambda d: d.current_url == dash.url + here and badge in text_of(d, ".mark-now")
            )

        try:
            press("button[data-key=p]")
            back_with("picked")
            assert record(dash, run)["mark"] == "accepted"
            note = driver.find_element(By.CSS_SELECTOR, "form[data-mark] input[name=note]")
            note.send_keys("sky too blue" + Keys.ENTER)
            back_with("needs another look: sky too blue")
            assert (record(dash, run)["mark"], record(dash, run)["mark_note"]) == ("look", "sky too blue")
            press("button[aria-label='3 stars']")
            wait_until(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".star.on")) == 3)
            assert record(dash, run)["stars"] == 3
            press("button[aria-label='3 stars']")  # the lit star again: no stars
            wait_until(driver, lambda d: not d.find_elements(By.CSS_SELECTOR, ".star.on"))
            assert record(dash, run)["stars"] is None and driver.current_url == dash.url + here
        finally:
            mark(dash, run, b'{"mark": "none", "note": null, "stars": 0}')


def test_the_keys_are_listed_only_where_there_is_a_keyboard(dash: Dashboard) -> None:
    run = ids(dash)["wide 3x1.jpg"]
    with chromium(1440, 900) as driver:
        driver.get(f"{dash.url}?token={dash.token}")

        def shown() -> list[bool]:
            found: list[bool] = driver.execute_script(
                "return [...document.querySelectorAll('.marks kbd, [data-keys-help]')]"
                ".map(e => getComputedStyle(e).display !== 'none')"
            )
            assert found
            return found

        # Headless Chromium has a keyboard and no pointer at all (pointer: none), as a desktop
        # used from its keyboard: the keys are listed.
        viewport(driver, 1440, 900)
        open_photo(driver, dash, run)
        assert all(shown())
        assert driver.find_element("css selector", '[data-key="l"] kbd').text == "L"  # never read as a 1
        # A touch screen: not listed, until a key is pressed there (a tablet's keyboard).
        viewport(driver, 1440, 900, touch=True)
        open_photo(driver, dash, run)
        assert not any(shown())
        driver.find_element("css selector", "body").send_keys("?")
        wait_until(driver, lambda d: all(shown()))


# --- Results' grid --------------------------------------------------------------------------------


def test_ticking_tiles_brings_the_bulk_bar_without_moving_the_grid(page: Any, dash: Dashboard) -> None:
    from selenium.webdriver.common.by import By

    page.get(dash.url + "results?q=cull_&sort=name")
    wait_until(page, lambda d: len(d.find_elements(By.CSS_SELECTOR, "[data-select]")) == 5)
    assert page.execute_script("return document.querySelector('[data-bulk]').hidden") is True
    second = rect(page, ".tile:nth-child(2) [data-select]")
    click(page, "[data-select]")
    wait_until(page, lambda d: not d.execute_script("return document.querySelector('[data-bulk]').hidden"))
    assert rect(page, ".tile:nth-child(2) [data-select]") == second  # nothing moved under the pointer
    click(page, "[data-select]", 1)  # so the next click lands on it
    wait_until(page, lambda d: text_of(d, "[data-bulk-count]") == "2")
    bar = rect(page, "[data-bulk]")
    assert bar["bottom"] <= 900 and bar["top"] > second["bottom"]  # over the foot of the window
    page.find_element(By.CSS_SELECTOR, '[data-bulk-action="accept"]').click()
    wait_until(page, lambda d: "Picked 2." in text_of(d, "[data-bulk-progress]"))
    # Nothing selected now: the outcome stays, the buttons do nothing.
    assert page.execute_script(
        "return [...document.querySelectorAll('[data-bulk-action]')].every(b => b.disabled)"
    )
    assert rect(page, ".tile:nth-child(2) [data-select]") == second


def test_tile_size_and_the_whole_photo_on_the_tile(page: Any, dash: Dashboard) -> None:
    from selenium.webdriver.common.by import By

    page.get(dash.url + "results")
    wait_until(page, lambda d: d.find_elements(By.CSS_SELECTOR, ".grid .tile"))

    def per_row() -> int:
        tops = page.execute_script(
            "return [...document.querySelectorAll('.grid .tile')].map(t => Math.round(t.getBoundingClientRect().top))"
        )
        return int(tops.count(tops[0]))

    medium = per_row()
    page.find_element(By.CSS_SELECTOR, '[data-tiles][value="s"]').click()
    wait_until(page, lambda d: per_row() > medium)
    page.find_element(By.CSS_SELECTOR, '[data-tiles][value="l"]').click()
    wait_until(page, lambda d: per_row() < medium)
    assert page.execute_script("return localStorage.getItem('gpen-watch:tiles')") == "l"
    page.find_element(By.CSS_SELECTOR, '[data-show][value="photo"]').click()
    shown = page.execute_script(
        "const t = document.querySelector('.tile-done img.thumb'); const s = getComputedStyle(t);"
        "return [s.display, s.objectFit]"
    )
    assert shown == ["block", "contain"]  # the whole photo, nothing cut off
    page.refresh()  # the choice is kept for this browser
    assert page.execute_script("return document.documentElement.dataset.tiles") == "l"


# --- the loupe ------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [(1440, 900), (1920, 1080)])
def test_the_loupe_fits_the_window_for_wide_square_and_tall_photos(
    dash: Dashboard, size: tuple[int, int]
) -> None:
    width, height = size
    runs = ids(dash)
    with chromium(width, height) as driver:
        viewport(driver, width, height)
        driver.get(f"{dash.url}?token={dash.token}")
        for name in ("wide 3x1.jpg", "square 1x1.jpg", "tall 2x3.jpg"):
            open_photo(driver, dash, runs[name])
            wait_until(
                driver,
                lambda d: "fitted" in d.find_element("css selector", ".compare-frame").get_attribute("class"),
            )
            frame = rect(driver, ".compare-frame")
            slider = rect(driver, "[data-compare-range]")
            assert frame["bottom"] <= height and slider["bottom"] <= height, (name, size, frame, slider)
            assert rect(driver, ".filmstrip")["bottom"] <= height, (name, size)
            # As large as that allows: the full width, or the height left above the slider.
            figure = rect(driver, "figure.loupe")
            assert frame["width"] >= figure["width"] - 2 or frame["height"] >= 0.5 * height, (
                name,
                size,
                frame,
            )


RED, CYAN = [255, 0, 0], [0, 255, 255]


def red_and_cyan_centres(
    driver: Any, before: list[int] = RED, after: list[int] = CYAN
) -> dict[str, list[float]]:
    """Where the marker is in each crop: red in the original's, cyan (its colours turned) in the
    result's (or the colours given), as the centre of those pixels in the crop's own pixels."""
    found: dict[str, list[float]] = driver.execute_script(
        """
        const out = {};
        for (const [side, want] of [["before", arguments[0]], ["after", arguments[1]]]) {
          const img = document.querySelector("img." + side + "-crop");
          const c = document.createElement("canvas");
          c.width = img.naturalWidth; c.height = img.naturalHeight;
          const g = c.getContext("2d"); g.drawImage(img, 0, 0);
          const px = g.getImageData(0, 0, c.width, c.height).data;
          let n = 0, sx = 0, sy = 0;
          for (let i = 0; i < px.length; i += 4) {
            if (Math.abs(px[i] - want[0]) < 60 && Math.abs(px[i + 1] - want[1]) < 60 && Math.abs(px[i + 2] - want[2]) < 60) {
              const p = i / 4; n++; sx += p % c.width; sy += Math.floor(p / c.width);
            }
          }
          out[side] = [n, sx / Math.max(n, 1), sy / Math.max(n, 1), c.width, c.height];
        }
        return out;
        """,
        before,
        after,
    )
    return found


def test_z_shows_real_pixels_of_both_halves_at_the_same_spot(page: Any, dash: Dashboard) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    run = ids(dash)["marker x2.jpg"]  # 900 x 600, its result upscaled to 1800 x 1200
    open_photo(page, dash, run)
    wait_until(
        page, lambda d: "fitted" in d.find_element("css selector", ".compare-frame").get_attribute("class")
    )
    frame = page.find_element("css selector", ".compare-frame")
    box = rect(page, ".compare-frame")
    # The pointer on the red square (a third of the way in): Z zooms to 1:1 there.
    ActionChains(page).move_to_element_with_offset(
        frame, int(box["width"] / 3 + 10 - box["width"] / 2), int(box["height"] / 3 + 10 - box["height"] / 2)
    ).perform()
    ActionChains(page).send_keys("z").perform()
    wait_until(
        page,
        lambda d: d.execute_script(
            "return ['before', 'after'].every(s => { const i = document.querySelector('img.' + s + '-crop');"
            " return i && !i.hidden && i.complete && i.naturalWidth > 0; })"
        ),
        30,
    )
    assert text_of(page, "[data-zoom-level]") == "100%"
    regions = page.execute_script(
        "return ['before', 'after'].map(s => document.querySelector('img.' + s + '-crop').dataset.region)"
    )
    assert regions[0] == regions[1]  # the same part of the photo in both halves
    centres = red_and_cyan_centres(page)
    before, after = centres["before"], centres["after"]
    # Real pixels: the result's crop is as many pixels as the frame shows, one for one.
    width = page.execute_script("return document.querySelector('.compare-frame').clientWidth")
    assert after[3] == width, (after, width)
    assert before[3:] == after[3:]
    # The marker, 40 px in the original, 80 px in the upscaled result: the same spot in both.
    assert before[0] > 1000 and after[0] > 1000, centres
    assert abs(before[1] - after[1]) <= 3 and abs(before[2] - after[2]) <= 3, centres
    # Z again: back to fit, the crops put away.
    ActionChains(page).send_keys("z").perform()
    wait_until(page, lambda d: text_of(d, "[data-zoom-level]").startswith("fit ("))  # fit, at a share of 1:1
    assert page.execute_script("return document.querySelector('img.after-crop').hidden") is True


def test_compare_runs_shows_real_pixels_of_both_results_at_the_same_spot(page: Any, dash: Dashboard) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    write_atomic(dash.svc.inbox / "compare marker.jpg", photo(900, 600, 250))
    dash.wait(lambda s: "compare marker.jpg" in str(ids(dash)), 60, "the photo restored")
    first = ids(dash)["compare marker.jpg"]  # its result 900 x 600
    r = dash.post(
        f"/api/redo/{first}",
        {"Content-Type": "application/json"},
        b'{"settings": {"restore.model": "GFPGAN-v1.4", "restore.upscale": 2}, "beside": true}',
    )
    assert r.status == 200, r.text
    second = int(r.json()["id"])  # its result 1800 x 1200
    dash.wait(lambda s: record(dash, second)["state"] == "done", 60, "the redo beside")
    page.get(f"{dash.url}photo/{first}/compare/{second}")
    wait_until(
        page, lambda d: "fitted" in d.find_element("css selector", ".compare-frame").get_attribute("class")
    )
    frame = page.find_element("css selector", ".compare-frame")
    box = rect(page, ".compare-frame")
    assert box["bottom"] <= 900 and rect(page, ".loupe-bar")["bottom"] <= 900  # fits 1440 x 900
    ActionChains(page).move_to_element_with_offset(
        frame, int(box["width"] / 3 + 10 - box["width"] / 2), int(box["height"] / 3 + 10 - box["height"] / 2)
    ).perform()
    ActionChains(page).send_keys("z").perform()
    wait_until(
        page,
        lambda d: d.execute_script(
            "return ['before', 'after'].every(s => { const i = document.querySelector('img.' + s + '-crop');"
            " return i && !i.hidden && i.complete && i.naturalWidth > 0; })"
        ),
        30,
    )
    assert text_of(page, "[data-zoom-level]") == "100%"  # of the right half, the larger result
    sources = page.execute_script(
        "return ['before', 'after'].map(s => document.querySelector('img.' + s + '-crop').getAttribute('src'))"
    )
    region = sources[1].split("?")[1]
    assert sources == [
        f"/photo/{first}/compare/{second}/crop/before.jpg?{region}",
        f"/photo/{first}/compare/{second}/crop/after.jpg?{region}",
    ]
    # Both halves are results (the marker cyan in each), one for one on screen in the right half,
    # the left one's 900 px brought to the same size: the same spot in both.
    centres = red_and_cyan_centres(page, CYAN, CYAN)
    before, after = centres["before"], centres["after"]
    assert after[3] == page.execute_script("return document.querySelector('.compare-frame').clientWidth")
    assert before[3:] == after[3:]
    assert before[0] > 1000 and after[0] > 1000, centres
    assert abs(before[1] - after[1]) <= 3 and abs(before[2] - after[2]) <= 3, centres
    # For a person to look at: left of the line the first run's pixels, right the second's.
    page.save_screenshot(str(dash.svc.root / "compare-real-pixels.png"))
    ActionChains(page).send_keys("z").perform()
    wait_until(page, lambda d: text_of(d, "[data-zoom-level]").startswith("fit ("))
    assert page.execute_script("return document.querySelector('img.after-crop').hidden") is True


# --- a copy dropped elsewhere ---------------------------------------------------------------------


def test_a_copy_dropped_into_another_folder_is_listed_saying_what_it_copies(
    page: Any, dash: Dashboard
) -> None:
    from selenium.webdriver.common.by import By

    write_atomic(dash.svc.inbox / "album" / "square 1x1.jpg", PHOTOS["square 1x1.jpg"])
    page.get(dash.url + "results?q=album")
    wait_until(page, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".grid .tile")) == 1, 60)
    tile = text_of(page, ".grid .tile")
    assert "album/" in tile and "a copy of square 1x1.jpg" in tile
    page.find_element(By.CSS_SELECTOR, ".grid .tile a").click()
    wait_until(page, lambda d: "a copy of square 1x1.jpg" in text_of(d, "h1"))
    assert "copy" in text_of(page, "h1 .state")


# --- a phone --------------------------------------------------------------------------------------


def test_a_phone_has_two_tiles_a_row_and_swipes_between_photos(dash: Dashboard) -> None:
    with chromium(500, 844) as driver:
        viewport(driver, 390, 844, touch=True)
        driver.get(f"{dash.url}?token={dash.token}")
        driver.get(dash.url + "results?q=cull_&sort=name")
        wait_until(driver, lambda d: len(d.find_elements("css selector", ".grid .tile")) == 5)
        tops = driver.execute_script(
            "return [...document.querySelectorAll('.grid .tile')].map(t => Math.round(t.getBoundingClientRect().top))"
        )
        assert tops.count(tops[0]) >= 2  # at least two tiles a row
        assert driver.execute_script("return document.documentElement.scrollWidth") <= 390
        order = [p["id"] for p in dash.get("/api/results?q=cull_&sort=name").json()["photos"]]
        open_photo(driver, dash, order[1], "?q=cull_&sort=name")
        wait_until(
            driver,
            lambda d: "fitted" in d.find_element("css selector", ".compare-frame").get_attribute("class"),
        )
        frame = rect(driver, ".compare-frame")
        y = frame["top"] + frame["height"] / 2

        def swipe(x0: float, x1: float) -> None:
            touch = "Input.dispatchTouchEvent"
            driver.execute_cdp_cmd(touch, {"type": "touchStart", "touchPoints": [{"x": x0, "y": y}]})
            for k in range(1, 6):
                driver.execute_cdp_cmd(
                    touch, {"type": "touchMove", "touchPoints": [{"x": x0 + (x1 - x0) * k / 5, "y": y}]}
                )
            driver.execute_cdp_cmd(touch, {"type": "touchEnd", "touchPoints": []})

        swipe(frame["right"] - 20, frame["left"] + 20)  # to the left: the next photo
        wait_until(driver, lambda d: f"/photo/{order[2]}?" in d.current_url, 20)
        wait_until(
            driver,
            lambda d: "fitted" in d.find_element("css selector", ".compare-frame").get_attribute("class"),
        )
        swipe(frame["left"] + 20, frame["right"] - 20)  # to the right: back
        wait_until(driver, lambda d: f"/photo/{order[1]}?" in d.current_url, 20)


# --- small things ---------------------------------------------------------------------------------


def test_buttons_that_sit_side_by_side_do_not_touch_and_a_checkbox_sits_by_its_label(
    page: Any, dash: Dashboard
) -> None:
    page.get(dash.url + "failed")
    wait_until(page, lambda d: d.find_elements("css selector", ".all-failures button"))
    retry, dismiss = (rect(page, f".all-failures form:nth-child({n}) button") for n in (1, 2))
    assert dismiss["left"] - retry["right"] >= 6, (retry, dismiss)  # "Retry all" and "Dismiss all"
    open_photo(page, dash, ids(dash)["square 1x1.jpg"])
    box = rect(page, "form[data-redo] input[name=pick]")
    label = page.execute_script(
        "const l = document.querySelector('form[data-redo] input[name=pick]').parentElement;"
        "const r = document.createRange(); r.selectNodeContents(l); r.setStartAfter(l.querySelector('input'));"
        "return r.getBoundingClientRect().left"
    )
    assert 0 <= label - box["right"] <= 12, (box, label)  # the Redo form's "only the faces ticked above"
