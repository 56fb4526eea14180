"""GFPGAN and CodeFormer through the ONNX Runtime engine: each family's network exported as the
engine exports it (``onnx_face_model.load_onnx_face``), run on the CPU provider with the weights of
../shared/fixtures' reference passes, gives the upstream reference's outputs within the fixtures'
tolerances (their README: float32 rounding, atol 5e-4 for GFPGAN, 2e-3 for CodeFormer whose w = 1
outliers reach 25). CodeFormer's w is an input of the one export: the three weights, and a batch
mixing two, run on the same session.

Slow: each export takes one to two minutes on 2 cores and writes a file of the weights' size.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

import torch
from fixture_weights import assert_matches, load_reference

from gpen_watch.restore.engines.onnx_export import FIDELITY_NAME, INPUT_NAME
from gpen_watch.restore.engines.onnx_face_model import load_onnx_face

pytestmark = pytest.mark.slow


def _weights_file(state: dict[str, torch.Tensor], folder: Path, name: str) -> Path:
    path = folder / name
    torch.save({"params_ema": state}, path)
    return path


def test_gfpgan_exported_gives_the_reference_output(tmp_path: Path) -> None:
    from gpen_watch.restore.engines.gfpgan_family import load_gfpgan

    ref = load_reference("gfpgan_v1.4")
    path = _weights_file(ref.state, tmp_path, "GFPGANv1.4.pth")
    face = load_onnx_face(path, lambda: load_gfpgan(path, "GFPGAN-v1.4"), "cpu")
    assert face.export.exported and face.size == 512 and face.fidelity is None
    assert [i.name for i in face.session.get_inputs()] == [INPUT_NAME]
    out = face(ref.data["input"])
    assert_matches(out, ref.data["outputs"]["image"], atol=5e-4, stats_atol=1e-4, what="GFPGAN through ONNX")


def test_codeformer_exported_takes_its_fidelity_as_an_input(tmp_path: Path) -> None:
    from gpen_watch.restore.engines.codeformer_family import load_codeformer

    ref = load_reference("codeformer")
    path = _weights_file(ref.state, tmp_path, "codeformer.pth")
    face = load_onnx_face(path, lambda: load_codeformer(path, "CodeFormer"), "cpu", fidelity=0.5)
    assert [i.name for i in face.session.get_inputs()] == [INPUT_NAME, FIDELITY_NAME]
    x = ref.data["input"]
    for w in (0.0, 0.5, 1.0):
        out = face(x, fidelity=torch.full((2,), w))
        assert_matches(out, ref.data["outputs"][f"w={w}"], atol=2e-3, stats_atol=2e-4, what=f"ONNX, w={w}")
    # Without weights, the default it was opened with; one face per weight in a batch.
    assert_matches(face(x), ref.data["outputs"]["w=0.5"], atol=2e-3, stats_atol=2e-4, what="ONNX, default")
    mixed = face(x, fidelity=torch.tensor([1.0, 0.0]))
    for item, w in ((0, 1.0), (1, 0.0)):
        want = ref.data["outputs"][f"w={w}"]["crop"][item : item + 1]
        torch.testing.assert_close(mixed[item : item + 1, :, 224:288, 224:288], want, atol=2e-3, rtol=1e-4)
