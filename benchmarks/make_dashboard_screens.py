"""Screenshots of every dashboard page, for the docs: a real `gpen-watch run` (the tiny
random-weight generator, the real RetinaFace-MobileNet detector from ../shared) on real photos,
shown in headless Chromium.

    python -m benchmarks.make_dashboard_screens [--out docs/assets] [--phone]

The faces come out as noise: the generator's weights are random (the real GPEN weights cannot be
downloaded where this runs). The detection, the crops, the previews and the pages are real.
"""

from __future__ import annotations

import argparse
import importlib
import shutil
import sys
import tempfile
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"
SHARED = Path(__file__).resolve().parents[2] / "shared"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.make_dashboard_screens", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--out", type=Path, default=Path("docs/assets"))
    ap.add_argument("--phone", action="store_true", help="also a phone-width shot of the photo page")
    args = ap.parse_args(argv)
    # The tests' own harness: the tiny models, a served dashboard, headless Chromium.
    sys.path.insert(0, str(TESTS))
    chromium = importlib.import_module("browser").chromium
    make_tiny_models = importlib.import_module("conftest").make_tiny_models
    served_dashboard = importlib.import_module("dashboard_client").served_dashboard
    harness = importlib.import_module("service_harness")
    real_engine_args, write_atomic = harness.real_engine_args, harness.write_atomic
    import matplotlib.cbook
    from PIL import Image
    from selenium.webdriver.common.action_chains import ActionChains
    from skimage import data as skdata

    from gpen_watch.catalog import registry

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gpen-screens-") as tmp:
        root = Path(tmp)
        models = make_tiny_models(root / "models")
        shutil.copyfile(
            SHARED / "fixtures" / "retinaface_mobilenet0.25_real.pth",
            models.model_dir / registry.detector_spec("retinaface_mobile0.25").filename,
        )
        (root / "svc").mkdir()
        with served_dashboard(root / "svc", *real_engine_args(models), restorer=None) as d:
            write_atomic(
                d.svc.inbox / "Solvay 1927.png", (SHARED / "data" / "Solvay_conference_1927.png").read_bytes()
            )
            hopper = Path(matplotlib.cbook.get_sample_data("grace_hopper.jpg", asfileobj=False))
            write_atomic(d.svc.inbox / "Grace Hopper.jpg", hopper.read_bytes())
            Image.fromarray(skdata.astronaut()).save(root / "astronaut.jpg", quality=92)
            write_atomic(d.svc.inbox / "family" / "astronaut.jpg", (root / "astronaut.jpg").read_bytes())
            write_atomic(d.svc.inbox / "scan 014.jpg", b"\xff\xd8\xff\xe0 a scan cut short by the scanner")
            d.wait(
                lambda s: (
                    s["queue"]["queued"] == 0 and s["queue"]["running"] == 0 and s["queue"]["done"] >= 3
                ),
                300,
            )
            photos = {p["name"]: p["id"] for p in d.get("/api/results").json()["photos"]}
            with chromium(1280, 900) as page:
                page.get(f"{d.url}?token={d.token}")
                for name, path in [
                    ("overview", ""),
                    ("activity", "activity"),
                    ("results", "results"),
                    ("failed", "failed"),
                    ("photo", f"photo/{photos['Solvay 1927.png']}"),
                    ("photo-portrait", f"photo/{photos['Grace Hopper.jpg']}"),
                ]:
                    page.get(d.url + path)
                    time.sleep(1.5)  # the live stream's first update and the images
                    _shot(page, args.out / f"dashboard-{name}.jpg")
                # Results as a review queue: a filter, its matches, two tiles ticked for a bulk action.
                page.set_window_size(1280, 900)
                page.get(d.url + "results?state=restored&sort=faces")
                time.sleep(1.5)
                for box in page.find_elements("css selector", "[data-select]")[:2]:
                    box.click()
                _shot(page, args.out / "dashboard-review.jpg")
                # A photo's page at real pixels (Z) on a face: both halves cut from the full-size files.
                page.set_window_size(1280, 900)
                page.get(d.url + f"photo/{photos['Grace Hopper.jpg']}?state=restored&sort=faces")
                time.sleep(1.5)
                frame = page.find_element("css selector", "[data-zoomable]")
                size = frame.size
                ActionChains(page).move_to_element_with_offset(frame, 0, -int(size["height"] * 0.2)).perform()
                ActionChains(page).send_keys("z").perform()
                time.sleep(3)  # the crops are cut and loaded
                _shot(page, args.out / "dashboard-zoom.jpg", full=False)
            if args.phone:
                with chromium(390, 844) as phone:
                    phone.get(f"{d.url}?token={d.token}")
                    phone.get(d.url + f"photo/{photos['Grace Hopper.jpg']}")
                    time.sleep(1.5)
                    _shot(phone, args.out / "dashboard-photo-phone.png")
    return 0


def _shot(page: object, path: Path, full: bool = True) -> None:
    """The page at its full height (or the window as it is), as PNG or, for a .jpg path, JPEG."""
    from PIL import Image

    if full:
        width = page.execute_script("return window.innerWidth")  # type: ignore[attr-defined]
        page.set_window_size(width, 900)  # type: ignore[attr-defined]  # from the last shot's height
        height = page.execute_script("return document.documentElement.scrollHeight")  # type: ignore[attr-defined]
        page.set_window_size(width, min(int(height) + 100, 4000))  # type: ignore[attr-defined]
        time.sleep(0.3)
    png = path.with_suffix(".png")
    page.save_screenshot(str(png))  # type: ignore[attr-defined]
    if path.suffix == ".jpg":
        Image.open(png).convert("RGB").save(path, quality=82, optimize=True)
        png.unlink()
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
