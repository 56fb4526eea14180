"""`gpen-watch restore` end to end, as a user runs it: a real subprocess, real photos, tiny models."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
from conftest import TinyModels, cli_env, module_command, restore_command
from PIL import Image, ImageCms

EXIF_MAKE, EXIF_ORIENTATION = 0x010F, 0x0112


def run_cli(
    models: TinyModels, *args: str, extra: tuple[str, ...] = ("--no-parse",)
) -> subprocess.CompletedProcess:
    cmd = [*restore_command(models, *args), *extra]
    return subprocess.run(cmd, capture_output=True, text=True, env=cli_env(models), timeout=300)


@pytest.fixture()
def album(tmp_path: Path, astronaut_bgr: np.ndarray, grace_hopper_path: Path) -> Path:
    """A folder of real photos in the forms users have: rotated JPEG with EXIF+ICC, RGBA, gray, 16-bit."""
    d = tmp_path / "album"
    (d / "trip").mkdir(parents=True)
    rgb = Image.fromarray(astronaut_bgr[:, :, ::-1].copy())
    rgb.save(d / "astronaut.png")
    exif = Image.Exif()
    exif[EXIF_MAKE] = "TestCam"
    exif[EXIF_ORIENTATION] = 6  # stored sideways; viewers rotate it 90 degrees clockwise
    icc = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    with Image.open(grace_hopper_path) as hopper:
        hopper.transpose(Image.Transpose.ROTATE_90).save(
            d / "trip" / "hopper.jpg", exif=exif, icc_profile=icc, quality=92
        )
    rgba = rgb.convert("RGBA")
    alpha = np.full((512, 512), 255, np.uint8)
    alpha[:40] = 0
    rgba.putalpha(Image.fromarray(alpha))
    rgba.save(d / "trip" / "cutout.png")
    rgb.convert("L").save(d / "gray.jpg", quality=90)
    cv2.imwrite(str(d / "deep.png"), (astronaut_bgr.astype(np.uint16) * 257))
    return d


def test_folder_restore_keeps_size_orientation_metadata(
    tiny_models: TinyModels, album: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    before = {p: p.read_bytes() for p in album.rglob("*") if p.is_file()}
    proc = run_cli(tiny_models, str(album), "-o", str(out))
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "done 5 of 5 images: " in proc.stdout
    assert "images/s" in proc.stdout
    # Inputs untouched.
    assert {p: p.read_bytes() for p in album.rglob("*") if p.is_file()} == before

    with Image.open(out / "trip" / "hopper.jpg") as hopper:
        assert hopper.format == "JPEG"
        assert hopper.size == (512, 600)  # upright: the EXIF rotation was applied
        exif = hopper.getexif()
        assert exif.get(EXIF_MAKE) == "TestCam"
        assert exif.get(EXIF_ORIENTATION, 1) == 1
        assert hopper.info.get("icc_profile")

    with Image.open(out / "trip" / "cutout.png") as cutout:
        assert cutout.mode == "RGBA"
        assert np.array(cutout)[:40, :, 3].max() == 0
        assert np.array(cutout)[100:, :, 3].min() == 255

    with Image.open(out / "gray.jpg") as im:
        assert im.mode == "L"
    deep = cv2.imread(str(out / "deep.png"), cv2.IMREAD_UNCHANGED)
    assert deep.dtype == np.uint16
    assert deep.shape == (512, 512, 3)
    with Image.open(out / "astronaut.png") as im:
        assert im.size == (512, 512)


@pytest.mark.slow
def test_single_files_and_format_option(tiny_models: TinyModels, album: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_cli(
        tiny_models,
        str(album / "astronaut.png"),
        str(album / "gray.jpg"),
        "-o",
        str(out),
        "--format",
        "webp",
        "--quality",
        "80",
    )
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["astronaut.webp", "gray.webp"]
    with Image.open(out / "astronaut.webp") as im:
        assert im.format == "WEBP"


@pytest.mark.slow
def test_existing_results_are_not_overwritten(tiny_models: TinyModels, album: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "astronaut.png").write_bytes(b"mine")
    proc = run_cli(tiny_models, str(album / "astronaut.png"), "-o", str(out))
    assert (out / "astronaut.png").read_bytes() == b"mine"
    assert "exists" in proc.stderr
    proc = run_cli(tiny_models, str(album / "astronaut.png"), "-o", str(out), "--overwrite")
    assert proc.returncode == 0
    with Image.open(out / "astronaut.png") as im:
        assert im.size == (512, 512)


@pytest.mark.slow
def test_bad_inputs_are_reported_and_others_restored(
    tiny_models: TinyModels, album: Path, tmp_path: Path
) -> None:
    notes = album / "notes.jpg"
    notes.write_text("shopping list\n")
    fake_png = album / "really_a_jpeg.png"
    buf = io.BytesIO()
    with Image.open(album / "astronaut.png") as im:
        im.convert("RGB").save(buf, "JPEG")
    fake_png.write_bytes(buf.getvalue())
    (album / "zero.jpg").write_bytes(b"")
    out = tmp_path / "out"
    proc = run_cli(
        tiny_models,
        str(album / "astronaut.png"),
        str(notes),
        str(fake_png),
        str(album / "zero.jpg"),
        str(tmp_path / "missing.jpg"),
        "-o",
        str(out),
    )
    assert proc.returncode == 1
    text = proc.stdout + proc.stderr
    assert "missing.jpg: no such file or folder" in text
    assert "notes.jpg: not an image" in text
    assert "zero.jpg:" in text
    assert "empty" in text
    # The PNG that is really a JPEG is restored, and named for what it is.
    assert (out / "really_a_jpeg.jpg").exists()
    assert not (out / "really_a_jpeg.png").exists()
    assert (out / "astronaut.png").exists()
    assert not list(out.glob(".*gpen-tmp*"))


# GPEN's and ParseNet's terms accepted: these tests are of files missing; a first run that asks for
# the yes to the terms is tests/test_model_terms*.py's.
ACCEPTED_TERMS = ("--set", "restore.accepted_terms=GPEN,PSFR-GAN")


@pytest.mark.slow
def test_missing_weights_say_what_and_where(tmp_path: Path, album: Path) -> None:
    env_models = TinyModels(tmp_path / "empty", tmp_path / "empty" / "none.pth")
    (tmp_path / "empty").mkdir()
    cmd = [
        sys.executable,
        "-m",
        "gpen_watch",
        "restore",
        str(album / "astronaut.png"),
        "-o",
        str(tmp_path / "o"),
        "--model-dir",
        str(tmp_path / "empty"),
        "--device",
        "cpu",
        "--no-download",
        *ACCEPTED_TERMS,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=cli_env(env_models), timeout=120)
    assert proc.returncode == 2
    assert "GPEN-BFR-512.pth" in proc.stderr
    assert "https://" in proc.stderr
    assert str(tmp_path / "empty") in proc.stderr
    assert "Traceback" not in proc.stderr


def test_every_missing_weights_file_is_named_in_one_run(tmp_path: Path, album: Path) -> None:
    """Four files missing (generator, detector, parser, upscaler): one run names them all, with
    the one command that fetches them, rather than one file per try."""
    from gpen_watch.catalog import registry

    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "o"
    cmd = [sys.executable, "-m", "gpen_watch", "restore", str(album / "astronaut.png"), "-o", str(out)]
    cmd += ["--model-dir", str(empty), "--device", "cpu", "--no-download", "--upscale", "2", *ACCEPTED_TERMS]
    env = cli_env(TinyModels(empty, empty / "none.pth"))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2
    specs = [
        registry.get_spec("GPEN-BFR-512"),
        registry.detector_spec("retinaface_resnet50"),
        registry.parser_spec(),
        registry.upscaler_spec(2),
    ]
    for spec in specs:
        assert spec.filename in proc.stderr and spec.url in proc.stderr
    # The one command that fetches them all, on a line of its own.
    fetch = module_command("models fetch " + " ".join(s.name for s in specs), env)
    assert f"\n    {fetch}\n" in proc.stderr
    assert str(empty) in proc.stderr and "then run the command again" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()


def test_output_folder_problems(tiny_models: TinyModels, album: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    proc = run_cli(tiny_models, str(album / "astronaut.png"), "-o", str(blocker / "out"))
    assert proc.returncode == 2
    assert "cannot create output folder" in proc.stderr
    # Writing results into the input folder itself would replace the inputs: refused.
    proc = run_cli(tiny_models, str(album / "astronaut.png"), "-o", str(album))
    assert proc.returncode == 2
    assert "replace the input" in proc.stderr


def _restore_without_models(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """`restore` pointed at weights that do not exist: any run that loads the models fails."""
    empty = tmp_path / "no-models"
    empty.mkdir(exist_ok=True)
    cmd = [sys.executable, "-m", "gpen_watch", "restore", *args, "--model", str(empty / "none.pth")]
    cmd += ["--model-dir", str(empty), "--device", "cpu", "--no-download", "--no-progress"]
    env = cli_env(TinyModels(empty, empty / "none.pth"))
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)


def test_all_results_exist_says_how_many_skipped_without_loading_models(album: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "trip").mkdir(parents=True)
    for name in ("astronaut.png", "gray.jpg", "deep.png", "trip/hopper.jpg", "trip/cutout.png"):
        (out / name).write_bytes(b"mine")
    proc = _restore_without_models(tmp_path, str(album), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "nothing to restore: skipped 5 images whose result exists" in proc.stdout
    assert "--overwrite" in proc.stdout
    assert "not found" not in proc.stderr
    assert "restorer ready" not in proc.stderr
    proc = _restore_without_models(tmp_path, str(album / "gray.jpg"), "-o", str(out))
    assert proc.returncode == 0
    assert "skipped 1 image whose" in proc.stdout


@pytest.mark.slow
def test_missing_weights_leave_no_output_folder(album: Path, tmp_path: Path) -> None:
    out = tmp_path / "new" / "out"
    proc = _restore_without_models(tmp_path, str(album), "-o", str(out))
    assert proc.returncode == 2
    assert "none.pth" in proc.stderr
    assert not (tmp_path / "new").exists()


def test_a_named_file_that_is_not_an_image_is_reported_before_the_models_load(
    album: Path, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a photo\n" * 50)
    out = tmp_path / "out"
    proc = _restore_without_models(tmp_path, str(notes), "-o", str(out))
    assert proc.returncode == 2
    assert f"{notes}: not an image file (looks like text)" in proc.stderr
    assert "none.pth" not in proc.stderr  # the models were never needed
    assert not out.exists()


@pytest.mark.slow
def test_summary_counts_read_right_for_one(tiny_models: TinyModels, album: Path, tmp_path: Path) -> None:
    (album / "readme.txt").write_text("what these photos are\n")
    proc = run_cli(tiny_models, str(album / "gray.jpg"), "-o", str(tmp_path / "one"))
    assert proc.returncode == 0, proc.stderr
    assert "done 1 of 1 image: " in proc.stdout
    assert not re.search(r"\b1 (images|faces)\b", proc.stdout), proc.stdout
    # A folder's other files are left out, and the summary says so.
    proc = run_cli(tiny_models, str(album), "-o", str(tmp_path / "all"))
    assert proc.returncode == 0, proc.stderr
    assert "left out 1 file in the folders" in proc.stdout
    assert "readme.txt" in proc.stdout


@pytest.mark.slow
def test_jpeg_comment_reaches_the_restored_photo(
    tiny_models: TinyModels, astronaut_bgr: np.ndarray, tmp_path: Path
) -> None:
    src = tmp_path / "in" / "scan.jpg"
    src.parent.mkdir()
    Image.fromarray(astronaut_bgr[:, :, ::-1].copy()).save(src, quality=90, comment=b"print 42, box 7")
    out = tmp_path / "out"
    proc = run_cli(tiny_models, str(src), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"done 1 of 1 image: [1-9]\d* faces? restored", proc.stdout), proc.stdout  # re-encoded
    with Image.open(out / "scan.jpg") as im:
        assert im.info.get("comment") == b"print 42, box 7"


@pytest.mark.slow
def test_a_closed_pipe_does_not_cut_the_batch_short(
    tiny_models: TinyModels, album: Path, tmp_path: Path
) -> None:
    """`gpen-watch restore ... 2>&1 | head -1`: the reader goes, the photos still all get done."""
    (album / "notes.jpg").write_text("not a photo\n")  # a 'failed:' line to write mid-batch
    out = tmp_path / "out"
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        cmd = [sys.executable, "-m", "gpen_watch", "restore", str(album), "-o", str(out)]
        cmd += ["--model", str(tiny_models.gpen), "--detector", "retinaface_mobile0.25"]
        cmd += ["--device", "cpu", "--no-download", "--no-parse"]
        proc = subprocess.run(cmd, stdout=write_end, stderr=write_end, env=cli_env(tiny_models), timeout=300)
    finally:
        os.close(write_end)
    assert proc.returncode == 1  # one input failed, as the summary nobody read would have said
    assert len([p for p in out.rglob("*") if p.is_file()]) == 5
    assert not list(out.rglob(".*gpen-tmp*"))


def test_summary_lists_the_prescale_stage() -> None:
    """Pre-scaling is timed apart from decoding now; the summary keeps showing that time."""
    from gpen_watch.cli.restore import summary
    from gpen_watch.restore.api import FileResult

    res = FileResult(
        src=Path("big.jpg"), ok=True, faces=1, timings={"decode": 0.2, "prescale": 0.4, "restore": 1.0}
    )
    line = next(x for x in summary([res], [], 2.0, 3.0, 1.0).splitlines() if x.startswith("stage totals"))
    assert line == "stage totals: decode 0.2 s, prescale 0.4 s, restore 1.0 s"


@pytest.mark.slow
def test_folder_files_are_chosen_by_content_as_the_watcher_does(
    tiny_models: TinyModels, tmp_path: Path
) -> None:
    """A scan saved without an extension (or under a made-up one) is restored from a folder, as
    the watcher would restore it; text with no extension and names that are never photos are
    left out, and the summary counts them."""
    d = tmp_path / "scans"
    d.mkdir()
    y, x = np.mgrid[0:48, 0:64]
    ramp = Image.fromarray(np.dstack([x * 4, y * 5, x + y]).astype(np.uint8))
    ramp.save(d / "scan0001", "PNG")
    ramp.save(d / "scan0002.dat", "TIFF")
    (d / "README").write_text("scans of the 1962 album\n" * 5)
    (d / "list.csv").write_text("scan0001,1962\n")
    out = tmp_path / "out"
    proc = run_cli(tiny_models, str(d), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "done 2 of 2 images: " in proc.stdout, proc.stdout
    assert "left out 2 files in the folders" in proc.stdout, proc.stdout
    made = sorted(p.name for p in out.iterdir())
    assert len(made) == 2, made
    assert made[0].startswith("scan0001"), made
    assert made[1].startswith("scan0002"), made
    for name in made:
        with Image.open(out / name) as im:
            im.load()
            assert im.size == (64, 48)


@pytest.mark.slow
def test_a_second_run_skips_results_whose_name_follows_the_content(
    tiny_models: TinyModels, tmp_path: Path
) -> None:
    """A HEIC written as JPEG, a PNG named .jpg and a scan with no extension get a result name
    unlike the input's; running the same command again skips them without loading the models
    (the second run has none to load) instead of failing them as 'appeared while restoring'."""
    pillow_heif = pytest.importorskip("pillow_heif")
    pillow_heif.register_heif_opener()
    d = tmp_path / "drop"
    d.mkdir()
    y, x = np.mgrid[0:48, 0:64]
    ramp = Image.fromarray(np.dstack([x * 4, y * 5, x + y]).astype(np.uint8))
    ramp.save(d / "01_phone.heic", "HEIF")
    ramp.save(d / "02_named_wrong.jpg", "PNG")
    ramp.save(d / "03_scan", "PNG")
    out = tmp_path / "out"
    first = run_cli(tiny_models, str(d), "-o", str(out))
    assert first.returncode == 0, first.stderr + first.stdout
    made = sorted(p.name for p in out.iterdir())
    assert made == ["01_phone.jpg", "02_named_wrong.png", "03_scan.png"], made
    again = _restore_without_models(tmp_path, str(d), "-o", str(out))
    assert again.returncode == 0, again.stderr + again.stdout
    assert "nothing to restore: skipped 3 images whose result exists" in again.stdout, again.stdout
    assert f"skip {d / '01_phone.heic'}: {out / '01_phone.jpg'} exists" in again.stderr, again.stderr
    assert "appeared while restoring" not in again.stdout + again.stderr


def test_the_summary_says_restored_only_of_faces() -> None:
    """Ten photos done and none with a face: nothing was restored, and the first line says so."""
    from gpen_watch.cli.restore import summary
    from gpen_watch.restore.api import FileResult

    no_face = [FileResult(src=Path(f"{i}.jpg"), ok=True, faces=0) for i in range(10)]
    failed = [(Path(f"bad{i}.jpg"), "damaged") for i in range(3)]
    first = summary(no_face, failed, 2.0, 3.0, 1.0).splitlines()[0]
    assert first == "done 10 of 13 images: no face restored (10 images without a face)"
    with_faces = [*no_face[:3], FileResult(src=Path("group.jpg"), ok=True, faces=4)]
    first = summary(with_faces, [], 2.0, 3.0, 1.0).splitlines()[0]
    assert first == "done 4 of 4 images: 4 faces restored (3 images without a face)"
    first = summary([FileResult(src=Path("one.jpg"), ok=True, faces=1)], [], 2.0, 3.0, 1.0).splitlines()[0]
    assert first == "done 1 of 1 image: 1 face restored"
