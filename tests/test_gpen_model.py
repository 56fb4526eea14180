"""GPEN generator: checkpoint layout, numerical equivalence with upstream, batching, precision."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from gpen_watch.restore.engines import gpen_family
from gpen_watch.restore.nets.gpen_model import (
    GPEN_CONFIGS,
    MODULATION_MODES,
    GPENConfig,
    build_gpen,
    gpen_state_dict_shapes,
    infer_gpen_config,
    prepare_for_inference,
)
from gpen_watch.restore.nets.gpen_ops import upfirdn2d

DATA = Path(__file__).parent / "data"
# Small enough for 2 CPU cores, yet with every kind of layer (encoder, upsampling convs, RGB skips).
# channel_multiplier only matters from 64 px up; 2 is what infer_gpen_config reports below that.
TINY = GPENConfig(size=32, style_dim=32, n_mlp=2, channel_multiplier=2, narrow=1 / 16)


@pytest.fixture(scope="module")
def ref() -> dict:
    return torch.load(DATA / "gpen_ref_s64.pt", weights_only=True)


@pytest.fixture(scope="module")
def layout() -> dict:
    return json.loads((DATA / "gpen_state_dict_layout.json").read_text())


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def _tiny_model(modulation: str = "input_scaling") -> torch.nn.Module:
    model = build_gpen(TINY, modulation=modulation).eval()
    # Random biases/noise weights so the concatenated features and every bias path matter.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("bias", "noise.weight")):
                p.normal_(0, 0.2)
    return model


def _face_batch(n: int, size: int) -> torch.Tensor:
    return torch.rand(n, 3, size, size) * 2 - 1


# --- upstream equivalence ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODULATION_MODES)
def test_matches_upstream_fixture(ref: dict, mode: str) -> None:
    model = build_gpen(GPENConfig(**ref["config"]), modulation=mode).eval()
    model.load_state_dict(ref["state_dict"], strict=True)
    with torch.no_grad():
        out = model(ref["input"])
    assert out.shape == ref["output"].shape
    diff = (out - ref["output"]).abs().max().item()
    assert diff <= 1e-4, f"{mode}: max abs diff {diff:.3g}"


def test_a_custom_checkpoint_file_loads_through_the_model_store_with_its_inferred_config(
    ref: dict, tmp_path: Path
) -> None:
    path = tmp_path / "fixture.pth"
    torch.save(ref["state_dict"], path)
    model = gpen_family.load_gpen(path)
    with torch.no_grad():
        out = model(ref["input"])
    assert (out - ref["output"]).abs().max().item() <= 1e-4


def _ref_upfirdn2d(
    x: torch.Tensor, k: torch.Tensor, up: int, down: int, pad: tuple[int, int]
) -> torch.Tensor:
    # Straight transcription of the definition: zero-insert, pad/crop, true convolution, subsample.
    n, c, h, w = x.shape
    x = x.reshape(n * c, 1, h, 1, w, 1)
    x = F.pad(x, [0, up - 1, 0, 0, 0, up - 1]).reshape(n * c, 1, h * up, w * up)
    x = F.pad(x, [pad[0], pad[1], pad[0], pad[1]])
    out = F.conv2d(x, k.flip((0, 1))[None, None])[:, :, ::down, ::down]
    return out.reshape(n, c, *out.shape[-2:])


@pytest.mark.parametrize(
    "up,down,pad",
    [
        (1, 1, (1, 1)),
        (1, 2, (2, 2)),
        (1, 2, (1, 0)),
        (2, 1, (2, 1)),
        (2, 1, (0, -1)),
        (2, 2, (1, 2)),
        (1, 1, (-1, 2)),
    ],
)
def test_upfirdn2d_matches_definition(up: int, down: int, pad: tuple[int, int]) -> None:
    x = torch.randn(2, 3, 9, 9)
    k = torch.rand(4, 4)  # asymmetric on purpose: catches a missing flip
    ours = upfirdn2d(x, k, up=up, down=down, pad=pad)
    want = _ref_upfirdn2d(x, k, up, down, pad)
    assert ours.shape == want.shape
    torch.testing.assert_close(ours, want, atol=1e-5, rtol=1e-5)


# --- checkpoint layout -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["GPEN-BFR-512", "GPEN-BFR-256", "GPEN-BFR-1024", "GPEN-BFR-2048"])
def test_state_dict_layout(layout: dict, name: str) -> None:
    entry = layout[name]
    cfg = GPEN_CONFIGS[name]
    assert cfg == GPENConfig(**entry["constructor"])
    with torch.device("meta"):
        model = build_gpen(cfg)
    got = {k: list(v.shape) for k, v in model.state_dict().items()}
    want = dict(entry["keys"])
    assert len(entry["keys"]) == len(want)
    assert sorted(got) == sorted(want)
    assert got == want
    # Blur kernels must be persistent buffers: upstream checkpoints contain them.
    assert any(k.endswith(".kernel") for k in got)


@pytest.mark.parametrize("name", ["GPEN-BFR-512", "GPEN-BFR-256", "GPEN-BFR-1024", "GPEN-BFR-2048"])
def test_param_counts(name: str) -> None:
    with torch.device("meta"):
        model = build_gpen(GPEN_CONFIGS[name])
    n = sum(p.numel() for p in model.parameters())
    want = {"GPEN-BFR-512": 71.0, "GPEN-BFR-256": 18.9, "GPEN-BFR-1024": 71.2, "GPEN-BFR-2048": 71.3}
    assert round(n / 1e6, 1) == want[name]


@pytest.mark.parametrize("name", ["GPEN-BFR-512", "GPEN-BFR-256", "GPEN-BFR-1024", "GPEN-BFR-2048"])
def test_infer_config_round_trip_official(layout: dict, name: str) -> None:
    # Shapes alone are enough: a meta state dict stands in for the real checkpoint.
    sd = {k: torch.empty(shape, device="meta") for k, shape in layout[name]["keys"]}
    assert infer_gpen_config(sd) == GPEN_CONFIGS[name]


def test_infer_config_round_trip_fixture_and_tiny(ref: dict) -> None:
    assert infer_gpen_config(ref["state_dict"]) == GPENConfig(**ref["config"])
    cfg = GPENConfig(size=64, style_dim=64, n_mlp=3, channel_multiplier=2, narrow=0.25)
    shapes = gpen_state_dict_shapes(cfg)
    assert infer_gpen_config({k: torch.empty(s, device="meta") for k, s in shapes.items()}) == cfg


def test_infer_config_rejects_foreign_state_dict(ref: dict) -> None:
    sd = dict(ref["state_dict"])
    sd.pop("generator.to_rgb1.bias")
    with pytest.raises(ValueError):
        infer_gpen_config(sd)
    with pytest.raises(ValueError):
        infer_gpen_config({"conv.weight": torch.zeros(3, 3)})


def test_save_and_load_by_path(tmp_path: Path) -> None:
    model = _tiny_model()
    path = tmp_path / "tiny.pth"
    torch.save(model.state_dict(), path)
    loaded = gpen_family.load_gpen(path)
    assert loaded.config == TINY
    x = _face_batch(1, TINY.size)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), model(x), atol=0, rtol=0)


# --- batching, memory format, precision ------------------------------------------------------------


@pytest.mark.parametrize("mode", MODULATION_MODES)
def test_batch_matches_single(mode: str) -> None:
    model = _tiny_model(mode)
    x = _face_batch(3, TINY.size)
    with torch.no_grad():
        batched = model(x)
        singles = torch.cat([model(x[i : i + 1]) for i in range(3)])
    assert batched.shape == (3, 3, TINY.size, TINY.size)
    assert (batched - singles).abs().max().item() <= 1e-5


@pytest.mark.parametrize("mode", MODULATION_MODES)
def test_fused_styled_conv_matches_op_by_op(mode: str) -> None:
    model = _tiny_model(mode)
    layer = model.generator.convs[0]  # upsampling styled conv
    x = torch.randn(2, layer.conv.in_ch, 8, 8)
    w = torch.randn(2, TINY.style_dim)
    feat = torch.randn(2, layer.conv.out_ch, 16, 16)
    with torch.no_grad():
        torch.testing.assert_close(
            layer(x, w, feat), layer.forward_reference(x, w, feat), atol=1e-5, rtol=1e-5
        )


def test_backward_works() -> None:
    # The in-place epilogues must leave autograd intact (fine-tuning, gradient checks).
    model = _tiny_model()
    model(_face_batch(2, TINY.size)).square().mean().backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)


def test_modulation_forms_agree() -> None:
    model = _tiny_model("grouped")
    x = _face_batch(2, TINY.size)
    with torch.no_grad():
        a = model(x)
        model.set_modulation("input_scaling")
        b = model(x)
    assert (a - b).abs().max().item() <= 1e-5
    with pytest.raises(ValueError):
        model.set_modulation("bogus")  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", MODULATION_MODES)
def test_channels_last_same_output(ref: dict, mode: str) -> None:
    model = build_gpen(GPENConfig(**ref["config"]), modulation=mode)
    model.load_state_dict(ref["state_dict"])
    runner = prepare_for_inference(model, "cpu", "fp32", channels_last=True)
    out = runner(ref["input"])
    assert (out - ref["output"]).abs().max().item() <= 1e-5 + 1e-4  # vs upstream
    plain = prepare_for_inference(build_gpen(GPENConfig(**ref["config"]), modulation=mode), "cpu", "fp32")
    plain.model.load_state_dict(ref["state_dict"])
    assert (out - plain(ref["input"])).abs().max().item() <= 1e-5


def test_bf16_autocast_cpu_stays_close(ref: dict) -> None:
    model = build_gpen(GPENConfig(**ref["config"]))
    model.load_state_dict(ref["state_dict"])
    runner = prepare_for_inference(model, "cpu", "bf16", channels_last=True)
    out = runner(ref["input"])
    assert out.dtype == torch.float32
    assert torch.isfinite(out).all()
    # Loose bound on a random-weight model whose output spans ~[-2.6, 2.6]; measured max 0.027-0.030,
    # mean 0.006 (i.e. <= ~4 levels of 8-bit output after x*0.5+0.5).
    err = (out - ref["output"]).abs()
    assert err.max().item() < 0.1, f"bf16 max abs err {err.max().item():.3g}"
    assert err.mean().item() < 0.02, f"bf16 mean abs err {err.mean().item():.3g}"


def test_precision_validation() -> None:
    model = build_gpen(TINY)
    with pytest.raises(ValueError):
        prepare_for_inference(model, "cpu", "fp16")
    assert prepare_for_inference(model, "cpu", "auto").precision == "fp32"


def test_rejects_wrong_input_size() -> None:
    with pytest.raises(ValueError):
        _tiny_model()(_face_batch(1, TINY.size * 2))
