"""The restoration engine on real photos with tiny random-weight models loaded through the store.

The detector is the one edge replaced here (untrained detector weights find no real faces): a
detector that reports the reference landmarks of the two photos, so restoration, paste-back and
batching run on real face geometry.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from conftest import TinyModels, tiny_restore_config
from PIL import Image

from gpen_watch.restore.api import FileJob
from gpen_watch.restore.engines.restorer import Restorer
from gpen_watch.restore.stages.detect import Face


class KnownFaces:
    """Reports the reference faces of images whose size matches (no network involved)."""

    def __init__(self, landmarks: dict) -> None:
        self.by_shape = {}
        for entry in landmarks.values():
            h, w, _ = entry["image_shape_hwc"]
            faces = [
                Face(np.array(box, dtype=np.float32), score, np.array(lm, dtype=np.float32))
                for box, score, lm in zip(entry["boxes_xyxy"], entry["scores"], entry["landmarks5_xy"])
            ]
            self.by_shape[(h, w)] = (faces, entry["boxes_xyxy"])

    def detect(self, images: list[np.ndarray]) -> list[list[Face]]:
        return [self.by_shape.get(img.shape[:2], ([], None))[0] for img in images]


@pytest.fixture()
def photos(tmp_path: Path, astronaut_bgr: np.ndarray, grace_hopper_path: Path) -> list[Path]:
    a = tmp_path / "in" / "astronaut.png"
    a.parent.mkdir()
    cv2.imwrite(str(a), astronaut_bgr)
    g = tmp_path / "in" / "grace_hopper.jpg"
    g.write_bytes(grace_hopper_path.read_bytes())
    return [a, g]


def _restorer(models: TinyModels, landmarks: dict, **changes: object) -> Restorer:
    cfg = tiny_restore_config(models, **changes)
    return Restorer(cfg, threads=2, detector=KnownFaces(landmarks))


def test_restores_faces_and_leaves_the_rest(
    tiny_models: TinyModels, landmarks: dict, photos: list[Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    with _restorer(tiny_models, landmarks) as r:
        results = {res.src.name: res for res in r.restore_files(FileJob(p, out / p.name) for p in photos)}
    assert set(results) == {"astronaut.png", "grace_hopper.jpg"}
    res = results["astronaut.png"]
    assert res.ok
    assert res.faces == 1
    assert res.format == "PNG"
    assert {"decode", "detect", "align", "restore", "paste", "encode"} <= set(res.timings)
    before = cv2.imread(str(photos[0]))
    after = cv2.imread(str(out / "astronaut.png"))
    assert after.shape == before.shape
    x1, y1, x2, y2 = (int(v) for v in landmarks["skimage.data.astronaut"]["boxes_xyxy"][0])
    # The face was replaced by the (random) generator's output...
    assert np.abs(after[y1:y2, x1:x2].astype(int) - before[y1:y2, x1:x2]).mean() > 10
    # ...and the photo away from it is untouched (PNG is lossless).
    assert np.array_equal(after[400:], before[400:])
    assert np.array_equal(after[:, 420:], before[:, 420:])
    assert results["grace_hopper.jpg"].ok
    assert results["grace_hopper.jpg"].faces == 1


def test_faces_of_several_photos_share_a_batch(
    tiny_models: TinyModels, landmarks: dict, photos: list[Path], tmp_path: Path
) -> None:
    """Batch size 2 with one face per photo: both photos' faces go through one forward pass."""
    calls: list[int] = []
    with _restorer(tiny_models, landmarks, face_batch=2) as r:
        real = r.enhancer.enhance

        def spy(crops: np.ndarray):
            calls.append(len(crops))
            return real(crops)

        r.enhancer.enhance = spy  # type: ignore[method-assign]
        jobs = [FileJob(p, tmp_path / f"b-{p.name}") for p in photos]
        results = list(r.restore_files(jobs))
    assert all(res.ok for res in results)
    assert calls == [2]


def test_live_source_feeds_one_running_pipeline(
    tiny_models: TinyModels, landmarks: dict, photos: list[Path], tmp_path: Path
) -> None:
    """A daemon worker's source answers None ("nothing yet") while photos are held; the engine
    keeps asking while it works, and a photo that arrives later joins the same call."""
    jobs = [FileJob(p, tmp_path / f"live-{p.name}") for p in photos]
    held = [True]
    asked_while_held = [0]

    def source():
        yield jobs[0]
        while held[0]:
            asked_while_held[0] += 1
            yield None
        yield jobs[1]

    with _restorer(tiny_models, landmarks) as r:
        results = r.restore_files(source())
        first = next(results)
        held[0] = False
        rest = list(results)
    assert asked_while_held[0] >= 1
    assert [first.src.name] + [res.src.name for res in rest] == ["astronaut.png", "grace_hopper.jpg"]
    assert all(res.ok and res.faces == 1 for res in [first, *rest])
    assert r.read_ahead >= 4  # what a daemon worker asks its pool for


def test_the_restorer_counts_the_photos_past_decoding(
    tiny_models: TinyModels, landmarks: dict, photos: list[Path], tmp_path: Path
) -> None:
    """What a worker's heartbeat reports as "being restored": photos taken ahead to decode are not
    counted, a decoded one on the device or being written is, and none once all are handed back."""
    seen: list[int] = []
    with _restorer(tiny_models, landmarks) as r:

        def source():
            for p in [*photos, photos[0]]:
                seen.append(r.restoring)  # as the engine asks for the next photo
                yield FileJob(p, tmp_path / f"{len(seen)}-{p.name}")

        results = list(r.restore_files(source(), prefetch=1))
        assert r.restoring == 0
    assert all(res.ok for res in results)
    assert seen[0] == 0  # the first photo taken: nothing decoded yet
    assert max(seen) >= 1  # later ones were taken while a decoded photo was on its way
    assert max(seen) <= 2  # with one photo decoding ahead, never more than the few in the stages


def test_batched_result_equals_one_at_a_time(
    tiny_models: TinyModels, landmarks: dict, photos: list[Path], tmp_path: Path
) -> None:
    outs = {}
    for batch in (1, 4):
        d = tmp_path / f"b{batch}"
        d.mkdir()
        with _restorer(tiny_models, landmarks, face_batch=batch) as r:
            assert all(res.ok for res in r.restore_files(FileJob(p, d / p.name) for p in photos))
        outs[batch] = cv2.imread(str(d / "astronaut.png")).astype(int)
    assert np.abs(outs[1] - outs[4]).max() <= 1


def test_photo_without_face_is_copied_bit_for_bit(
    tiny_models: TinyModels, landmarks: dict, tmp_path: Path
) -> None:
    src = tmp_path / "landscape.jpg"
    rng = np.random.default_rng(0)
    cv2.imwrite(str(src), rng.integers(0, 255, (300, 400, 3), dtype=np.uint8))
    dst = tmp_path / "out.jpg"
    with _restorer(tiny_models, landmarks) as r:
        (res,) = list(r.restore_files([FileJob(src, dst)]))
    assert res.ok
    assert res.faces == 0
    assert "no face found; image passed through unchanged" in res.notes
    assert dst.read_bytes() == src.read_bytes()


def _faceless_jpeg(path: Path, seed: int = 0) -> Path:
    cv2.imwrite(str(path), np.random.default_rng(seed).integers(0, 255, (300, 400, 3), dtype=np.uint8))
    return path


@pytest.mark.parametrize("change", ["replaced", "link", "gone"])
def test_byte_copy_only_from_the_file_that_was_decoded(tmp_path: Path, change: str) -> None:
    """Between decode and copy the name may come to mean another file: no byte copy then."""
    from gpen_watch.imaging.load import load_image
    from gpen_watch.imaging.save import copy_source

    src = _faceless_jpeg(tmp_path / "a.jpg")
    image = load_image(src)
    dst = tmp_path / "out.jpg"
    other = _faceless_jpeg(tmp_path / "other.jpg", seed=1)
    if change == "replaced":
        other.replace(src)
    elif change == "link":
        src.unlink()
        src.symlink_to(other)
    else:
        src.unlink()
    why_not = copy_source(image, src, dst)
    assert why_not is not None
    assert "changed after it was read" in why_not
    assert not dst.exists()

    same = _faceless_jpeg(tmp_path / "b.jpg", seed=2)
    assert copy_source(load_image(same), same, tmp_path / "b-out.jpg") is None
    assert (tmp_path / "b-out.jpg").read_bytes() == same.read_bytes()


def test_unreadable_original_is_re_encoded_not_blamed_on_the_outbox(
    tiny_models: TinyModels, landmarks: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read error while copying a faceless photo (a bad sector, a share that dropped) must not be
    taken for trouble with the outbox (that holds the whole service): the pixels already decoded
    are encoded instead."""
    import errno

    from gpen_watch.imaging import save

    class FailingRead:
        def __enter__(self):
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def read(self, n: int) -> bytes:
            raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(save, "open_unchanged", lambda path, source_id: FailingRead())
    src = _faceless_jpeg(tmp_path / "landscape.jpg")
    dst = tmp_path / "out.jpg"
    with _restorer(tiny_models, landmarks) as r:
        (res,) = list(r.restore_files([FileJob(src, dst)]))
    assert res.ok, res
    assert any("could not read the original again (Input/output error)" in n for n in res.notes)
    out = cv2.imread(str(dst))
    assert out is not None
    assert out.shape == (300, 400, 3)
    assert dst.read_bytes() != src.read_bytes()  # encoded from the pixels, not a partial copy


def test_one_output_rule_with_and_without_faces(
    tiny_models: TinyModels, landmarks: dict, astronaut_bgr: np.ndarray, tmp_path: Path
) -> None:
    """The output format and its note do not depend on whether faces were found: an AVIF with
    transparency stays an AVIF with its alpha both ways (it came out as an opaque .jpg with faces and
    an .avif copy without), and a GIF becomes a JPEG of its first frame both ways, the note saying
    why (a faceless one was copied as a multi-frame GIF)."""
    from PIL import Image

    rgb = Image.fromarray(astronaut_bgr[:, :, ::-1].copy())
    alpha = Image.linear_gradient("L").resize(rgb.size)
    with_faces, without = rgb.copy(), rgb.resize((500, 500))  # KnownFaces knows the 512 x 512 one
    for im in (with_faces, without):
        im.putalpha(alpha.resize(im.size))
    with_faces.save(tmp_path / "faces.avif", quality=90)
    without.save(tmp_path / "nofaces.avif", quality=90)
    frames = [rgb.convert("RGB"), rgb.convert("RGB").rotate(90)]
    frames[0].save(tmp_path / "faces.gif", save_all=True, append_images=frames[1:])
    small = [f.resize((500, 500)) for f in frames]
    small[0].save(tmp_path / "nofaces.gif", save_all=True, append_images=small[1:])
    names = ["faces.avif", "nofaces.avif", "faces.gif", "nofaces.gif"]
    with _restorer(tiny_models, landmarks) as r:
        jobs = [FileJob(tmp_path / n, tmp_path / f"out-{n}") for n in names]
        results = {res.src.name: res for res in r.restore_files(jobs)}
    assert [results[n].faces for n in names] == [1, 0, 1, 0]
    for name in ("faces.avif", "nofaces.avif"):
        res = results[name]
        assert res.ok, res
        assert res.format == "AVIF", res
        with Image.open(tmp_path / f"out-{name}") as out:
            assert out.format == "AVIF"
            assert out.mode == "RGBA"
            assert out.getchannel("A").getextrema()[0] < 128  # the transparency is kept
    for name in ("faces.gif", "nofaces.gif"):
        res = results[name]
        assert res.ok, res
        assert res.format == "JPEG", res
        assert "written as JPEG (quality 95): gpen-watch does not write GIF" in res.notes
        assert any("GIF has 2 frames; only the first was restored" in n for n in res.notes)
        with Image.open(tmp_path / f"out-{name}") as out:
            assert out.format == "JPEG"
    # Re-encoded in another format, the faceless GIF is not "passed through unchanged".
    assert "no face found" in results["nofaces.gif"].notes
    assert not any("unchanged" in n for n in results["nofaces.gif"].notes)


def test_output_folder_refusing_writes_is_not_the_photos_fault(
    tiny_models: TinyModels, landmarks: dict, photos: list[Path], tmp_path: Path
) -> None:
    """A write the output folder refuses (here: it is gone) comes back as error_kind "outbox", for
    the restored path (encode) and the verbatim-copy path (no face) alike; callers hold such photos."""
    src = tmp_path / "landscape.jpg"
    cv2.imwrite(str(src), np.random.default_rng(1).integers(0, 255, (300, 400, 3), dtype=np.uint8))
    gone = tmp_path / "gone"
    with _restorer(tiny_models, landmarks) as r:
        results = list(r.restore_files([FileJob(photos[0], gone / "a.png"), FileJob(src, gone / "b.jpg")]))
    assert sorted(res.faces for res in results) == [0, 1]
    for res in results:
        assert not res.ok, res
        assert res.error_kind == "outbox", res
        assert "folder does not exist" in (res.error or "")


def test_bad_files_fail_with_reasons_and_the_rest_go_on(
    tiny_models: TinyModels, landmarks: dict, photos: list[Path], tmp_path: Path
) -> None:
    text = tmp_path / "notes.jpg"
    text.write_text("this is not a photo\n" * 20)
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    truncated = tmp_path / "cut.jpg"
    truncated.write_bytes(photos[1].read_bytes()[:5000])
    jobs = [FileJob(p, tmp_path / f"o-{p.name}") for p in [text, photos[0], empty, truncated]]
    with _restorer(tiny_models, landmarks) as r:
        results = {res.src.name: res for res in r.restore_files(jobs)}
    assert results["astronaut.png"].ok
    assert results["notes.jpg"].error_kind == "unsupported"
    assert "not an image" in results["notes.jpg"].error
    assert not results["empty.png"].ok
    assert "empty" in results["empty.png"].error
    assert results["cut.jpg"].error_kind == "failed"
    assert "truncated" in results["cut.jpg"].error.lower()
    assert not any((tmp_path / f"o-{n}").exists() for n in ["notes.jpg", "empty.png", "cut.jpg"])


def test_prescale_and_retry_scale(tiny_models: TinyModels, landmarks: dict, tmp_path: Path) -> None:
    src = tmp_path / "big.png"
    cv2.imwrite(str(src), np.full((1200, 1600, 3), 128, np.uint8))
    with _restorer(tiny_models, landmarks, max_side=800) as r:
        (res,) = list(r.restore_files([FileJob(src, tmp_path / "a.png")]))
        (half,) = list(r.restore_files([FileJob(src, tmp_path / "b.png", scale=0.5)]))
    assert (res.width, res.height) == (800, 600)
    assert any("pre-scaled" in n for n in res.notes)
    assert cv2.imread(str(tmp_path / "a.png")).shape == (600, 800, 3)
    assert (half.width, half.height) == (400, 300)


def test_result_too_large_for_webp_is_prescaled_to_fit(
    tiny_models: TinyModels, landmarks: dict, tmp_path: Path
) -> None:
    """WebP holds 16,383 px a side: a wider photo is decoded at that size, even with pre-scaling
    off, and the notes say how to keep the full size; PNG keeps every pixel."""
    src = tmp_path / "wide.png"
    cv2.imwrite(str(src), np.full((200, 17000, 3), 128, np.uint8))
    with _restorer(tiny_models, landmarks, max_side=0) as r:
        (webp,) = list(r.restore_files([FileJob(src, tmp_path / "a.webp", format="webp")]))
        (png,) = list(r.restore_files([FileJob(src, tmp_path / "b.png", format="png")]))
    assert webp.ok, webp.error
    assert (webp.width, webp.height) == (16383, 193)
    assert "pre-scaled from 17000x200 to 16383x193" in webp.notes
    assert any("fits WebP's 16,383 px a side; choose png" in n for n in webp.notes)
    with Image.open(tmp_path / "a.webp") as img:
        assert (img.format, img.size) == ("WEBP", (16383, 193))
    assert png.ok and (png.width, png.height) == (17000, 200)
    assert not any("pre-scaled" in n for n in png.notes)


def test_prescale_is_timed_apart_from_decode(
    tiny_models: TinyModels, landmarks: dict, photos: list[Path], tmp_path: Path
) -> None:
    """The engine reports the pre-scale resize as its own stage, so the benchmark and `restore`'s
    summary can show it without patching the loader; a photo that needs none has no such stage."""
    src = tmp_path / "big.png"
    cv2.imwrite(str(src), np.full((1200, 1600, 3), 128, np.uint8))
    with _restorer(tiny_models, landmarks, max_side=800) as r:
        (big,) = list(r.restore_files([FileJob(src, tmp_path / "a.png")]))
        (small,) = list(r.restore_files([FileJob(photos[0], tmp_path / "b.png")]))
    assert big.ok
    assert small.ok
    assert big.timings["prescale"] > 0
    assert big.timings["decode"] > 0
    assert "prescale" not in small.timings
    assert small.timings["decode"] > 0


def test_parse_mask_path(
    tiny_models_with_parser: TinyModels, landmarks: dict, photos: list[Path], tmp_path: Path
) -> None:
    """ParseNet (random weights, full size) runs on the restored faces and drives the paste mask."""
    cfg = tiny_restore_config(tiny_models_with_parser, use_parse=True)
    with Restorer(cfg, threads=2, detector=KnownFaces(landmarks)) as r:
        assert r.enhancer.parser is not None
        (res,) = list(r.restore_files([FileJob(photos[0], tmp_path / "p.png")]))
    assert res.ok
    assert res.faces == 1


def test_small_faces_are_smoothed_before_paste_back(
    tiny_models: TinyModels, landmarks: dict, photos: list[Path], tmp_path: Path
) -> None:
    """By default a face whose detection box is under 100 px (the astronaut's is 87 x 110) gets the
    3x3 smoothing upstream gives it; a larger one (Grace Hopper's, 181 x 221) is pasted as restored.

    The generator's faces are replaced by a one-pixel checkerboard (the random tiny generator's
    output is already smooth): the 3x3 binomial filter turns it into flat grey."""
    outs = {}
    for name, changes in (("default", {}), ("never", {"smooth_below": 0})):
        d = tmp_path / name
        d.mkdir()
        with _restorer(tiny_models, landmarks, **changes) as r:
            real = r.enhancer.enhance

            def checkerboard(crops: np.ndarray, real=real):
                restored, masks = real(crops)
                yy, xx = np.indices(restored.shape[1:3])
                restored[:] = (((yy + xx) % 2) * 255).astype(np.uint8)[None, :, :, None]
                return restored, masks

            r.enhancer.enhance = checkerboard  # type: ignore[method-assign]
            assert all(res.ok for res in r.restore_files(FileJob(p, d / p.name) for p in photos))
        outs[name] = {p.name: cv2.imread(str(d / p.name)).astype(np.float64) for p in photos}
    x1, y1, x2, y2 = (int(v) for v in landmarks["skimage.data.astronaut"]["boxes_xyxy"][0])
    face = (slice(y1 + 10, y2 - 10), slice(x1 + 10, x2 - 10))

    def roughness(img: np.ndarray) -> float:  # mean absolute Laplacian over the face
        return float(np.abs(cv2.Laplacian(img[face], cv2.CV_64F)).mean())

    smoothed, sharp = outs["default"]["astronaut.png"], outs["never"]["astronaut.png"]
    assert roughness(smoothed) < 0.5 * roughness(sharp)
    # Only the face changed: the rest of the photo is the same in both runs.
    assert np.array_equal(smoothed[400:], sharp[400:])
    # Grace Hopper's face is too large to be smoothed (JPEG: same encoder, same pixels in).
    assert np.array_equal(outs["default"]["grace_hopper.jpg"], outs["never"]["grace_hopper.jpg"])


class ScaledFaces(KnownFaces):
    """The astronaut's reference face on a copy of the photo shrunk ``factor`` times."""

    def __init__(self, landmarks: dict, factor: int) -> None:
        entry = landmarks["skimage.data.astronaut"]
        box = np.array(entry["boxes_xyxy"][0], np.float32) / factor
        lm = np.array(entry["landmarks5_xy"][0], np.float32) / factor
        side = 512 // factor
        self.by_shape = {(side, side): ([Face(box, entry["scores"][0], lm)], None)}


def test_tiny_faces_are_restored_by_default(
    tiny_models: TinyModels, landmarks: dict, astronaut_bgr: np.ndarray, tmp_path: Path
) -> None:
    """Upstream restores every face the detector reports; so does the default config, even one
    whose eyes and mouth span 11 px (the astronaut on a 128 x 128 copy)."""
    small = cv2.resize(astronaut_bgr, (128, 128), interpolation=cv2.INTER_AREA)
    src = tmp_path / "small.png"
    cv2.imwrite(str(src), small)
    detector = ScaledFaces(landmarks, 4)
    assert detector.by_shape[(128, 128)][0][0].size < 16
    cfg = tiny_restore_config(tiny_models)
    with Restorer(cfg, threads=2, detector=detector) as r:
        (res,) = list(r.restore_files([FileJob(src, tmp_path / "out.png")]))
    assert res.ok
    assert res.faces == 1
    after = cv2.imread(str(tmp_path / "out.png")).astype(int)
    assert np.abs(after[15:43, 45:67] - small[15:43, 45:67]).mean() > 5


def _held_at_once(r: Restorer, jobs: list[FileJob]) -> tuple[int, list]:
    """Most photos decoded but not yet handed back at any moment, and the results."""
    decoded, results, most = [0], [], [0]
    real = r._decode

    def counting(job: FileJob, cost: int = 0):
        work = real(job, cost)
        decoded[0] += 1
        most[0] = max(most[0], decoded[0] - len(results))
        return work

    r._decode = counting  # type: ignore[method-assign]
    for res in r.restore_files(jobs):
        results.append(res)
    return most[0], results


def test_memory_budget_bounds_the_photos_in_hand(
    tiny_models: TinyModels, landmarks: dict, photos: list[Path], tmp_path: Path
) -> None:
    """With room for no photo beside the models, the restorer holds one photo at a time (and still
    restores them all); with the default budget it reads ahead."""
    jobs = [FileJob(p, tmp_path / f"{i}-{p.name}") for i in range(2) for p in photos]
    with _restorer(tiny_models, landmarks, memory_mb=256) as r:
        assert r.photo_allowance == 0
        assert r.read_ahead == 1
        most, results = _held_at_once(r, jobs)
    assert most == 1
    assert len(results) == 4
    assert all(res.ok for res in results)
    with _restorer(tiny_models, landmarks) as r:
        assert r.memory_budget_mb >= 2048
        assert r.read_ahead >= 4
        most, results = _held_at_once(r, jobs)
    assert most > 1
    assert all(res.ok for res in results)


def test_results_carry_resident_memory_per_stage(
    tiny_models: TinyModels, landmarks: dict, photos: list[Path], tmp_path: Path
) -> None:
    with _restorer(tiny_models, landmarks) as r:
        results = list(r.restore_files(FileJob(p, tmp_path / p.name) for p in photos))
        stages = {"decode", "align", "restore", "paste", "encode", "peak"}
        for res in results:
            assert stages <= set(res.rss_mb)
            assert 50 < res.rss_mb["decode"] <= res.rss_mb["peak"]
        # The restorer keeps the highest reading per stage, for the benchmark and `status`.
        assert set(r.stage_rss_mb) == stages
        assert r.stage_rss_mb["peak"] == max(res.rss_mb["peak"] for res in results)


def test_cpu_face_batch_is_one_with_the_parser_and_four_without(
    tiny_models_with_parser: TinyModels, landmarks: dict
) -> None:
    """With ParseNet on a CPU, batching the generator saves ~1 % of the time and costs ~1 GB of
    peak memory, so the automatic face batch is 1 there; without it, 4."""
    for use_parse, expected in ((True, 1), (False, 4)):
        cfg = tiny_restore_config(tiny_models_with_parser, use_parse=use_parse, face_batch=0)
        with Restorer(cfg, threads=2, detector=KnownFaces(landmarks)) as r:
            assert r.face_batch == expected


def _scaled_face(face: Face, scale: float, centre: tuple[float, float]) -> Face:
    """``face`` shrunk by ``scale`` about its box centre and moved to ``centre`` (x, y)."""
    box = face.box.astype(np.float64)
    old = np.array([(box[0] + box[2]) / 2, (box[1] + box[3]) / 2])
    new = np.array(centre)
    corners = (box.reshape(2, 2) - old) * scale + new
    lm = (face.landmarks - old) * scale + new
    return Face(corners.reshape(4).astype(np.float32), face.score, lm.astype(np.float32))


class ThreeFaces(KnownFaces):
    """The astronaut's face (the largest, up left of the centre), a smaller copy just below the
    centre and a small one near the bottom left corner, on the 512 x 512 astronaut photo."""

    def __init__(self, landmarks: dict) -> None:
        super().__init__(landmarks)
        (big,), _ = self.by_shape[(512, 512)]
        self.faces = [big, _scaled_face(big, 0.6, (280, 300)), _scaled_face(big, 0.4, (70, 440))]
        self.by_shape[(512, 512)] = (self.faces, None)


def _inner(face: Face) -> tuple[slice, slice]:
    """The middle half of a face's box, (rows, cols): what paste-back surely replaces."""
    x1, y1, x2, y2 = face.box
    w, h = (x2 - x1) / 4, (y2 - y1) / 4
    return slice(int(y1 + h), int(y2 - h)), slice(int(x1 + w), int(x2 - w))


@pytest.mark.parametrize(
    ("changes", "restored", "note"),
    [
        ({}, [0, 1, 2], None),
        ({"faces": "largest"}, [0], "3 faces found, 1 restored (restore.faces = largest)"),
        ({"faces": "center"}, [1], "3 faces found, 1 restored (restore.faces = center)"),
        ({"max_faces": 2}, [0, 1], "3 faces found, 2 restored (restore.max_faces = 2)"),
        (
            {"min_face": 20, "max_faces": 1},
            [0],
            "3 faces found, 1 restored (1 smaller than restore.min_face = 20; restore.max_faces = 1)",
        ),
    ],
)
def test_which_faces_are_restored(
    tiny_models: TinyModels,
    landmarks: dict,
    photos: list[Path],
    tmp_path: Path,
    changes: dict,
    restored: list[int],
    note: str | None,
) -> None:
    detector = ThreeFaces(landmarks)
    crops_seen: list[int] = []
    with Restorer(tiny_restore_config(tiny_models, **changes), threads=2, detector=detector) as r:
        real = r.enhancer.enhance

        def spy(crops: np.ndarray):
            crops_seen.append(len(crops))
            return real(crops)

        r.enhancer.enhance = spy  # type: ignore[method-assign]
        (res,) = list(r.restore_files([FileJob(photos[0], tmp_path / "out.png")]))
    assert res.ok
    assert res.faces == len(restored)
    assert sum(crops_seen) == len(restored)  # the faces left out are never computed
    before = cv2.imread(str(photos[0])).astype(int)
    after = cv2.imread(str(tmp_path / "out.png")).astype(int)
    for i, face in enumerate(detector.faces):
        rows, cols = _inner(face)
        changed = np.abs(after[rows, cols] - before[rows, cols]).mean()
        if i in restored:
            assert changed > 5, (i, changed)
        else:
            assert changed == 0, (i, changed)
    faces_notes = [n for n in res.notes if "found" in n]
    assert faces_notes == ([note] if note else [])


class RepeatedAndTinyFaces(KnownFaces):
    """The astronaut's face; the same face again two pixels off, as a second detector pass (or a
    tile border) reports it; and a face 6 px across near the top right corner."""

    def __init__(self, landmarks: dict) -> None:
        super().__init__(landmarks)
        (big,), _ = self.by_shape[(512, 512)]
        again = Face(big.box + np.float32([2, 1, 2, 1]), 0.95, big.landmarks + np.float32([2, 1]))
        side = float(max(big.box[2] - big.box[0], big.box[3] - big.box[1]))
        self.tiny = _scaled_face(big, 6 / side, (470, 40))
        self.faces = [big, again, self.tiny]
        self.by_shape[(512, 512)] = (self.faces, None)


def test_duplicates_restored_once_and_tiny_faces_left_alone(
    tiny_models: TinyModels, landmarks: dict, photos: list[Path], tmp_path: Path
) -> None:
    detector = RepeatedAndTinyFaces(landmarks)
    crops_seen: list[int] = []
    with Restorer(tiny_restore_config(tiny_models), threads=2, detector=detector) as r:
        real = r.enhancer.enhance

        def spy(crops: np.ndarray, *rest: object):
            crops_seen.append(len(crops))
            return real(crops, *rest)  # type: ignore[arg-type]

        r.enhancer.enhance = spy  # type: ignore[method-assign]
        (res,) = list(r.restore_files([FileJob(photos[0], tmp_path / "out.png")]))
    assert res.ok
    assert sum(crops_seen) == res.faces == 1  # the face once; the duplicate and the tiny one never computed
    duplicate = "1 duplicate detection of a face restored once (boxes overlap by IoU > 0.8)"
    tiny = "1 under 8 px in the result, too small for restoring to change"
    assert f"3 faces found, 1 restored ({duplicate}; {tiny})" in res.notes
    before = cv2.imread(str(photos[0])).astype(int)
    after = cv2.imread(str(tmp_path / "out.png")).astype(int)
    x1, y1, x2, y2 = (int(v) for v in detector.tiny.box)
    around = (slice(y1 - 2, y2 + 2), slice(x1 - 2, x2 + 2))
    assert np.array_equal(after[around], before[around])
    rows, cols = _inner(detector.faces[0])
    assert np.abs(after[rows, cols] - before[rows, cols]).mean() > 5


def test_a_redo_picking_a_face_the_photo_lacks_fails_and_writes_nothing(
    tiny_models: TinyModels, landmarks: dict, photos: list[Path], tmp_path: Path
) -> None:
    """Face numbers a redo could not check (the photo's views were no longer kept): one the photo
    lacks fails the redo with its faces named, and nothing is written; picking none restores none
    of the faces found."""
    out = tmp_path / "out"
    out.mkdir()
    jobs = [
        FileJob(photos[0], out / ".astronaut.tmp", face_ids=(0, 5)),
        FileJob(photos[1], out / ".grace.tmp", face_ids=()),
    ]
    with _restorer(tiny_models, landmarks) as r:
        results = {res.src.name: res for res in r.restore_files(jobs)}
    bad, none = results["astronaut.png"], results["grace_hopper.jpg"]
    assert not bad.ok
    assert bad.error == (
        "astronaut.png has one face, face 0; there is no face 5; nothing was restored, and the result stays as it was"
    )
    assert not (out / ".astronaut.tmp").exists()
    assert none.ok and (none.faces, none.found) == (0, 1)  # found, none restored: not "no face"


def test_a_redo_whose_model_file_cannot_load_names_the_redos_settings_and_the_file(
    tiny_models: TinyModels, landmarks: dict, photos: list[Path], tmp_path: Path
) -> None:
    """A redo's upscaler gone since it was asked for: the photo fails saying whose settings need
    it (the redo's, not its inbox's) and which file is missing."""
    from gpen_watch.catalog import registry

    label = "this redo's settings (restore.upscale=2)"
    job = FileJob(
        photos[0],
        tmp_path / ".astronaut.tmp",
        restore=tiny_restore_config(tiny_models, upscale=2),
        settings_label=label,
    )
    cfg = tiny_restore_config(tiny_models)
    with Restorer(cfg, threads=2, detector=KnownFaces(landmarks), download=False) as r:
        (res,) = list(r.restore_files([job]))
    assert not res.ok
    assert (res.error or "").startswith(f"cannot load the models of {label}: ")
    assert registry.upscaler_spec(2).filename in (res.error or "")


def test_strength_zero_one_and_half(
    tiny_models: TinyModels, landmarks: dict, photos: list[Path], tmp_path: Path
) -> None:
    outs = {}
    for strength in (None, 1.0, 0.5, 0.0):
        changes = {} if strength is None else {"strength": strength}
        dst = tmp_path / f"s{strength}.png"
        with _restorer(tiny_models, landmarks, **changes) as r:
            (res,) = list(r.restore_files([FileJob(photos[0], dst)]))
        assert res.ok
        outs[strength] = (res, cv2.imread(str(dst)).astype(int))
    before = cv2.imread(str(photos[0])).astype(int)
    res0, out0 = outs[0.0]
    # 0: the photo's own pixels, in the face too; the face was found but left alone.
    assert np.array_equal(out0, before)
    assert res0.faces == 0
    assert "1 face found, 0 restored (restore.strength = 0)" in res0.notes
    assert not any("no face found" in n for n in res0.notes)
    # 1: exactly what the engine wrote before strength existed (the default); exact, as the same
    # face batch of one runs through the same kernels in this process.
    assert np.array_equal(outs[1.0][1], outs[None][1])
    # 0.5: in the face, about half way from the photo to the full-strength result.
    x1, y1, x2, y2 = (int(v) for v in landmarks["skimage.data.astronaut"]["boxes_xyxy"][0])
    face = (slice(y1, y2), slice(x1, x2))
    full = np.abs(outs[1.0][1][face] - before[face]).mean()
    half = np.abs(outs[0.5][1][face] - before[face]).mean()
    assert full > 10
    assert 0.35 < half / full < 0.65, (half, full)


class _ParseSides(torch.nn.Module):
    """Wraps the engine's parser and records the side of each face it is given."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.sides: list[int] = []

    def forward(self, x: torch.Tensor):  # type: ignore[no-untyped-def]
        self.sides.extend([int(x.shape[-1])] * len(x))
        return self.inner(x)


@pytest.mark.slow
@pytest.mark.parametrize(("small_below", "side"), [(0, 512), (100_000, 256)])
def test_parse_small_below_parses_faces_pasted_back_small_at_256(
    tiny_models_with_parser: TinyModels,
    landmarks: dict,
    photos: list[Path],
    tmp_path: Path,
    small_below: int,
    side: int,
) -> None:
    cfg = tiny_restore_config(tiny_models_with_parser, use_parse=True, parse_small_below=small_below)
    with Restorer(cfg, threads=2, detector=KnownFaces(landmarks)) as r:
        assert r.enhancer.parser is not None
        recorder = _ParseSides(r.enhancer.parser)
        r.enhancer.parser = recorder
        (res,) = list(r.restore_files([FileJob(photos[0], tmp_path / "out.png")]))
    assert res.ok
    assert res.faces == 1
    assert recorder.sides == [side]


@pytest.mark.slow
def test_parse_precision_int8_gives_the_worker_an_int8_parser(
    tiny_models_with_parser: TinyModels,
    landmarks: dict,
    photos: list[Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from torch.ao.nn import quantized as nnq

    from gpen_watch.restore.nets.quant import int8_backend
    from gpen_watch.restore.runtime.formats import CPU_FLAGS_ENV

    if int8_backend() is None:
        pytest.skip("this torch has no int8 CPU engine")
    # As on a CPU with VNNI: without it int8 is refused (tests/test_number_formats.py).
    monkeypatch.setenv(CPU_FLAGS_ENV, "avx512_vnni")
    cfg = tiny_restore_config(tiny_models_with_parser, use_parse=True, parse_precision="int8")
    with Restorer(cfg, threads=2, detector=KnownFaces(landmarks)) as r:
        assert r.enhancer.parser is not None
        assert any(isinstance(m, nnq.Conv2d) for m in r.enhancer.parser.modules())
        assert r.engine_label.endswith(", fp32, ParseNet int8") and r.engine_note == ""
        (res,) = list(r.restore_files([FileJob(photos[0], tmp_path / "out.png")]))
    assert res.ok
    assert res.faces == 1
