"""In headless Chromium against a real service (the stand-in restorer): a restorer redoes a photo
with another model from its page ("Redo with another model": the fidelity field only for
CodeFormer), the page follows to the new run, which offers the comparison; the two results are
side by side, and "Keep this one" leaves that result alone at the photo's name."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import chromium, wait_until
from conftest import isolated_env
from dashboard_client import Dashboard, served_dashboard
from service_harness import write_atomic

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture
def dash(tmp_path: Path, grace_hopper_path: Path) -> Iterator[Dashboard]:
    with served_dashboard(tmp_path, "--set", "output.unkept_result=keep") as d, isolated_env(d.home):
        write_atomic(d.svc.inbox / "portrait.jpg", grace_hopper_path.read_bytes())
        d.svc.wait(lambda s: s["queue"]["done"] >= 1, 60, "the photo restored")
        yield d


def test_a_photo_redone_with_another_model_is_compared_and_one_result_kept(dash: Dashboard) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    d = dash
    first = next(p["id"] for p in d.get("/api/results").json()["photos"] if p["name"] == "portrait.jpg")
    with chromium(1280, 1000) as page:
        page.get(f"{d.url}photo/{first}?token={d.token}")
        form = wait_until(page, lambda p: p.find_element(By.ID, "redo-model"))
        model = Select(form.find_element(By.NAME, "model"))
        fidelity = form.find_element(By.CSS_SELECTOR, "[data-fidelity]")
        model.select_by_visible_text("CodeFormer")
        assert fidelity.is_displayed()
        model.select_by_visible_text("GFPGAN-v1.4")
        assert not fidelity.is_displayed()  # GFPGAN takes no fidelity weight
        form.find_element(By.NAME, "strength").send_keys("0.8")
        form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        # The page moves to the new run once it is done, and offers the comparison there.
        link = wait_until(page, lambda p: p.find_element(By.ID, "compare-results"), timeout=60)
        second = int(page.current_url.split("/photo/")[1].split("?")[0])
        assert second != first
        assert "two results to compare" in page.find_element(By.CSS_SELECTOR, ".two-results").text
        link.click()
        left = wait_until(page, lambda p: p.find_element(By.ID, f"side-{first}"))
        right = page.find_element(By.ID, f"side-{second}")
        assert "GFPGAN-v1.4, strength 0.8" in right.text and "portrait (GFPGAN-v1.4).jpg" in right.text
        assert "portrait.jpg" in left.text
        assert (
            page.find_element(By.CSS_SELECTOR, "[data-compare] img.after")
            .get_attribute("src")
            .endswith(f"/photo/{second}/after.jpg")
        )
        assert (
            "stays in the outbox under its own name" in page.find_element(By.CSS_SELECTOR, ".keep-note").text
        )
        page.save_screenshot(str(d.svc.root / "compare.png"))
        kept_ino = os.stat(d.svc.outbox / "portrait (GFPGAN-v1.4).jpg").st_ino
        first_ino = os.stat(d.svc.outbox / "portrait.jpg").st_ino
        page.find_element(By.ID, f"keep-{second}").click()
        wait_until(page, lambda p: p.current_url.endswith(f"/photo/{second}"))
        assert not page.find_elements(By.ID, "compare-results")  # one result now
    # The kept result at the photo's name; the other stays as the user's, under a name of its own.
    assert os.stat(d.svc.outbox / "portrait.jpg").st_ino == kept_ino
    names = sorted(p.name for p in d.svc.outbox.iterdir())
    assert names == ["portrait (GPEN-BFR-512).jpg", "portrait.jpg"]
    assert os.stat(d.svc.outbox / "portrait (GPEN-BFR-512).jpg").st_ino == first_ino
    listed = [p["id"] for p in d.get("/api/results").json()["photos"] if p["name"] == "portrait.jpg"]
    assert listed == [second]
