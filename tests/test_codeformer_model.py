"""CodeFormer: the released checkpoint's layout, and the reference forward passes of
../shared/fixtures (its README) at w = 0, 0.5 and 1: the encoder's features within 2e-4, the code
indices exactly, the images within atol 2e-3 / rtol 1e-4 and their statistics within 2e-4. The
first face at both ends of w runs in the README's command; the rest is slow."""

from __future__ import annotations

import json

import pytest
import torch
from fixture_weights import FIXTURES, assert_matches, load_reference, stored_item

from gpen_watch.restore.nets.codeformer_model import (
    CodeFormer,
    build_codeformer,
    codeformer_state_dict_shapes,
)

LAYOUT = FIXTURES / "codeformer_layout.json"


def test_the_module_holds_the_released_layout_key_for_key() -> None:
    if not LAYOUT.is_file():
        pytest.skip("../shared/fixtures is not beside the repository")
    layout = json.loads(LAYOUT.read_text())
    assert layout["configuration"]["n_layers"] == 9
    want = {e["key"]: tuple(e["shape"]) for e in layout["keys"]}
    assert codeformer_state_dict_shapes() == want


def _reference_model() -> tuple[CodeFormer, dict]:
    """The released shape holding the fixture's rebuilt weights (shared, never changed), and the
    reference file's contents."""
    ref = load_reference("codeformer")
    with torch.device("meta"):
        model = build_codeformer().eval()
    model.load_state_dict(ref.state, strict=True, assign=True)
    return model, ref.data


def test_equals_the_reference_passes_on_the_first_face_at_fidelity_0_and_1() -> None:
    """The first face alone: its encoder features, its codes exactly, and the two ends of w
    decoded in one batch (the face twice, w = 0 and 1: w is a weight per face), each equal to
    the fixture's ``model(input, w=w, adain=True)`` for that face."""
    model, data = _reference_model()
    with torch.inference_mode():
        lq_feat, kept = model.encode(data["input"][:1])
        torch.testing.assert_close(lq_feat, data["lq_feat"][:1], atol=2e-4, rtol=0)
        codes = model.predict_codes(lq_feat).argmax(dim=2)
        want_codes = data["code_indices"][:1]
        assert torch.equal(codes, want_codes), (codes != want_codes).nonzero().tolist()
        twice = {side: feat.expand(2, -1, -1, -1) for side, feat in kept.items()}
        out = model.decode(
            codes.expand(2, -1), lq_feat.expand(2, -1, -1, -1), twice, torch.tensor([0.0, 1.0])
        )
    for row, w in enumerate((0.0, 1.0)):
        want = stored_item(data["outputs"][f"w={w}"], 0)
        assert_matches(out[row : row + 1], want, atol=2e-3, stats_atol=2e-4, what=f"first face, w={w}")


@pytest.mark.slow
def test_equals_the_reference_forward_passes_at_each_fidelity() -> None:
    """What the fast test leaves: both faces encoded in one batch (features, codes), the second
    face at w = 0 and 1 in one batch, and the fixture's whole call at w = 0.5 through forward()."""
    model, data = _reference_model()
    with torch.inference_mode():
        lq_feat, kept = model.encode(data["input"])
        torch.testing.assert_close(lq_feat, data["lq_feat"], atol=2e-4, rtol=0)
        codes = model.predict_codes(lq_feat).argmax(dim=2)
        assert torch.equal(codes, data["code_indices"]), (codes != data["code_indices"]).nonzero().tolist()
        second = {side: feat[1:].expand(2, -1, -1, -1) for side, feat in kept.items()}
        ends = model.decode(
            codes[1:].expand(2, -1), lq_feat[1:].expand(2, -1, -1, -1), second, torch.tensor([0.0, 1.0])
        )
        for row, w in enumerate((0.0, 1.0)):
            want = stored_item(data["outputs"][f"w={w}"], 1)
            assert_matches(ends[row : row + 1], want, atol=2e-3, stats_atol=2e-4, what=f"second face, w={w}")
        whole = model(data["input"], torch.full((2,), 0.5))
    assert_matches(whole, data["outputs"]["w=0.5"], atol=2e-3, stats_atol=2e-4, what="forward(), w=0.5")
