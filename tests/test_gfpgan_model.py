"""GFPGAN's clean architecture (v1.3, v1.4): the released checkpoints' layout, the reference
forward pass of ../shared/fixtures (its README: weights rebuilt by rule, sha256 checked, outputs
within atol 5e-4 / rtol 1e-4, statistics within 1e-4), and the fixed noise gpen-watch runs with."""

from __future__ import annotations

import json

import pytest
import torch
from fixture_weights import FIXTURES, assert_matches, load_reference, stored_item

from gpen_watch.restore.nets.gfpgan_model import GFPGANConfig, build_gfpgan, gfpgan_state_dict_shapes

LAYOUT = FIXTURES / "gfpgan_v1.4_layout.json"
# Every kind of layer at a size two CPU cores run in milliseconds.
TINY = GFPGANConfig(size=32, style_dim=32, n_mlp=2, channel_multiplier=1, narrow=1 / 16)


def _tiny() -> torch.nn.Module:
    torch.manual_seed(0)
    model = build_gfpgan(TINY).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("bias", ".weight")) and p.ndim <= 1:
                p.normal_(0, 0.3)  # noise strengths and biases, which start at zero
    return model


def test_the_module_holds_the_released_layout_key_for_key() -> None:
    if not LAYOUT.is_file():
        pytest.skip("../shared/fixtures is not beside the repository")
    layout = json.loads(LAYOUT.read_text())
    assert layout["configuration"]["out_size"] == GFPGANConfig().size
    want = [(e["key"], tuple(e["shape"])) for e in layout["keys"]]
    assert list(gfpgan_state_dict_shapes(GFPGANConfig()).items()) == want


def test_the_stored_noise_is_used_so_a_redo_gives_the_same_face() -> None:
    model = _tiny()
    x = torch.rand(2, 3, TINY.size, TINY.size, generator=torch.Generator().manual_seed(1)) * 2 - 1
    with torch.no_grad():
        first, again = model(x), model(x)
        assert torch.equal(first, again)
        # The maps are the checkpoint's buffers: another map gives another face.
        model.stylegan_decoder.noises.noise5.add_(1.0)
        assert (model(x) - first).abs().max() > 1e-3


def _reference_model() -> tuple[torch.nn.Module, dict]:
    """The released shape holding the fixture's rebuilt weights (shared, never changed), and the
    reference file's contents."""
    ref = load_reference("gfpgan_v1.4")
    with torch.device("meta"):
        model = build_gfpgan(GFPGANConfig()).eval()
    model.load_state_dict(ref.state, strict=True, assign=True)
    return model, ref.data


def test_equals_the_reference_forward_pass_on_the_first_face() -> None:
    """The fixture's ``model(input, return_rgb=False, randomize_noise=False)[0]``, its first face
    alone: the whole image's 8x8 means, statistics and centre crop within the stated tolerances."""
    model, data = _reference_model()
    with torch.inference_mode():
        out = model(data["input"][:1])
    want = stored_item(data["outputs"]["image"], 0)
    assert_matches(out, want, atol=5e-4, stats_atol=1e-4, what="GFPGAN v1.4, first face")


@pytest.mark.slow
def test_equals_the_reference_forward_pass_with_the_noise_fixed() -> None:
    """The fixture's whole call: both faces in one batch."""
    model, data = _reference_model()
    with torch.inference_mode():
        out = model(data["input"])
    assert_matches(out, data["outputs"]["image"], atol=5e-4, stats_atol=1e-4, what="GFPGAN v1.4")
