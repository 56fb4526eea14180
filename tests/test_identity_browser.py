"""Reviewing a batch by the identity check in headless Chromium, against a real running service
with the real engine on real faces: four people of the Solvay photo (1927) cut into two photos
each (as they are, and mirrored at another size), found by the real RetinaFace weights, described
by dlib's real face-recognition files (../shared), restored by the tests' random-weight GPEN, whose
output is noise: so every restored face must be flagged "may not look like the same person"; and
the astronaut, sharp, left as it was (restore.skip_sharp).

In the browser: Results filters to the flagged faces and orders them by the largest identity
change, as the journal measured them; People has one tile a person, each opening Results with
exactly that person's two photos; a photo's page shows each face's distance and its badge."""

from __future__ import annotations

import io
import shutil
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import cv2
import numpy as np
import pytest
from browser import chromium, wait_until
from conftest import TinyModels, make_tiny_models
from dashboard_client import Dashboard, served_dashboard
from dlib_models import PREDICTOR, REAL_DETECTOR, RECOGNITION, needs_dlib_models, real_detector, solvay_bgr
from PIL import Image
from service_harness import real_engine_args, write_atomic
from test_dashboard_browser import text_of

pytestmark = [needs_dlib_models, pytest.mark.slow, pytest.mark.timeout(600)]

# Four of the Solvay photo's people, by their place in the detector's order (well apart).
PEOPLE = (0, 9, 18, 27)


def person_photos(photo: np.ndarray, box: np.ndarray, person: int) -> dict[str, bytes]:
    """One person cut out (twice the face's box): enlarged three times, and mirrored and
    enlarged twice and a half, as PNG files named by the person."""
    h, w = photo.shape[:2]
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    half = max(box[2] - box[0], box[3] - box[1])
    x0, y0 = int(max(0, cx - half)), int(max(0, cy - half))
    x1, y1 = int(min(w, cx + half)), int(min(h, cy + half))
    crop = np.ascontiguousarray(photo[y0:y1, x0:x1])
    shots = {
        f"person{person:02d}_a.png": cv2.resize(crop, None, fx=3, fy=3, interpolation=cv2.INTER_CUBIC),
        f"person{person:02d}_b.png": cv2.resize(
            np.ascontiguousarray(crop[:, ::-1]), None, fx=2.5, fy=2.5, interpolation=cv2.INTER_CUBIC
        ),
    }
    return {name: cv2.imencode(".png", image)[1].tobytes() for name, image in shots.items()}


def astronaut_png() -> bytes:
    from skimage import data

    out = io.BytesIO()
    Image.fromarray(data.astronaut()).save(out, "PNG")
    return out.getvalue()


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> TinyModels:
    from gpen_watch.catalog import registry

    found = make_tiny_models(tmp_path_factory.mktemp("identity-models"))
    shutil.copyfile(REAL_DETECTOR, found.model_dir / registry.detector_spec("retinaface_mobile0.25").filename)
    for path in (RECOGNITION, PREDICTOR):
        shutil.copyfile(path, found.model_dir / path.name)
    return found


@pytest.fixture(scope="module")
def dash(tmp_path_factory: pytest.TempPathFactory, models: TinyModels) -> Iterator[Dashboard]:
    photo = solvay_bgr()
    faces = real_detector().detect([photo])[0]
    photos: dict[str, bytes] = {}
    for person in PEOPLE:
        photos.update(person_photos(photo, faces[person].box, person))
    photos["astronaut.png"] = astronaut_png()
    root = tmp_path_factory.mktemp("identity-browser")
    args = [*real_engine_args(models), "--set", "restore.skip_sharp=true"]
    with served_dashboard(root, *args, restorer=None) as d:
        d.control("pause")  # dropped together: one batch
        for name, data in photos.items():
            write_atomic(d.svc.inbox / name, data)
        d.wait(lambda s: s["queue"]["queued"] == len(photos), 60, "the photos recorded")
        d.control("resume")
        d.wait(lambda s: s["queue"]["done"] >= len(photos), 400, "the photos restored")
        yield d


@pytest.fixture(scope="module")
def page(dash: Dashboard) -> Iterator[Any]:
    with chromium(1440, 900) as driver:
        driver.get(f"{dash.url}?token={dash.token}")
        yield driver


def api_photos(d: Dashboard, query: str) -> list[dict[str, Any]]:
    return list(d.get("/api/results?limit=200&" + query.lstrip("?")).json()["photos"])


def tiles(driver: Any) -> list[str]:
    from selenium.webdriver.common.by import By

    return [str(e.text).replace("\n", "") for e in driver.find_elements(By.CSS_SELECTOR, ".grid .tile .name")]


def choose(driver: Any, name: str, value: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element(By.CSS_SELECTOR, f"form[data-filters] select[name={name}]")).select_by_value(
        value
    )


def test_every_face_the_random_generator_restored_is_flagged_and_the_sharp_one_left(dash: Dashboard) -> None:
    every = {p["name"]: p for p in api_photos(dash, "")}
    people = [n for n in every if n.startswith("person")]
    assert len(people) == 2 * len(PEOPLE)
    for name in people:
        assert every[name]["faces"] >= 1, f"{name}: the real detector found no face"
        assert every[name]["flagged"] == every[name]["faces"], every[name]  # noise is no one
        assert every[name]["identity"] > 0.32
    astronaut = every["astronaut.png"]
    assert (astronaut["faces"], astronaut["flagged"], astronaut["identity"]) == (0, 0, None)
    face = dash.get(f"/api/photo/{astronaut['id']}").json()["faces"][0]
    assert face["reason"].startswith("left as it was: already sharp (detail 0.3")
    assert face["person"] is not None  # described for grouping, though not restored


def test_results_filters_and_orders_by_the_identity_change(page: Any, dash: Dashboard) -> None:
    page.get(dash.url + "results")
    wait_until(page, lambda d: len(tiles(d)) == 2 * len(PEOPLE) + 1)
    choose(page, "identity", "flagged")
    wait_until(page, lambda d: len(tiles(d)) == 2 * len(PEOPLE))
    assert "astronaut.png" not in tiles(page)
    assert page.current_url.endswith("/results?identity=flagged")
    choose(page, "sort", "identity")
    wait_until(page, lambda d: "sort=identity" in d.current_url)
    measured = api_photos(dash, "?identity=flagged&sort=identity")
    distances = [p["identity"] for p in measured]
    assert distances == sorted(distances, reverse=True) and len(set(distances)) > 1
    wait_until(page, lambda d: tiles(d) == [p["name"] for p in measured])
    assert f"change {distances[0]:.2f}" in text_of(page, ".grid .tile .meta")
    # Without the filter the sharp photo, with nothing measured, comes last.
    choose(page, "identity", "")
    wait_until(page, lambda d: len(tiles(d)) == 2 * len(PEOPLE) + 1)
    assert tiles(page)[-1] == "astronaut.png"


def test_people_has_a_tile_a_person_that_opens_their_photos(page: Any, dash: Dashboard) -> None:
    from selenium.webdriver.common.by import By

    page.get(dash.url + "people")
    wait_until(page, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".grid.people .tile")) > 0)
    keys = [e.get_attribute("data-person") for e in page.find_elements(By.CSS_SELECTOR, ".grid.people .tile")]
    # The four, the astronaut, and any neighbour a cut-out caught the edge of.
    assert len(keys) >= len(PEOPLE) + 1
    groups = []
    for key in keys:
        page.get(dash.url + "people")
        tile = wait_until(page, lambda d, k=key: d.find_element(By.CSS_SELECTOR, f'[data-person="{k}"] a'))
        tile.click()
        wait_until(page, lambda d, k=key: f"person={k}" in d.current_url and len(tiles(d)) > 0)
        assert "Photos of this person" in text_of(page, ".person-filter")
        groups.append(sorted(tiles(page)))
    # Each of the four has a tile of exactly their two photos, the astronaut one of their own, and
    # no tile holds two people's photos.
    for p in PEOPLE:
        assert [f"person{p:02d}_a.png", f"person{p:02d}_b.png"] in groups, groups
    assert ["astronaut.png"] in groups
    assert all(len({name.split("_")[0] for name in g}) == 1 for g in groups), groups
    # A person's view takes the other filters too: one person's photos, largest change first.
    bride = keys[groups.index([f"person{PEOPLE[0]:02d}_a.png", f"person{PEOPLE[0]:02d}_b.png"])]
    page.get(f"{dash.url}results?person={bride}")
    wait_until(page, lambda d: len(tiles(d)) == 2)
    choose(page, "sort", "identity")
    wait_until(page, lambda d: "sort=identity" in d.current_url)
    order = [p["name"] for p in api_photos(dash, f"?person={bride}&sort=identity")]
    wait_until(page, lambda d: tiles(d) == order)
    page.find_element(By.LINK_TEXT, "every photo").click()
    wait_until(page, lambda d: len(tiles(d)) == 2 * len(PEOPLE) + 1)


def test_a_photos_page_shows_each_faces_distance_and_badge(page: Any, dash: Dashboard) -> None:
    photo = api_photos(dash, "?q=person00_a")[0]
    faces = dash.get(f"/api/photo/{photo['id']}").json()["faces"]
    page.get(f"{dash.url}photo/{photo['id']}")
    wait_until(page, lambda d: "identity distance" in text_of(d, ".faces"))
    shown = text_of(page, ".faces")
    for face in faces:
        if face["distance"] is not None:
            assert f"identity distance {face['distance']:.2f}" in shown
    assert "may not look like the same person" in shown
    assert "Photos of this person" in shown


def test_restore_it_anyway_restores_the_sharp_face(page: Any, dash: Dashboard) -> None:
    """Last: it redoes the astronaut. The face left as it was is restored by the redo the button
    asks (picked by number), and the page moves to that run, where it has its distance."""
    from selenium.webdriver.common.by import By

    photo = api_photos(dash, "?q=astronaut")[0]
    page.get(f"{dash.url}photo/{photo['id']}")
    wait_until(page, lambda d: "left as it was: already sharp" in text_of(d, ".faces"))
    page.find_element(By.CSS_SELECTOR, "form.force button").click()
    here = f"/photo/{photo['id']}"
    # The page says the run is queued, unless the run is done, and the page moved on to it, first.
    wait_until(
        page, lambda d: urlsplit(d.current_url).path != here or "Queued as run" in text_of(d, "#face-0"), 30
    )
    wait_until(page, lambda d: urlsplit(d.current_url).path != here, 300)
    redo = api_photos(dash, "?q=astronaut")[0]
    assert redo["redo_of"] == photo["id"] and redo["faces"] == 1
    face = dash.get(f"/api/photo/{redo['id']}").json()["faces"][0]
    assert face["restored"] and face["distance"] is not None
    wait_until(page, lambda d: "identity distance" in text_of(d, ".faces"))
