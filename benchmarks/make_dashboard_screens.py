"""Screenshots of every dashboard page, for the docs: a real `gpen-watch run` (the tiny
random-weight generator, the real RetinaFace-MobileNet detector from ../shared) on real photos,
shown in headless Chromium.

    python -m benchmarks.make_dashboard_screens [--out docs/assets] [--phone]

The faces come out as noise: the generator's weights are random (the real GPEN weights cannot be
downloaded where this runs). The detection, the crops, the previews and the pages are real.
"""

from __future__ import annotations

import argparse
import base64
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
                # The page laid out at 1280 x 900 (a window's size includes its frame).
                page.execute_cdp_cmd(
                    "Emulation.setDeviceMetricsOverride",
                    {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False},
                )
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
                page.get(d.url + "results?state=restored&sort=faces")
                time.sleep(1.5)
                for box in page.find_elements("css selector", "[data-select]")[:2]:
                    box.click()
                _shot(
                    page, args.out / "dashboard-review.jpg", full=False
                )  # the bulk bar at the window's foot
                # A photo's page at real pixels (Z) on a face: both halves cut from the full-size files.
                page.get(d.url + f"photo/{photos['Solvay 1927.png']}?state=restored&sort=faces")
                time.sleep(1.5)
                frame = page.find_element("css selector", "[data-zoomable]")
                size = frame.size
                # The pointer on a face of the front row, left of the middle (the original's half).
                at = (-int(size["width"] * 0.12), -int(size["height"] * 0.05))
                ActionChains(page).move_to_element_with_offset(frame, *at).perform()
                ActionChains(page).send_keys("z").perform()
                # The crops are cut (the service's first one imports its image libraries) and loaded.
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and not page.execute_script(
                    "const i = document.querySelector('img.before-crop'); return !!i && !i.hidden && i.complete"
                ):
                    time.sleep(0.2)
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

    png = path.with_suffix(".png")
    if full:
        # The whole page as laid out in its window (a photo's loupe fits the window: a taller
        # window would lay out another page), captured beyond the window's bottom.
        width, height = page.execute_script(  # type: ignore[attr-defined]
            "return [document.documentElement.clientWidth, document.documentElement.scrollHeight]"
        )
        shot = page.execute_cdp_cmd(  # type: ignore[attr-defined]
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": width, "height": min(int(height), 4000), "scale": 1},
            },
        )
        png.write_bytes(base64.b64decode(shot["data"]))
    else:
        page.save_screenshot(str(png))  # type: ignore[attr-defined]
    if path.suffix == ".jpg":
        Image.open(png).convert("RGB").save(path, quality=82, optimize=True)
        png.unlink()
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
