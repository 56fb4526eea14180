"""The GFPGAN and CodeFormer reference fixtures of ../shared/fixtures (its README): the weights a
reference pass used, rebuilt from the layout by the stated rule, and the stored outputs compared.

A layout lists the state dict's keys in order; key i gets float64 normal values from a generator
seeded SEED + i, scaled by the std and shifted by the mean of the first rule clause it matches,
rounded to float32 once. The sha256 of the rebuilt tensors is checked against the one stored."""

from __future__ import annotations

import functools
import hashlib
import json
import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
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


@dataclass(frozen=True)
class Reference:
    """One reference file with the weights it was computed from. Shared by the tests that run
    one after another (``load_reference`` keeps it): read it, never change it in place."""

    data: dict
    state: dict[str, torch.Tensor]


# One family's weights (about 350 MB) kept for the next test of that family, never both.
@functools.lru_cache(maxsize=1)
def load_reference(name: str) -> Reference:
    """``<name>_ref.pt`` and its rebuilt weights (``name``: "gfpgan_v1.4" or "codeformer"), their
    digest and the rule checked, shared by the tests of that family that run one after another; a
    skip where ../shared is not beside the repository."""
    ref_path, layout_path = FIXTURES / f"{name}_ref.pt", FIXTURES / f"{name}_layout.json"
    if not (ref_path.is_file() and layout_path.is_file()):
        pytest.skip(f"../shared/fixtures ({ref_path.name}, {layout_path.name}) is not beside the repository")
    data = torch.load(ref_path, map_location="cpu", weights_only=True)
    entries = json.loads(layout_path.read_text())["keys"]
    per_key = data["rule_per_key"]
    assert per_key["key"] == [e["key"] for e in entries]
    shapes = [tuple(e["shape"]) for e in entries]
    rules = [clause(e["key"], shape) for e, shape in zip(entries, shapes, strict=True)]
    for i, (name_, mean, std) in enumerate(rules):
        assert name_ == per_key["clause"][i], entries[i]["key"]
        assert (mean, std) == (float(per_key["mean"][i]), float(per_key["std"][i])), entries[i]["key"]
    state = _rebuild(int(data["seed"]), [e["key"] for e in entries], shapes, rules)
    digest = hashlib.sha256()
    for w in state.values():
        digest.update(np.ascontiguousarray(w.numpy()).astype("<f4", copy=False))
    assert digest.hexdigest() == data["state_sha256"], "the rebuilt weights are not the reference's"
    x = torch.rand((2, 3, 512, 512), generator=torch.Generator().manual_seed(int(data["input_seed"]))) * 2 - 1
    assert torch.equal(x, data["input"])
    return Reference(data, state)


def _rebuild(
    seed: int, keys: list[str], shapes: list[tuple[int, ...]], rules: list[tuple[str, float, float]]
) -> dict[str, torch.Tensor]:
    """The rule's tensors: ``randn(S, float64) * std + mean`` rounded to float32, key i from seed + i.

    The same values in less time: the float64 draws go into a reused buffer (``randn`` is
    ``normal_`` on a new tensor, the same stream; a new buffer for each key spent as long faulting
    pages in as drawing) and are scaled and shifted in place (the same two roundings). Each key has
    its own generator, so two threads draw half the keys each, one torch thread apiece (the draw
    is serial; torch's own threads only spent time handing small tensors over). The caller's
    sha256 is the proof."""
    sizes = [math.prod(s) for s in shapes]
    halves: list[list[int]] = [[], []]
    loads = [0, 0]
    for i in sorted(range(len(keys)), key=lambda i: -sizes[i]):
        half = loads.index(min(loads))
        halves[half].append(i)
        loads[half] += sizes[i]
    state: dict[int, torch.Tensor] = {}

    def draw(indices: list[int]) -> None:
        torch.set_num_threads(1)
        scratch = torch.empty(max((sizes[i] for i in indices), default=0), dtype=torch.float64)
        for i in indices:
            _, mean, std = rules[i]
            drawn = scratch[: sizes[i]].view(shapes[i])
            drawn.normal_(generator=torch.Generator().manual_seed(seed + i))
            state[i] = drawn.mul_(std).add_(mean).to(torch.float32)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(draw, halves))
    finally:
        torch.set_num_threads(threads)
    return {key: state[i] for i, key in enumerate(keys)}


def stored_item(want: dict, item: int) -> dict:
    """A stored output's values for batch item ``item`` alone (each is per item on dim 0)."""
    return {k: v[item : item + 1] for k, v in want.items()}


def assert_matches(out: torch.Tensor, want: dict, atol: float, stats_atol: float, what: str) -> None:
    """``out`` (N, 3, 512, 512) against a stored output (crop, pool8, per-channel statistics) of N
    items (``stored_item`` for one)."""
    torch.testing.assert_close(out[:, :, 224:288, 224:288], want["crop"], atol=atol, rtol=1e-4, msg=what)
    torch.testing.assert_close(F.avg_pool2d(out, 8), want["pool8"], atol=atol, rtol=1e-4, msg=what)
    flat = out.flatten(2)
    torch.testing.assert_close(flat.amin(2), want["min"], atol=atol, rtol=1e-4, msg=what)
    torch.testing.assert_close(flat.amax(2), want["max"], atol=atol, rtol=1e-4, msg=what)
    torch.testing.assert_close(flat.mean(2), want["mean"], atol=stats_atol, rtol=0, msg=what)
    torch.testing.assert_close(flat.std(2), want["std"], atol=stats_atol, rtol=0, msg=what)
