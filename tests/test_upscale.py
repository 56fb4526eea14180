"""Background upscaling (restore.upscale): the RRDBNet against the official layouts and upstream's
forward pass, tiling, loading the official files' wrappers, and the pipeline around it.

The weights are random (none can be downloaded here), saved in the official files' layout and
loaded through the loader users take. Where the faces matter, the detector is test_restorer's
KnownFaces (untrained detectors find no real face).
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from conftest import TinyModels, assert_same_up_to_rounding, cli_env, restore_command, tiny_restore_config
from PIL import Image
from service_harness import real_engine_args, services_fixture, write_atomic
from test_daemon import Service
from test_restorer import KnownFaces

from gpen_watch import config
from gpen_watch.base.errors import ConfigError, ModelError
from gpen_watch.catalog import registry
from gpen_watch.catalog.rrdbnet_config import RRDBConfig
from gpen_watch.modelstore import messages, needs
from gpen_watch.restore.api import FileJob
from gpen_watch.restore.engines import verify
from gpen_watch.restore.engines.restorer import Restorer
from gpen_watch.restore.nets.rrdbnet import build_rrdbnet, infer_rrdb_config, rrdb_state_dict_shapes
from gpen_watch.restore.runtime.device import Placement
from gpen_watch.restore.stages.enhance import OutOfMemory
from gpen_watch.restore.stages.upscale import DEFAULT_OVERLAP, Upscaler, plan_tiles

DATA = Path(__file__).parent / "data"
CPU = Placement(torch.device("cpu"), "fp32", False)
# A small network of the official architecture, for the pipeline tests (fast on a CPU).
TINY = {2: RRDBConfig(2, num_feat=8, num_block=1, num_grow_ch=4), 4: RRDBConfig(4, 8, 1, 4)}


def _layout() -> dict:
    return json.loads((DATA / "rrdbnet_state_dict_layout.json").read_text())


def _save(cfg: RRDBConfig, path: Path, wrapper: str = "params_ema", seed: int = 0) -> dict[str, torch.Tensor]:
    """Random weights for ``cfg`` written as the official files hold them (basicsr's wrapper)."""
    torch.manual_seed(seed)
    net = build_rrdbnet(cfg)
    with torch.no_grad():
        net.conv_last.bias.fill_(0.5)  # mid-grey out, so results are not clipped to black
    state = net.state_dict()
    torch.save({wrapper: state} if wrapper else state, path)
    return state


def _photo(tmp_path: Path, bgr: np.ndarray, name: str) -> Path:
    path = tmp_path / "in" / name
    path.parent.mkdir(exist_ok=True)
    cv2.imwrite(str(path), bgr)
    return path


# --- the network ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["RealESRGAN_x4plus", "RealESRGAN_x2plus", "realesrnet_x4", "realesrnet_x2"])
def test_state_dict_layout_is_the_official_one(name: str) -> None:
    """Keys, order and shapes as upstream's RRDBNet (BasicSR / GPEN sr_model) builds them for the
    released files (tests/data, dumped from upstream's code), and the config read back from them."""
    doc = _layout()
    entry = doc["layouts"][name]
    cfg = RRDBConfig(entry["scale"], entry["num_feat"], entry["num_block"], entry["num_grow_ch"])
    shapes = rrdb_state_dict_shapes(cfg)
    assert list(shapes) == doc["keys"]
    assert [list(s) for s in shapes.values()] == entry["shapes"]
    official = {k: torch.empty(s, device="meta") for k, s in zip(doc["keys"], entry["shapes"])}
    assert infer_rrdb_config(official) == cfg


def test_registry_upscalers_have_the_official_layouts() -> None:
    layouts = _layout()["layouts"]
    expected = {
        "RealESRNet-x2": ("realesrnet_x2", "realesrnet_x2.pth"),
        "RealESRNet-x4": ("realesrnet_x4", "realesrnet_x4.pth"),
        "RealESRGAN-x2plus": ("RealESRGAN_x2plus", "RealESRGAN_x2plus.pth"),
        "RealESRGAN-x4plus": ("RealESRGAN_x4plus", "RealESRGAN_x4plus.pth"),
    }
    assert tuple(expected) == registry.UPSCALER_NAMES
    for name, (layout, filename) in expected.items():
        spec = registry.get_spec(name)
        assert spec.kind == "upscaler"
        assert spec.filename == filename
        assert spec.url.endswith("/" + filename)
        assert spec.rrdb is not None
        assert (spec.rrdb.scale, spec.rrdb.num_feat) == (
            layouts[layout]["scale"],
            layouts[layout]["num_feat"],
        )
        # Nothing published to pin them by: unpinned, never an invented digest.
        assert (spec.size_bytes, spec.sha256) == (None, None)
    assert registry.upscaler_spec(2).name == "RealESRNet-x2"
    assert registry.upscaler_spec(4).name == "RealESRNet-x4"
    with pytest.raises(
        ModelError, match=re.escape("RealESRGAN-x2plus upscales x2, but restore.upscale is 4")
    ):
        registry.upscaler_spec(4, "RealESRGAN-x2plus")


@pytest.mark.parametrize("scale", [2, 4])
def test_forward_matches_upstream(scale: int) -> None:
    """Upstream's RRDBNet (GPEN sr_model) on random weights and input, saved in tests/data; ours
    with the same weights gives the same output."""
    ref = torch.load(DATA / "rrdbnet_ref_small.pt", weights_only=True)[f"x{scale}"]
    state = ref["state_dict"]["params_ema"]
    net = build_rrdbnet(infer_rrdb_config(state)).eval()
    net.load_state_dict(state, strict=True)
    with torch.no_grad():
        out = net(ref["input"])
    assert out.shape == ref["output"].shape == (1, 3, 22 * scale, 18 * scale)
    assert torch.allclose(out, ref["output"], rtol=0, atol=1e-6)


# --- loading the official files -------------------------------------------------------------------


def test_official_files_load_by_name_with_their_wrappers(tmp_path: Path) -> None:
    """Full-size random weights in each file's layout, found in restore.model_dir under the
    official file names: params_ema is taken over params, as upstream loads them."""
    x2 = registry.get_spec("RealESRNet-x2")
    state = _save(RRDBConfig(2, num_feat=32), tmp_path / "ema.pth")
    other = {k: torch.zeros_like(v) for k, v in state.items()}
    torch.save({"params": other, "params_ema": state}, tmp_path / x2.filename)
    net = verify.load_upscaler(2, "", model_dir=tmp_path, download=False)
    assert net.config == RRDBConfig(2, num_feat=32)
    assert torch.equal(net.state_dict()["conv_first.weight"], state["conv_first.weight"])

    # The Real-ESRGAN release's x4 file (64 features), wrapped in "params" only.
    _save(RRDBConfig(4, num_feat=64), tmp_path / "RealESRGAN_x4plus.pth", wrapper="params")
    net = verify.load_upscaler(4, "RealESRGAN-x4plus", model_dir=tmp_path, download=False)
    assert net.config == RRDBConfig(4, num_feat=64)
    # `models verify` checks the same way.
    verify.verify_file(registry.get_spec("RealESRGAN-x4plus"), tmp_path / "RealESRGAN_x4plus.pth")


def test_wrong_files_are_refused_naming_them(tmp_path: Path, tiny_models: TinyModels) -> None:
    x4 = tmp_path / "x4.pth"
    _save(TINY[4], x4)
    with pytest.raises(ModelError) as err:
        verify.load_upscaler(2, str(x4))
    assert str(x4) in str(err.value)
    assert "an x4 upscaler, but restore.upscale is 2" in str(err.value)
    # A GPEN generator is no upscaler.
    with pytest.raises(ModelError, match="not an RRDBNet upscaler checkpoint"):
        verify.load_upscaler(2, str(tiny_models.gpen))
    with pytest.raises(
        ModelError, match=r"missing.pth: no such file \(--upscale-model, restore.upscale_model\)"
    ):
        verify.load_upscaler(2, str(tmp_path / "missing.pth"))
    with pytest.raises(ModelError, match=r"model RealESRNet-x4 \(realesrnet_x4\.pth\) not found"):
        verify.load_upscaler(4, "", model_dir=tmp_path / "empty", download=False)


# --- tiling -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("h", "w", "tile", "overlap"), [(97, 131, 24, 8), (10, 300, 64, 16), (50, 50, 64, 16)]
)
def test_tiles_cover_every_pixel_once_with_context(h: int, w: int, tile: int, overlap: int) -> None:
    win, tiles = plan_tiles(h, w, tile, overlap)
    seen = np.zeros((h, w), dtype=int)
    for t in tiles:
        seen[t.y0 : t.y1, t.x0 : t.x1] += 1
        assert t.wy >= 0
        assert t.wy + win[0] <= h
        assert t.wx >= 0
        assert t.wx + win[1] <= w
        # At least `overlap` pixels of context inside the window, except at the photo's edge.
        assert t.wy == 0 or t.y0 - t.wy >= overlap
        assert t.wx == 0 or t.x0 - t.wx >= overlap
        assert t.wy + win[0] == h or t.wy + win[0] - t.y1 >= overlap
        assert t.wx + win[1] == w or t.wx + win[1] - t.x1 >= overlap
    assert (seen == 1).all()


@pytest.mark.parametrize("scale", [2, 4])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_tiled_equals_untiled_where_the_overlap_holds_the_receptive_field(scale: int, dtype: type) -> None:
    """Each kept pixel saw everything it would have seen in one pass, so tiled and untiled agree
    up to float32 rounding: the tiles' convolutions run on other shapes and batches, for which
    oneDNN may pick other kernels (on AMD EPYC it does), and a value on a rounding boundary can
    then come out one level apart (conftest.same_up_to_rounding). Too small an overlap differs by
    more (2 levels or far more at 8 px of the x2 model's 38). Odd sizes, so the x2 model's
    mirrored pad row and column are in play too."""
    cfg = TINY[scale]
    torch.manual_seed(1)
    net = build_rrdbnet(cfg)
    with torch.no_grad():
        net.conv_last.bias.fill_(0.5)  # mid-grey out: unclipped, so every value can differ
    rng = np.random.default_rng(0)
    peak = np.iinfo(dtype).max
    pixels = rng.integers(0, peak + 1, (53, 71, 3)).astype(dtype)
    whole = Upscaler(net, CPU, tile=1000, overlap=0).upscale(pixels)
    tiled = Upscaler(net, CPU, tile=16, overlap=cfg.receptive_radius, batch=3).upscale(pixels)
    assert whole is not None
    assert tiled is not None
    assert whole.shape == (53 * scale, 71 * scale, 3)
    assert whole.dtype == dtype
    assert ((whole > 0) & (whole < peak)).mean() > 0.99
    assert_same_up_to_rounding(tiled, whole)


@pytest.mark.slow
@pytest.mark.parametrize("scale", [2, 4])
def test_tiled_full_size_network_within_one_level(scale: int, astronaut_bgr: np.ndarray) -> None:
    """The released networks' receptive field (about 350 px at x4, 700 at x2) is far larger than
    any practical overlap; with the default one the seams differ from an untiled pass by at most
    one level (of 255) on under 0.1 % of the pixels (random weights of the full architecture)."""
    torch.manual_seed(0)
    net = build_rrdbnet(RRDBConfig(scale, num_feat=32))
    with torch.no_grad():
        net.conv_last.bias.fill_(0.5)
    crop = np.ascontiguousarray(astronaut_bgr[100:180, 150:230])
    whole = Upscaler(net, CPU, tile=1000, overlap=0).upscale(crop)
    tiled = Upscaler(net, CPU, tile=40, overlap=DEFAULT_OVERLAP).upscale(crop)
    assert whole is not None
    assert tiled is not None
    # Not clipped flat, where differences would hide.
    assert ((whole == 0) | (whole == 255)).mean() < 0.5
    assert whole.std() > 20
    diff = np.abs(tiled.astype(int) - whole)
    assert diff.max() <= 1
    assert (diff > 0).mean() < 1e-3


def test_stops_between_batches() -> None:
    net = build_rrdbnet(TINY[2])
    calls = [0]

    def stop() -> bool:
        calls[0] += 1
        return calls[0] > 2

    up = Upscaler(net, CPU, tile=16, overlap=4)
    assert up.upscale(np.zeros((64, 64, 3), np.uint8), stop) is None
    assert calls[0] == 3


# --- the pipeline -----------------------------------------------------------------------------------


@pytest.fixture()
def tiny_x2(tmp_path: Path) -> Path:
    path = tmp_path / "tiny-rrdb-x2.pth"
    _save(TINY[2], path)
    return path


services = services_fixture(Service)


def _restorer(models: TinyModels, landmarks: dict, **changes: object) -> Restorer:
    return Restorer(tiny_restore_config(models, **changes), threads=2, detector=KnownFaces(landmarks))


def test_faces_are_restored_into_the_upscaled_photo(
    tiny_models: TinyModels, landmarks: dict, astronaut_bgr: np.ndarray, tiny_x2: Path, tmp_path: Path
) -> None:
    src = _photo(tmp_path, astronaut_bgr, "astronaut.png")
    dst = tmp_path / "out.png"
    with _restorer(tiny_models, landmarks, upscale=2, upscale_model=str(tiny_x2)) as r:
        (res,) = r.restore_files([FileJob(src, dst)])
        # Its heartbeat's progress: the detection, each tile batch and the face batch are steps, so
        # an upscale that outlasts workers.image_timeout is told from a hung worker.
        assert r.steps >= 3
    assert res.ok, res.error
    assert res.faces == 1, res.error
    assert "upscaled x2" in res.notes
    assert (res.width, res.height) == (1024, 1024)
    assert "upscale" in res.timings
    after = cv2.imread(str(dst))
    assert after.shape == (1024, 1024, 3)
    # The background is the upscaler's output (PNG is lossless), up to rounding: the restorer ran
    # it on its own threads...
    background = Upscaler(verify.load_upscaler(2, str(tiny_x2)), CPU).upscale(astronaut_bgr)
    assert background is not None
    assert_same_up_to_rounding(after[800:], background[800:])
    assert_same_up_to_rounding(after[:, 840:], background[:, 840:])
    # ...and the face, at twice its box, is the (random) generator's, pasted at the upscaled geometry.
    x1, y1, x2, y2 = (int(2 * v) for v in landmarks["skimage.data.astronaut"]["boxes_xyxy"][0])
    assert np.abs(after[y1:y2, x1:x2].astype(int) - background[y1:y2, x1:x2]).mean() > 10


def test_a_photo_without_faces_is_upscaled_with_its_metadata(
    tiny_models: TinyModels, landmarks: dict, tiny_x2: Path, tmp_path: Path
) -> None:
    """Odd size, JPEG with DPI and EXIF pixel dimensions: re-encoded at twice the size (no verbatim
    copy), the DPI doubled so the print size stays, EXIF telling the new size."""
    src = tmp_path / "in" / "plain.jpg"
    src.parent.mkdir()
    ramp = np.linspace(0, 255, 63 * 47 * 3).reshape(47, 63, 3).astype(np.uint8)
    exif = Image.Exif()
    exif[0x010F] = "TestCam"  # Make
    exif.get_ifd(0x8769)[0xA002], exif.get_ifd(0x8769)[0xA003] = 63, 47
    Image.fromarray(ramp).save(src, dpi=(100, 100), exif=exif, quality=95)
    dst = tmp_path / "plain.jpg"
    with _restorer(tiny_models, landmarks, upscale=2, upscale_model=str(tiny_x2)) as r:
        (res,) = r.restore_files([FileJob(src, dst)])
    assert res.ok, res.error
    assert res.faces == 0
    assert "upscaled x2" in res.notes
    assert "no face found" in res.notes
    assert not any("passed through unchanged" in n for n in res.notes)
    with Image.open(dst) as out:
        assert out.size == (126, 94)
        assert out.info["dpi"] == pytest.approx((200, 200), abs=0.5)
        got = out.getexif()
        assert got[0x010F] == "TestCam"
        assert (got.get_ifd(0x8769)[0xA002], got.get_ifd(0x8769)[0xA003]) == (126, 94)


def test_sixteen_bit_with_alpha_stays_so_at_the_upscaled_size(
    tiny_models: TinyModels, landmarks: dict, tiny_x2: Path, tmp_path: Path
) -> None:
    src = tmp_path / "in" / "deep.png"
    src.parent.mkdir()
    rng = np.random.default_rng(0)
    bgra = rng.integers(0, 65536, (30, 40, 4)).astype(np.uint16)
    cv2.imwrite(str(src), bgra)
    dst = tmp_path / "deep.png"
    with _restorer(tiny_models, landmarks, upscale=2, upscale_model=str(tiny_x2)) as r:
        (res,) = r.restore_files([FileJob(src, dst)])
    assert res.ok, res.error
    out = cv2.imread(str(dst), cv2.IMREAD_UNCHANGED)
    assert out.shape == (60, 80, 4)
    assert out.dtype == np.uint16
    # The alpha plane is the original's, resized (not the upscaler's: it has none).
    assert np.abs(out[..., 3].astype(int) - cv2.resize(bgra[..., 3], (80, 60))).max() <= 1


def test_pre_scaling_comes_first(
    tiny_models: TinyModels, landmarks: dict, astronaut_bgr: np.ndarray, tiny_x2: Path, tmp_path: Path
) -> None:
    """The rule: pre-scale to restore.max_side, then upscale, so the result's long side is at
    most max_side * upscale (here 256 * 2, from a 512 px photo)."""
    src = _photo(tmp_path, astronaut_bgr, "astronaut.png")
    with _restorer(tiny_models, landmarks, upscale=2, upscale_model=str(tiny_x2), max_side=256) as r:
        (res,) = r.restore_files([FileJob(src, tmp_path / "out.png")])
    assert res.ok, res.error
    assert "pre-scaled from 512x512 to 256x256" in res.notes
    assert "upscaled x2" in res.notes
    assert (res.width, res.height) == (512, 512)


def test_an_upscaled_result_too_large_for_webp_is_prescaled_to_fit(
    tiny_models: TinyModels, landmarks: dict, tiny_x2: Path, tmp_path: Path
) -> None:
    """Upscaled x2 with pre-scaling off, a 9000 px photo would be 18,000 px, over WebP's 16,383:
    it is decoded at 8191 px instead, so the result fits, and the notes say why."""
    src = tmp_path / "wide.png"
    cv2.imwrite(str(src), np.full((40, 9000, 3), 128, np.uint8))
    tiny_x2_webp = {"upscale": 2, "upscale_model": str(tiny_x2), "max_side": 0}
    with _restorer(tiny_models, landmarks, **tiny_x2_webp) as r:
        (res,) = r.restore_files([FileJob(src, tmp_path / "out.webp", format="webp")])
    assert res.ok, res.error
    assert "pre-scaled from 9000x40 to 8191x36" in res.notes
    assert any("the result, upscaled x2, fits WebP's 16,383 px a side" in n for n in res.notes)
    assert (res.width, res.height) == (16382, 72)


def test_upscale_off_changes_nothing(
    tiny_models: TinyModels, landmarks: dict, astronaut_bgr: np.ndarray, tmp_path: Path
) -> None:
    src = _photo(tmp_path, astronaut_bgr, "astronaut.png")
    with _restorer(tiny_models, landmarks) as r:
        assert r.upscaler is None
        (res,) = r.restore_files([FileJob(src, tmp_path / "out.png")])
    assert res.ok
    assert (res.width, res.height) == (512, 512)
    assert not any("upscaled" in n for n in res.notes)


@pytest.mark.slow
def test_restore_command_line_upscales(tiny_models: TinyModels, tmp_path: Path) -> None:
    model = tmp_path / "tiny-x4.pth"
    _save(TINY[4], model)
    src = tmp_path / "in"
    src.mkdir()
    cv2.imwrite(str(src / "small.png"), np.full((40, 30, 3), 128, np.uint8))
    out = tmp_path / "out"
    cmd = restore_command(
        tiny_models, str(src), "-o", str(out), "--no-parse", "--upscale", "4", "--upscale-model", str(model)
    )
    done = subprocess.run(cmd, env=cli_env(tiny_models), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    with Image.open(out / "small.png") as im:
        assert im.size == (120, 160)


@pytest.mark.slow
def test_the_service_upscales_with_the_setting(
    services: Callable[..., Service], tiny_models: TinyModels, tiny_x2: Path
) -> None:
    """`gpen-watch run --upscale 2`: the start-up check finds the upscaler file, the worker loads
    it and says so, and the result in the outbox is twice the size."""
    svc = services(
        *real_engine_args(tiny_models), "--upscale", "2", "--upscale-model", str(tiny_x2), fake=False
    )
    svc.start()
    ok, png = cv2.imencode(".png", np.full((36, 50, 3), 90, np.uint8))
    assert ok
    write_atomic(svc.inbox / "small.png", png.tobytes())
    svc.wait_done(1, timeout=180)
    with Image.open(svc.outbox / "small.png") as im:
        assert im.size == (100, 72)
    assert "background upscaled x2" in svc.log_text(), svc.logs()


# --- settings ---------------------------------------------------------------------------------------


def test_settings_are_checked_with_their_names(tmp_path: Path) -> None:
    assert config.Config().restore.upscale == 1
    cfg = config.load(tmp_path / "none.toml", {"restore.upscale": "4"})
    assert cfg.restore.upscale == 4
    with pytest.raises(ConfigError, match=r"restore.upscale: must be 1 \(off\), 2 or 4"):
        config.load(tmp_path / "none.toml", {"restore.upscale": "3"})
    with pytest.raises(
        ConfigError,
        match=re.escape("restore.upscale_model: RealESRGAN-x4plus upscales x4, but restore.upscale is 2"),
    ):
        config.load(
            tmp_path / "none.toml", {"restore.upscale": 2, "restore.upscale_model": "RealESRGAN-x4plus"}
        )
    with pytest.raises(ConfigError, match=re.escape("restore.upscale_model: must be empty")):
        config.load(tmp_path / "none.toml", {"restore.upscale": 2, "restore.upscale_model": "ESRGAN"})


def test_the_upscaler_file_is_needed_only_when_upscaling(tmp_path: Path) -> None:
    """So `models fetch` and the service's start-up download it, and only then."""
    base = config.RestoreConfig()
    assert "upscaler" not in [n.role for n in needs.needs(base)]
    four = config.RestoreConfig(upscale=4)
    assert [s.name for s in needs.needed_specs(four)][-1] == "RealESRNet-x4"
    own = config.RestoreConfig(upscale=2, upscale_model=str(tmp_path / "mine.pth"))
    found = needs.check(own, env={})
    assert "restore.upscale_model: no such file" in messages.missing_block(found)


class _OutOfMemoryAbove(torch.nn.Module):
    """The network, failing as CUDA does when a batch holds more than ``limit`` windows (CUDA is
    the edge that cannot exist here)."""

    def __init__(self, net: torch.nn.Module, limit: int) -> None:
        super().__init__()
        self.net, self.limit, self.batches = net, limit, []  # type: ignore[var-annotated]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.batches.append(len(x))
        if len(x) > self.limit:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (test)")
        out: torch.Tensor = self.net(x)
        return out


def test_out_of_memory_halves_the_batch_then_gives_up() -> None:
    net = build_rrdbnet(TINY[2])
    pixels = np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    expected = Upscaler(net, CPU, tile=16, overlap=4).upscale(pixels)
    up = Upscaler(net, CPU, tile=16, overlap=4, batch=8)
    spy = _OutOfMemoryAbove(net, limit=2)
    up.net = spy  # type: ignore[assignment]
    got = up.upscale(pixels)
    assert got is not None
    assert expected is not None
    # Batches of 2 windows against 1: other kernels, the same result up to rounding.
    assert_same_up_to_rounding(got, expected)
    assert spy.batches[:3] == [8, 4, 2]
    assert up.batch == 2
    up.net = _OutOfMemoryAbove(net, limit=0)  # type: ignore[assignment]
    with pytest.raises(OutOfMemory):
        up.upscale(pixels)


def test_a_photo_the_upscaler_cannot_fit_fails_as_out_of_memory(
    tiny_models: TinyModels, landmarks: dict, astronaut_bgr: np.ndarray, tiny_x2: Path, tmp_path: Path
) -> None:
    """So the worker pool's out-of-memory retry (smaller pre-scale) takes it, as for the generator."""
    src = _photo(tmp_path, astronaut_bgr, "astronaut.png")
    with _restorer(tiny_models, landmarks, upscale=2, upscale_model=str(tiny_x2)) as r:
        assert r.upscaler is not None
        r.upscaler.net = _OutOfMemoryAbove(r.upscaler.net, limit=0)  # type: ignore[assignment]
        (res,) = r.restore_files([FileJob(src, tmp_path / "out.png")])
    assert not res.ok
    assert res.out_of_memory
    assert res.error == "out of GPU memory upscaling the photo even one tile at a time"
    assert not (tmp_path / "out.png").exists()


def test_reduced_precision_runs_the_same_tiles() -> None:
    """bf16 autocast, as on a GPU that has it (CPU autocast runs the same code path)."""
    net = build_rrdbnet(TINY[4])
    pixels = np.random.default_rng(0).integers(0, 256, (40, 40, 3), dtype=np.uint8)
    fp32 = Upscaler(net, CPU, tile=16, overlap=8).upscale(pixels)
    bf16 = Upscaler(net, Placement(torch.device("cpu"), "bf16", False), tile=16, overlap=8).upscale(pixels)
    assert fp32 is not None
    assert bf16 is not None
    assert bf16.shape == fp32.shape
    assert np.abs(bf16.astype(int) - fp32).mean() < 3
