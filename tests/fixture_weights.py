"""The GFPGAN and CodeFormer reference fixtures of ../shared/fixtures (its README): the weights a
reference pass used, rebuilt from the layout by the stated rule, and the stored outputs compared.

A layout lists the state dict's keys in order; key i gets float64 normal values from a generator
seeded SEED + i, scaled by the std and shifted by the mean of the first rule clause it matches,
rounded to float32 once. The sha256 of the rebuilt tensors is checked against the one stored."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures"


def clause(key: str, shape: tuple[int, ...]) -> tuple[str, float, float]:
    """(clause, mean, std) of the rule for the tensor ``key`` of ``shape``."""
    numel = math.prod(shape)
    if key.endswith("modulation.bias"):
        return "R1", 1.0, 0.1
    if key.endswith("bias"):
        return "R2", 0.0, 0.1
    if ".noises.noise" in key or "constant_input" in key:
        return "R3", 0.0, 1.0
    if numel == 1:
        return "R4", 0.0, 0.1
    if len(shape) == 1:
        return "R5", 1.0, 0.1
    if len(shape) == 5:
        return "R6", 0.0, 1.0 / math.sqrt(math.prod(shape[2:]))
    return "R7", 0.0, 1.0 / math.sqrt(math.prod(shape[1:]))


@dataclass
class Reference:
    """One reference file with the weights it was computed from."""

    data: dict
    state: dict[str, torch.Tensor]


def load_reference(name: str) -> Reference:
    """``<name>_ref.pt`` and its rebuilt weights (``name``: "gfpgan_v1.4" or "codeformer"), their
    digest and the rule checked; a skip where ../shared is not beside the repository."""
    ref_path, layout_path = FIXTURES / f"{name}_ref.pt", FIXTURES / f"{name}_layout.json"
    if not (ref_path.is_file() and layout_path.is_file()):
        pytest.skip(f"../shared/fixtures ({ref_path.name}, {layout_path.name}) is not beside the repository")
    data = torch.load(ref_path, map_location="cpu", weights_only=True)
    entries = json.loads(layout_path.read_text())["keys"]
    per_key = data["rule_per_key"]
    assert per_key["key"] == [e["key"] for e in entries]
    digest = hashlib.sha256()
    state: dict[str, torch.Tensor] = {}
    for i, entry in enumerate(entries):
        key, shape = entry["key"], tuple(entry["shape"])
        name_, mean, std = clause(key, shape)
        assert name_ == per_key["clause"][i], key
        assert (mean, std) == (float(per_key["mean"][i]), float(per_key["std"][i])), key
        g = torch.Generator().manual_seed(int(data["seed"]) + i)
        w = (torch.randn(shape, generator=g, dtype=torch.float64) * std + mean).to(torch.float32)
        digest.update(w.contiguous().numpy().astype("<f4").tobytes())
        state[key] = w
    assert digest.hexdigest() == data["state_sha256"], "the rebuilt weights are not the reference's"
    x = torch.rand((2, 3, 512, 512), generator=torch.Generator().manual_seed(int(data["input_seed"]))) * 2 - 1
    assert torch.equal(x, data["input"])
    return Reference(data, state)


def assert_matches(out: torch.Tensor, want: dict, atol: float, stats_atol: float, what: str) -> None:
    """``out`` (2, 3, 512, 512) against a stored output (crop, pool8, per-channel statistics)."""
    torch.testing.assert_close(out[:, :, 224:288, 224:288], want["crop"], atol=atol, rtol=1e-4, msg=what)
    torch.testing.assert_close(F.avg_pool2d(out, 8), want["pool8"], atol=atol, rtol=1e-4, msg=what)
    flat = out.flatten(2)
    torch.testing.assert_close(flat.amin(2), want["min"], atol=atol, rtol=1e-4, msg=what)
    torch.testing.assert_close(flat.amax(2), want["max"], atol=atol, rtol=1e-4, msg=what)
    torch.testing.assert_close(flat.mean(2), want["mean"], atol=stats_atol, rtol=0, msg=what)
    torch.testing.assert_close(flat.std(2), want["std"], atol=stats_atol, rtol=0, msg=what)
