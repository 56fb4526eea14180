"""Sending photos from the dashboard in headless Chromium against a real running service: files
picked with the panel's button, a folder picked with its picker, files dropped on a page (a
synthetic drop of the page's own DataTransfer, and a real folder dragged in through DevTools) are
restored, keep their subfolders and download; each file's progress and the total reach 100 %; an
upload stopped half-way leaves nothing in the inbox and goes again; a zip of the tiles ticked on
Results holds exactly their results. The panel is photographed at a laptop's and a phone's size."""

from __future__ import annotations

import io
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from api_harness import files, uploads_left
from browser import chromium, click, wait_until
from dashboard_client import Dashboard, served_dashboard
from test_dashboard_browser import text_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def dash(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    with served_dashboard(tmp_path_factory.mktemp("upload-browser")) as d:
        yield d


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("downloads")


@pytest.fixture(scope="module")
def page(dash: Dashboard, saved: Path) -> Iterator[Any]:
    with chromium(1440, 900) as driver:
        driver.execute_cdp_cmd(
            "Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(saved)}
        )
        driver.get(f"{dash.url}?token={dash.token}")
        yield driver


def photo_file(folder: Path, name: str, size: int = 2000) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\xff\xd8" + str(path).encode() + bytes(size))  # a photo of its own
    return path


def rows(driver: Any) -> list[tuple[str, str, str]]:
    """Each file of the panel: its name line, its state, what it says."""
    return [
        (str(r[0]), str(r[1]), str(r[2]))
        for r in driver.execute_script(
            "return Array.from(document.querySelectorAll('.upload-file')).map(li =>"
            " [li.querySelector('.upload-name').textContent, li.dataset.state,"
            " li.querySelector('.upload-what').textContent])"
        )
    ]


def states(driver: Any) -> list[str]:
    return [state for _, state, _ in rows(driver)]


def fresh_panel(driver: Any, dash: Dashboard, path: str = "") -> None:
    """A page with an empty panel, open."""
    driver.get(dash.url + path)
    click(driver, "[data-upload-open]")
    wait_until(driver, lambda d: d.find_element("css selector", "[data-upload-inbox] option"))


def downloaded(folder: Path, name: str, timeout: float = 30.0) -> bytes:
    path = folder / name
    deadline = time.monotonic() + timeout
    while not path.exists() or list(folder.glob("*.crdownload")):
        assert time.monotonic() < deadline, (
            f"{name} was not downloaded: {sorted(p.name for p in folder.iterdir())}"
        )
        time.sleep(0.1)
    return path.read_bytes()


def test_photos_picked_with_the_button_are_sent_restored_and_download(
    page: Any, dash: Dashboard, tmp_path: Path, saved: Path
) -> None:
    picked = [photo_file(tmp_path, "picked_1.jpg", 300_000), photo_file(tmp_path, "picked_2.jpg")]
    fresh_panel(page, dash)
    page.find_element("css selector", "[data-upload-files]").send_keys("\n".join(map(str, picked)))
    wait_until(page, lambda d: states(d) == ["done", "done"], 60)
    assert page.execute_script("return document.querySelector('[data-upload-bar]').value") == 100
    bars = "return Array.from(document.querySelectorAll('.upload-file progress')).map(p => p.value)"
    assert page.execute_script(bars) == [100, 100]
    status = text_of(page, "[data-upload-status]")
    assert "2 of 2 files sent" in status and "100 %" in status
    wait_until(page, lambda d: "Restored 2 of 2 sent" in text_of(d, "[data-upload-restored]"), 30)
    assert (dash.svc.outbox / "picked_1.jpg").read_bytes() == picked[0].read_bytes()
    # Each file's result downloads from the panel; the batch is a view of Results.
    click(page, ".upload-file .upload-what a[download]")
    assert downloaded(saved, "picked_1.jpg") == picked[0].read_bytes()
    click(page, "[data-upload-results]")
    wait_until(page, lambda d: "/results?batch=upload-" in d.current_url)
    wait_until(page, lambda d: len(d.find_elements("css selector", ".grid .tile")) == 2)
    assert "Sent together" in text_of(page, ".batch-filter")


def test_a_folder_picked_keeps_its_subfolders(page: Any, dash: Dashboard, tmp_path: Path) -> None:
    shoot = tmp_path / "shoot"
    photo_file(shoot, "day 1/a.jpg")
    photo_file(shoot, "day 2/b.jpg")
    photo_file(shoot, "day 2/.DS_Store")  # a hidden file: left out, and said
    fresh_panel(page, dash, "activity")
    page.find_element("css selector", "[data-upload-folder]").send_keys(str(shoot))
    wait_until(page, lambda d: states(d) == ["done", "done"], 60)
    assert sorted(n.split(" · ")[0] for n, _, _ in rows(page)) == ["shoot/day 1/a.jpg", "shoot/day 2/b.jpg"]
    assert "1 hidden file left out" in text_of(page, "[data-upload-status]")
    assert {"shoot/day 1/a.jpg", "shoot/day 2/b.jpg"} <= set(files(dash.svc.outbox))


def test_files_dropped_on_a_page_are_sent(page: Any, dash: Dashboard) -> None:
    fresh_panel(page, dash, "failed")
    page.execute_script("document.querySelector('[data-upload-hide]').click()")
    # A drop as the page sees one: dragenter shows the veil, drop sends.
    page.execute_script(
        "const dt = new DataTransfer();"
        "dt.items.add(new File([new Uint8Array([255, 216, 1, 2, 3])], 'dropped.jpg', {type: 'image/jpeg'}));"
        "const at = document.querySelector('main');"
        "at.dispatchEvent(new DragEvent('dragenter', {dataTransfer: dt, bubbles: true, cancelable: true}));"
        "window.veilShown = !document.querySelector('[data-drop-here]').hidden;"
        "at.dispatchEvent(new DragEvent('drop', {dataTransfer: dt, bubbles: true, cancelable: true}));"
    )
    assert page.execute_script("return window.veilShown")
    wait_until(page, lambda d: states(d) == ["done"], 60)
    assert page.execute_script("return document.querySelector('[data-drop-here]').hidden")
    assert not page.execute_script("return document.querySelector('[data-upload]').hidden")  # shown again
    assert (dash.svc.outbox / "dropped.jpg").read_bytes() == b"\xff\xd8\x01\x02\x03"


def test_a_folder_dragged_in_keeps_its_subfolders(page: Any, dash: Dashboard, tmp_path: Path) -> None:
    album = tmp_path / "album"
    photo_file(album, "1962/wedding.jpg")
    photo_file(album, "1962/party/cake.jpg")
    fresh_panel(page, dash, "results")
    # A real drag from the desktop, through DevTools: the folder itself, walked by the page.
    drag = {"items": [], "files": [str(album)], "dragOperationsMask": 1}
    for kind in ("dragEnter", "dragOver", "drop"):
        page.execute_cdp_cmd("Input.dispatchDragEvent", {"type": kind, "x": 300, "y": 500, "data": drag})
    wait_until(page, lambda d: states(d) == ["done", "done"], 60)
    assert {"album/1962/wedding.jpg", "album/1962/party/cake.jpg"} <= set(files(dash.svc.outbox))


def test_an_upload_stopped_half_way_leaves_nothing_and_goes_again(
    page: Any, dash: Dashboard, tmp_path: Path
) -> None:
    big = photo_file(tmp_path, "big.jpg", 3_000_000)
    before = files(dash.svc.inbox.parent)
    fresh_panel(page, dash)
    page.execute_cdp_cmd("Network.enable", {})
    page.execute_cdp_cmd(
        "Network.emulateNetworkConditions",
        {"offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": 200_000},
    )
    try:
        page.find_element("css selector", "[data-upload-files]").send_keys(str(big))
        wait_until(
            page,
            lambda d: 5 < d.execute_script("return document.querySelector('[data-upload-bar]').value") < 90,
        )
        wait_until(page, lambda d: uploads_left(dash))  # its temp file is in the inbox
        click(page, "[data-upload-stop]")
        wait_until(page, lambda d: states(d) == ["stopped"])
        assert "nothing of it was kept" in rows(page)[0][2]
        deadline = time.monotonic() + 10
        while uploads_left(dash) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert uploads_left(dash) == [] and files(dash.svc.inbox.parent) == before
    finally:
        page.execute_cdp_cmd(
            "Network.emulateNetworkConditions",
            {"offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1},
        )
    click(page, "[data-upload-again]")
    wait_until(page, lambda d: states(d) == ["done"], 60)
    assert (dash.svc.outbox / "big.jpg").read_bytes() == big.read_bytes()


def test_a_zip_of_ticked_tiles_holds_exactly_their_results(page: Any, dash: Dashboard, saved: Path) -> None:
    page.get(dash.url + "results?q=picked&sort=name")
    wait_until(page, lambda d: len(d.find_elements("css selector", "[data-select]")) == 2)
    click(page, "[data-select]", 1)  # picked_2 alone
    click(page, "[data-bulk-zip]")
    with zipfile.ZipFile(io.BytesIO(downloaded(saved, "results.zip"))) as z:
        assert z.namelist() == ["picked_2.jpg"]
        assert z.read("picked_2.jpg") == (dash.svc.outbox / "picked_2.jpg").read_bytes()


@pytest.mark.parametrize(("width", "height"), [(1440, 900), (390, 844)])
def test_the_panel_at_a_laptops_and_a_phones_size(
    dash: Dashboard, tmp_path: Path, width: int, height: int
) -> None:
    names = ["scan_of_the_wedding_1962_front.jpg", "party/cake.jpg", "notes.txt"]
    for name in names:
        photo_file(tmp_path / "pick", name)
    with chromium(max(width, 500), height) as driver:
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 500},
        )
        driver.get(f"{dash.url}results?token={dash.token}")
        fresh_panel(driver, dash, "results")
        driver.find_element("css selector", "[data-upload-folder]").send_keys(str(tmp_path / "pick"))
        wait_until(driver, lambda d: sorted(states(d)) == ["done", "done", "refused"], 60)
        assert "not a photo" in next(w for _, s, w in rows(driver) if s == "refused")
        driver.save_screenshot(str(tmp_path / f"upload-{width}x{height}.png"))
        box = driver.execute_script(
            "const r = document.querySelector('[data-upload]').getBoundingClientRect();"
            "return [r.left, r.right, r.top, r.bottom, document.documentElement.scrollWidth];"
        )
        assert box[0] >= 0 and box[1] <= width and box[2] >= 0 and box[3] <= height, box
        assert box[4] <= width  # nothing pushes the page sideways
