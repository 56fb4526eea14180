"""Redo: a done photo restored again from its original with other settings, through a real running
service with the real engine (tiny random-weight generator, the real RetinaFace-MobileNet
detector from ../shared so that a real group photo has real faces)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import pytest
from conftest import TinyModels, isolated_env, make_tiny_models, module_command
from dashboard_client import Dashboard, served_dashboard, wait_for
from PIL import Image
from service_harness import queue_empty, real_engine_args, write_atomic

from gpen_watch.journal import Journal
from gpen_watch.journal.states import JobState
from gpen_watch.platform import paths

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
SOLVAY = SHARED / "data" / "Solvay_conference_1927.png"
REAL_DETECTOR = SHARED / "fixtures" / "retinaface_mobilenet0.25_real.pth"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def needs_shared() -> None:
    if not (SOLVAY.is_file() and REAL_DETECTOR.is_file()):
        if os.environ.get("CI"):
            pytest.fail("CI must run the redo tests: ../shared is not beside the repository")
        pytest.skip(
            "../shared (the Solvay photo and the real RetinaFace weights) is not beside the repository"
        )


@pytest.fixture(scope="module")
def real_models(tmp_path_factory: pytest.TempPathFactory) -> TinyModels:
    needs_shared()
    from gpen_watch.catalog import registry

    models = make_tiny_models(tmp_path_factory.mktemp("redo-models"))
    shutil.copyfile(
        REAL_DETECTOR, models.model_dir / registry.detector_spec("retinaface_mobile0.25").filename
    )
    return models


@pytest.fixture(scope="module")
def dash(tmp_path_factory: pytest.TempPathFactory, real_models: TinyModels) -> Iterator[Dashboard]:
    root = tmp_path_factory.mktemp("redo")
    with served_dashboard(root, *real_engine_args(real_models), restorer=None) as d:
        write_atomic(d.svc.inbox / "solvay.png", SOLVAY.read_bytes())
        d.wait(lambda s: s["queue"]["done"] >= 1, 300, "Solvay restored")
        yield d


def pixels(path: Path) -> np.ndarray:
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def first_photo(d: Dashboard) -> dict[str, Any]:
    return next(p for p in d.get("/api/results?limit=200").json()["photos"] if p["name"] == "solvay.png")


def redo(d: Dashboard, photo_id: int, **body: Any) -> dict[str, Any]:
    r = d.post(f"/api/redo/{photo_id}", {"Content-Type": "application/json"}, json.dumps(body).encode())
    assert r.status == 200, r.text
    reply: dict[str, Any] = r.json()
    return reply


def wait_run(d: Dashboard, job_id: int, timeout: float = 300) -> dict[str, Any]:
    d.wait(queue_empty, timeout, f"run {job_id}")
    api: dict[str, Any] = d.get(f"/api/photo/{job_id}").json()
    return api


def outbox_files(d: Dashboard, stem: str = "solvay") -> list[str]:
    """The outbox's files of one photo (other tests of the module drop their own)."""
    return sorted(p.name for p in d.svc.outbox.rglob("*") if p.is_file() and stem in p.name)


def test_photo_page_shows_every_face_before_and_after_and_the_previews_at_one_geometry(
    dash: Dashboard,
) -> None:
    import io

    photo = first_photo(dash)
    api = dash.get(f"/api/photo/{photo['id']}").json()
    assert len(api["faces"]) == 29 and sum(f["restored"] for f in api["faces"]) == photo["faces"] > 0
    sizes = []
    for picture in ("before", "after"):
        r = dash.get(f"/photo/{photo['id']}/{picture}.jpg")
        assert r.status == 200 and r.headers["Content-Type"] == "image/jpeg"
        sizes.append(Image.open(io.BytesIO(r.body)).size)
    assert sizes[0] == sizes[1]
    thumb = Image.open(io.BytesIO(dash.get(f"/photo/{photo['id']}/thumb.jpg").body))
    assert max(thumb.size) <= 320
    page = dash.get(f"/photo/{photo['id']}").text
    for f in api["faces"]:
        before = dash.get(f"/photo/{photo['id']}/faces/{f['index']}/before.jpg")
        assert before.status == 200 and before.headers["Content-Type"] == "image/jpeg", f
        assert f"/photo/{photo['id']}/faces/{f['index']}/before.jpg" in page
        after = dash.get(f"/photo/{photo['id']}/faces/{f['index']}/after.jpg")
        assert after.status == (200 if f["restored"] else 404), f
        if not f["restored"]:
            assert f["reason"] and f["reason"] in page.replace("&#39;", "'")


def test_redo_at_strength_0_of_a_png_gives_the_originals_pixels_at_the_same_name(dash: Dashboard) -> None:
    first = first_photo(dash)
    restored = pixels(dash.svc.outbox / "solvay.png")
    assert not np.array_equal(restored, pixels(SOLVAY))  # the first run did change faces
    reply = redo(dash, first["id"], settings={"restore.strength": 0})
    run = wait_run(dash, reply["id"])
    assert run["photo"]["state"] == "done", run
    assert np.array_equal(pixels(dash.svc.outbox / "solvay.png"), pixels(SOLVAY))
    assert outbox_files(dash) == ["solvay.png"]  # no second file, no temp left
    assert (dash.svc.originals / "solvay.png").read_bytes() == SOLVAY.read_bytes()  # the original stays


@pytest.fixture(scope="module")
def other_gpen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A second random-weight generator: the tiny one's layout, another seed."""
    import torch
    from conftest import TINY_GPEN

    from gpen_watch.restore.nets.gpen_model import GPENConfig, build_gpen

    torch.manual_seed(7)
    path = tmp_path_factory.mktemp("other-gpen") / "tiny-gpen-64-other.pth"
    torch.save(build_gpen(GPENConfig(**TINY_GPEN)).state_dict(), path)
    return path


def test_redo_with_another_model_and_picked_faces_changes_only_those_faces(
    dash: Dashboard, other_gpen: Path
) -> None:
    photo = first_photo(dash)
    reply = redo(
        dash,
        photo["id"],
        settings={"restore.strength": 1.0, "restore.model": str(other_gpen)},
        face_ids=[0, 2],
    )
    run = wait_run(dash, reply["id"])
    assert run["photo"]["state"] == "done", run
    faces = {f["index"]: f for f in run["faces"]}
    assert {i for i, f in faces.items() if f["restored"]} == {0, 2}
    assert all(
        "not picked" in (f["reason"] or "") for i, f in faces.items() if i not in (0, 2) and not f["restored"]
    )
    boxes = json.loads(
        (dash.home / "state" / "gpen-watch" / "views" / str(reply["id"]) / "faces.json").read_text()
    )
    scale = boxes["source_width"] / boxes["width"]
    result, original = pixels(dash.svc.outbox / "solvay.png"), pixels(SOLVAY)
    changed = np.any(result != original, axis=2)
    picked = np.zeros_like(changed)
    for f in boxes["faces"]:
        if f["index"] in (0, 2):
            x0, y0, x1, y1 = (v * scale for v in f["box"])
            w, h = x1 - x0, y1 - y0  # the paste-back's feathered region reaches past the box
            picked[max(0, int(y0 - h)) : int(y1 + h) + 1, max(0, int(x0 - w)) : int(x1 + w) + 1] = True
    assert changed[picked].any()
    assert not changed[~picked].any(), "pixels changed outside the picked faces"
    page = dash.get(f"/photo/{reply['id']}").text
    assert "tiny-gpen-64-other" in page  # the model it restored with, in its notes


def test_redo_keeps_the_exif_and_colour_profile_as_a_first_result_does(
    dash: Dashboard, tmp_path: Path
) -> None:
    import matplotlib.cbook
    from PIL import ImageCms

    hopper = Path(matplotlib.cbook.get_sample_data("grace_hopper.jpg", asfileobj=False))
    icc = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    with Image.open(hopper) as im:
        exif = im.getexif()
        exif[0x013B] = "gpen-watch test, redo keeps me"  # Artist
        im.save(tmp_path / "portrait.jpg", quality=92, exif=exif.tobytes(), icc_profile=icc)
    done = dash.status()["queue"]["done"]
    write_atomic(dash.svc.inbox / "exif portrait.jpg", (tmp_path / "portrait.jpg").read_bytes())
    dash.wait(lambda s: s["queue"]["done"] > done, 120, "the portrait restored")
    photo = next(p for p in dash.get("/api/results").json()["photos"] if p["name"] == "exif portrait.jpg")

    def metadata() -> tuple[object, object]:
        with Image.open(dash.svc.outbox / "exif portrait.jpg") as im:
            return im.getexif().get(0x013B), im.info.get("icc_profile")

    assert metadata() == ("gpen-watch test, redo keeps me", icc)
    wait_run(dash, redo(dash, photo["id"], settings={"restore.strength": 0.4})["id"])
    assert metadata() == ("gpen-watch test, redo keeps me", icc)


def test_two_redos_of_the_same_photo_at_once_end_with_one_result(dash: Dashboard) -> None:
    photo = first_photo(dash)
    a = redo(dash, photo["id"], settings={"restore.strength": 0.5})
    b = redo(dash, photo["id"], settings={"restore.strength": 0})
    wait_run(dash, a["id"])
    assert dash.get(f"/api/photo/{a['id']}").json()["photo"]["state"] == "done"
    assert dash.get(f"/api/photo/{b['id']}").json()["photo"]["state"] == "done"
    assert outbox_files(dash) == ["solvay.png"]
    assert np.array_equal(pixels(dash.svc.outbox / "solvay.png"), pixels(SOLVAY))  # the later one's


def test_redo_from_the_cli_by_name_and_its_history_on_the_photo_page(dash: Dashboard) -> None:
    out = dash.cli("redo", "solvay.png", "--strength", "0")
    assert out.returncode == 0, out.stderr
    assert "queued again as run" in out.stdout and "ahead of new arrivals" in out.stdout
    new_id = int(out.stdout.split("as run ")[1].split(",")[0])
    wait_run(dash, new_id)
    page = dash.get(f"/photo/{new_id}").text
    assert "Runs" in page and "first run, the inbox&#39;s settings" in page and "restore.strength=0" in page


def test_redo_with_a_bad_value_gives_the_settings_sentence(dash: Dashboard) -> None:
    photo = first_photo(dash)
    r = dash.post(
        f"/api/redo/{photo['id']}",
        {"Content-Type": "application/json"},
        b'{"settings": {"restore.strength": 7}}',
    )
    assert r.status == 409
    assert "restore.strength" in r.json()["error"]
    r = dash.post(
        f"/api/redo/{photo['id']}",
        {"Content-Type": "application/json"},
        b'{"settings": {"watch.inboxes": 1}}',
    )
    assert r.status == 409 and "a redo changes only" in r.json()["error"]


def test_a_redo_that_needs_a_model_file_not_here_is_refused_naming_it(dash: Dashboard) -> None:
    from gpen_watch.catalog import registry

    upscaler = registry.upscaler_spec(2)
    out = dash.cli("redo", "solvay.png", "--upscale", "2")
    assert out.returncode == 1
    said = out.stderr
    assert said.startswith("gpen-watch redo: solvay.png: this redo's settings (restore.upscale=2) need ")
    assert f"{upscaler.filename} ({upscaler.name}, {upscaler.size_text}), which is in none of " in said
    # GPEN's upscaler is under GPEN's terms, not accepted here: the step is their yes, not a fetch.
    assert (
        f"`{module_command('models accept ' + upscaler.name)}` accepts the terms it is downloaded under"
        in said
        and module_command("models paid-work") in said
        and "nothing was queued" in said
    )
    assert "inbox settings" not in said
    assert dash.status()["queue"]["queued"] == 0


def test_redo_of_faces_the_photo_does_not_have_is_refused_naming_its_faces(tmp_path: Path) -> None:
    with served_dashboard(tmp_path) as d:
        write_atomic(d.svc.inbox / "IMG_1.jpg", b"\xff\xd8 the stand-in finds one face in any bytes")
        d.wait(lambda s: s["queue"]["done"] >= 1, 30, "restored")
        result = (d.svc.outbox / "IMG_1.jpg").read_bytes()
        refusal = "IMG_1.jpg has one face, face 0; there is no face 5; nothing was queued"
        out = d.cli("redo", "IMG_1.jpg", "--face-ids", "5")
        assert (out.returncode, out.stderr) == (1, f"gpen-watch redo: {refusal}\n")
        # The dashboard's redo is the same command.
        photo = next(p for p in d.get("/api/results").json()["photos"] if p["name"] == "IMG_1.jpg")
        r = d.post(
            f"/api/redo/{photo['id']}",
            {"Content-Type": "application/json"},
            b'{"settings": {}, "face_ids": [0, 5]}',
        )
        assert r.status == 409 and r.json()["error"] == refusal
        with isolated_env(d.home), Journal.open(paths.state_dir() / "journal.sqlite3") as journal:
            assert sum(journal.counts().values()) == 1  # no redo was queued
        assert (d.svc.outbox / "IMG_1.jpg").read_bytes() == result
        # A face it has is taken, as a run of its own.
        out = d.cli("redo", "IMG_1.jpg", "--face-ids", "0")
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("IMG_1.jpg: queued again as run ") and "note:" not in out.stdout


def test_redo_face_ids_without_the_photos_views_are_queued_with_a_note_saying_so(tmp_path: Path) -> None:
    with served_dashboard(tmp_path, "--set", "dashboard.views_mb=0") as d:
        write_atomic(d.svc.inbox / "IMG_2.jpg", b"\xff\xd8 no views are kept of this one")
        d.wait(lambda s: s["queue"]["done"] >= 1, 30, "restored")
        out = d.cli("redo", "IMG_2.jpg", "--face-ids", "5")
        assert out.returncode == 0, out.stderr
        assert "note: IMG_2.jpg: which faces it has is not known here" in out.stdout
        assert "the redo fails and its result stays as it was" in out.stdout


def test_a_redo_goes_ahead_of_new_arrivals(tmp_path: Path) -> None:
    with isolated_env(tmp_path / "home"), Journal.open(tmp_path / "j.sqlite3") as journal:
        first = journal.add(tmp_path / "a.jpg", tmp_path, "a.jpg", 10, 1.0, "a" * 64).job
        journal.claim_batch(1, "w")
        journal.finish(first.id, tmp_path / "out" / "a.jpg", 1, {}, [])
        later = journal.add(tmp_path / "b.jpg", tmp_path, "b.jpg", 11, 1.0, "b" * 64).job
        again = journal.add_redo(journal.require(first.id), tmp_path / "a.jpg", {"restore.strength": 0})
        claim = journal.claim_batch(1, "w")
        assert [j.id for j in claim.jobs] == [again.id]
        assert claim.copies == []  # restored again, not a copy of the result it replaces
        assert journal.require(later.id).state == JobState.QUEUED


@pytest.mark.parametrize("policy", ["delete"])
def test_redo_with_the_original_deleted_says_nothing_can_be_redone(tmp_path: Path, policy: str) -> None:
    with served_dashboard(tmp_path, "--set", f"output.originals={policy}") as d:
        write_atomic(d.svc.inbox / "gone.jpg", b"\xff\xd8 the stand-in restores any bytes")
        d.wait(lambda s: s["queue"]["done"] >= 1, 30, "restored")
        photo = next(p for p in d.get("/api/results").json()["photos"] if p["name"] == "gone.jpg")
        r = d.post(f"/api/redo/{photo['id']}", {"Content-Type": "application/json"}, b'{"settings": {}}')
        assert r.status == 409
        assert (
            "its original was deleted after it was restored (output.originals = delete)" in r.json()["error"]
        )
        assert "nothing can be redone" in r.json()["error"]


def test_a_redo_killed_mid_way_leaves_the_old_result_and_finishes_after_a_restart(tmp_path: Path) -> None:
    started = tmp_path / "started"
    started.mkdir()
    env = {"FAKE_SLOW": "0", "FAKE_SLOW_STARTED": str(started)}
    with served_dashboard(tmp_path, env=env) as d:
        data = b"\xff\xd8 a slow photo: the stand-in takes FAKE_SLOW seconds over it"
        write_atomic(d.svc.inbox / "portrait slow.jpg", data)
        d.wait(lambda s: s["queue"]["done"] >= 1, 60, "the first run")
        photo = next(p for p in d.get("/api/results").json()["photos"] if p["name"] == "portrait slow.jpg")
        (started / "portrait slow.jpg").unlink()
        with isolated_env(d.home):
            d.svc.stop()
        d.svc.env["FAKE_SLOW"] = "60"  # the redo: slow enough to be killed on
        d.restart()
        again = redo(d, photo["id"], settings={"restore.strength": 0.3})
        wait_for(lambda: (started / "portrait slow.jpg").exists(), 60, "the redo on its photo")
        d.svc.kill()  # SIGKILL: no chance to tidy up
        assert [p.name for p in d.svc.outbox.iterdir()] == ["portrait slow.jpg"]
        assert (d.svc.outbox / "portrait slow.jpg").read_bytes() == data  # the old result, whole
        d.svc.env["FAKE_SLOW"] = "0"
        d.restart()
        run = wait_run(d, again["id"], 60)
        assert run["photo"]["state"] == "done"
        assert sorted(p.name for p in d.svc.outbox.iterdir()) == ["portrait slow.jpg"]  # no temp, no copy
        assert (d.svc.outbox / "portrait slow.jpg").read_bytes() == data


def test_photo_page_slider_and_a_redo_at_strength_0_in_chromium(dash: Dashboard) -> None:
    from browser import chromium, wait_until
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    photo = first_photo(dash)
    with chromium() as page:
        page.get(f"{dash.url}photo/{photo['id']}?token={dash.token}")

        def wait(cond: Callable[[Any], object]) -> None:
            # The live page redraws its parts while the test reads them: a stale element is
            # looked up again.
            wait_until(page, cond, timeout=60)

        wait(lambda d: d.find_element(By.ID, "conn").text == "live")
        clip = page.find_element(By.CSS_SELECTOR, ".before-clip")
        frame = page.find_element(By.CSS_SELECTOR, ".compare-frame")
        slider = page.find_element(By.CSS_SELECTOR, "[data-compare-range]")
        assert abs(clip.size["width"] - frame.size["width"] / 2) <= 2
        # Drag the slider's thumb to the right: more of the original shows.
        ActionChains(page).click_and_hold(slider).move_by_offset(
            slider.size["width"] // 3, 0
        ).release().perform()
        wait(lambda d: clip.size["width"] > frame.size["width"] * 0.7)
        # And with the keyboard: Home shows the result alone.
        slider.send_keys(Keys.HOME)
        wait(lambda d: clip.size["width"] <= 2)
        before, after = (page.find_element(By.CSS_SELECTOR, f"img.{k}") for k in ("before", "after"))
        assert before.size == after.size  # the same geometry under the line
        page.find_element(By.CSS_SELECTOR, "form[data-redo] input[name=strength]").send_keys("0")
        page.find_element(By.CSS_SELECTOR, "form[data-redo] button.primary").click()
        # The page says the run is queued; a tiny model's run may finish, and the page move on
        # to it, before the test reads that line.
        wait(
            lambda d: (
                urlsplit(d.current_url).path != f"/photo/{photo['id']}"
                or "Queued as run" in d.find_element(By.CSS_SELECTOR, ".queued").text
            )
        )
        # The page updates by itself: once the new run is done it is the page shown, the
        # old run among its runs.
        wait(lambda d: urlsplit(d.current_url).path != f"/photo/{photo['id']}")
        wait(lambda d: "restore.strength=0" in d.find_element(By.ID, "live").text)
        assert "done" in page.find_element(By.CSS_SELECTOR, "h1 .state").text
    assert np.array_equal(pixels(dash.svc.outbox / "solvay.png"), pixels(SOLVAY))


def test_redo_by_a_path_inside_the_outbox_typed_from_another_folder(dash: Dashboard) -> None:
    out = dash.cli("redo", os.path.join("outbox", "solvay.png"), "--face-ids", "", cwd=dash.svc.root)
    assert out.returncode == 0, out.stderr
    new_id = int(out.stdout.split("as run ")[1].split(",")[0])
    run = wait_run(dash, new_id)
    assert run["photo"]["state"] == "done"
    assert not any(f["restored"] for f in run["faces"])  # "" picks no face: the original's pixels
    assert np.array_equal(pixels(dash.svc.outbox / "solvay.png"), pixels(SOLVAY))
