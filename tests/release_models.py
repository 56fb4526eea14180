"""Random-weight files in the released layouts of GFPGAN and CodeFormer, saved as the releases
store them (the state dict under ``params_ema``) under the registry's file names, so they go
through the users' load path: the model store finds them, the family checks them strictly.

The values follow the fixtures' rule table (``fixture_weights.clause``: modulation biases about
1, fan-in scaled weights), drawn in float32 for speed; they are meaningless, but keep the
networks' activations in range, as trained weights would."""

from __future__ import annotations

from pathlib import Path

import torch
from fixture_weights import clause

from gpen_watch.catalog import registry


def release_state(name: str, seed: int = 0, one_code: bool = False) -> dict[str, torch.Tensor]:
    """A state dict in registry model ``name``'s released layout (GFPGAN-v1.4, -v1.3, CodeFormer).

    ``one_code``: CodeFormer's code head zeroed, so every position takes code 0. Random weights
    otherwise make the transformer's choice of code (an argmax) change with the smallest change of
    its input, and two pipelines that differ by a rounding would restore unrelated faces."""
    from gpen_watch.restore.nets.codeformer_model import codeformer_state_dict_shapes
    from gpen_watch.restore.nets.gfpgan_model import GFPGANConfig, gfpgan_state_dict_shapes

    kind = registry.get_spec(name).kind
    shapes = gfpgan_state_dict_shapes(GFPGANConfig()) if kind == "gfpgan" else codeformer_state_dict_shapes()
    g = torch.Generator().manual_seed(seed)
    state = {}
    for key, shape in shapes.items():
        _, mean, std = clause(key, shape)
        state[key] = torch.randn(shape, generator=g) * std + mean
    if one_code:
        state["idx_pred_layer.1.weight"].zero_()
    return state


def write_release_checkpoint(name: str, folder: Path, seed: int = 0, one_code: bool = False) -> Path:
    """``release_state(name)`` saved in ``folder`` under the registry's file name for ``name``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / registry.get_spec(name).filename
    torch.save({"params_ema": release_state(name, seed, one_code)}, path)
    return path
