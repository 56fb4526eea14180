"""CodeFormer: the released checkpoint's layout, and the reference forward passes of
../shared/fixtures (its README) at w = 0, 0.5 and 1: the encoder's features within 2e-4, the code
indices exactly, the images within atol 2e-3 / rtol 1e-4 and their statistics within 2e-4."""

from __future__ import annotations

import json

import pytest
import torch
from fixture_weights import FIXTURES, assert_matches, load_reference

from gpen_watch.restore.nets.codeformer_model import build_codeformer, codeformer_state_dict_shapes

LAYOUT = FIXTURES / "codeformer_layout.json"


def test_the_module_holds_the_released_layout_key_for_key() -> None:
    if not LAYOUT.is_file():
        pytest.skip("../shared/fixtures is not beside the repository")
    layout = json.loads(LAYOUT.read_text())
    assert layout["configuration"]["n_layers"] == 9
    want = {e["key"]: tuple(e["shape"]) for e in layout["keys"]}
    assert codeformer_state_dict_shapes() == want


@pytest.mark.slow
def test_equals_the_reference_forward_passes_at_each_fidelity() -> None:
    """``model(input, w=w, adain=True)`` for w = 0, 0.5, 1; then one batch whose two faces have
    weights 0 and 1, each equal to its own reference: w is a weight per face."""
    ref = load_reference("codeformer")
    model = build_codeformer().eval()
    model.load_state_dict(ref.state, strict=True)
    data = ref.data
    with torch.inference_mode():
        lq_feat, kept = model.encode(data["input"])
        torch.testing.assert_close(lq_feat, data["lq_feat"], atol=2e-4, rtol=0)
        codes = model.predict_codes(lq_feat).argmax(dim=2)
        assert torch.equal(codes, data["code_indices"]), (codes != data["code_indices"]).nonzero().tolist()
        for w in (0.0, 0.5, 1.0):
            out = model.decode(codes, lq_feat, kept, torch.full((2,), w))
            assert_matches(out, data["outputs"][f"w={w}"], atol=2e-3, stats_atol=2e-4, what=f"w={w}")
        mixed = model.decode(codes, lq_feat, kept, torch.tensor([0.0, 1.0]))
    for item, w in ((0, 0.0), (1, 1.0)):
        want = data["outputs"][f"w={w}"]
        got = mixed[item : item + 1]
        torch.testing.assert_close(
            got[:, :, 224:288, 224:288], want["crop"][item : item + 1], atol=2e-3, rtol=1e-4
        )
    # forward() is the same steps: the whole pass at w = 1 for the first face.
    with torch.inference_mode():
        whole = model(data["input"][:1], torch.tensor([1.0]))
    torch.testing.assert_close(
        whole[:, :, 224:288, 224:288], data["outputs"]["w=1.0"]["crop"][:1], atol=2e-3, rtol=1e-4
    )
