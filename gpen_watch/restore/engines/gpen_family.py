"""The GPEN family (``registry.FACE_FAMILIES``): GPEN generators built, checked and loaded from
the registry's checkpoints or from a file, and run by the enhancer as a ``GPENRunner``."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor, nn

from gpen_watch.base.errors import ModelError
from gpen_watch.catalog.checkpoint_keys import read_state_keys
from gpen_watch.catalog.face_files import not_a_face_model
from gpen_watch.catalog.model_spec import ModelSpec
from gpen_watch.catalog.registry import GPEN_CONFIGS, family_of_keys
from gpen_watch.restore.engines.verify import adopt_state, load_checkpoint, model_file
from gpen_watch.restore.nets.gpen_model import (
    GPEN,
    GPENConfig,
    GPENRunner,
    build_gpen,
    infer_gpen_config,
    prepare_for_inference,
)
from gpen_watch.restore.runtime.device import Placement
from gpen_watch.restore.runtime.face_model import FaceFamilyImpl


class GPENFamily:
    """``FaceFamilyImpl`` for GPEN checkpoints (registry kind "gpen")."""

    def build(self, spec: ModelSpec, device: str | torch.device = "cpu") -> nn.Module:
        return build_gpen(GPEN_CONFIGS[spec.name]).to(device)

    def load_file(self, spec: ModelSpec, path: Path, device: str | torch.device = "cpu") -> nn.Module:
        return gpen_from_state(GPEN_CONFIGS[spec.name], load_checkpoint(path, spec.name), path, device)

    def load(self, model: str, model_dir: Path | None, place: Placement, download: bool) -> GPENRunner:
        gpen = load_gpen(model, model_dir=model_dir, device=str(place.device), download=download)
        return runner(gpen, place)

    def weights_file(self, model: str, model_dir: Path | None, download: bool) -> Path:
        return gpen_file(model, model_dir, download)

    def network(self, model: str, path: Path) -> nn.Module:
        # A registry name keeps its fixed shape; a file's is read from its keys.
        if model in GPEN_CONFIGS:
            return gpen_from_state(GPEN_CONFIGS[model], load_checkpoint(path, model), path, "cpu")
        return load_gpen(path, device="cpu", download=False)


GPEN_FAMILY: FaceFamilyImpl = GPENFamily()


def runner(gpen: GPEN, place: Placement) -> GPENRunner:
    """``gpen`` ready for the enhancer on ``place`` (its device, precision and memory format)."""
    return prepare_for_inference(gpen, place.device, place.precision, place.channels_last)


def gpen_from_state(
    cfg: GPENConfig, state: dict[str, Tensor], path: Path, device: str | torch.device
) -> GPEN:
    """Build on the meta device and adopt the checkpoint's tensors (``verify.adopt_state``)."""
    return adopt_state(lambda: build_gpen(cfg), state, path, device)


def load_gpen(
    model: str | Path,
    model_dir: Path | None = None,
    device: str | torch.device = "cpu",
    download: bool = True,
) -> GPEN:
    """A GPEN generator in eval mode.

    ``model`` is a registry name ("GPEN-BFR-512"), whose fixed configuration is used, or a path to a
    ``.pth`` file, whose configuration is inferred from its state dict (custom or small checkpoints).
    """
    path, spec = _gpen_file(model, model_dir, download)
    if spec is not None:
        return gpen_from_state(GPEN_CONFIGS[spec.name], load_checkpoint(path, spec.name), path, device)
    state = load_checkpoint(path)
    try:
        cfg = infer_gpen_config(state)
    except ModelError:
        raise
    except Exception as exc:
        if family_of_keys(state) is None:
            # A file of no face family is read as GPEN (``registry.file_family``): say what it is.
            found = read_state_keys(path)
            container = found.container if found is not None else None
            raise ModelError(not_a_face_model(path, list(state), container)) from None
        raise ModelError(f"{path}: not a GPEN checkpoint ({exc})") from exc
    return gpen_from_state(cfg, state, path, device)


def gpen_file(model: str | Path, model_dir: Path | None = None, download: bool = True) -> Path:
    """The weights file restore.model = ``model`` names (fetched for a registry name as
    ``load_gpen`` would), without loading it: what the onnx engine exports."""
    return _gpen_file(model, model_dir, download)[0]


def _gpen_file(model: str | Path, model_dir: Path | None, download: bool) -> tuple[Path, ModelSpec | None]:
    """The file, and the registry entry when ``model`` is a registry name; ModelError when
    ``model`` names neither a GPEN checkpoint of the registry nor a file."""
    return model_file(model, "gpen", "GPEN", model_dir, download)
