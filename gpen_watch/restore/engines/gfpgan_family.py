"""The GFPGAN family (``registry.FACE_FAMILIES``): the released v1.3 and v1.4 networks
(``nets.gfpgan_model``) built, checked and loaded from their checkpoints, strictly, and run by the
enhancer as a ``FaceRunner``. The decoder's noise is the checkpoint's stored maps, so a photo
restored twice comes out the same (docs/models.md)."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from gpen_watch.catalog.registry import ModelSpec
from gpen_watch.restore.engines.verify import adopt_state, load_checkpoint, model_file
from gpen_watch.restore.nets.gfpgan_model import GFPGAN, GFPGANConfig, build_gfpgan
from gpen_watch.restore.nets.runner import FaceRunner, prepare_for_inference
from gpen_watch.restore.runtime.device import Placement
from gpen_watch.restore.runtime.face_model import FaceFamilyImpl


class GFPGANFamily:
    """``FaceFamilyImpl`` for GFPGAN's clean checkpoints (registry kind "gfpgan")."""

    def build(self, spec: ModelSpec, device: str | torch.device = "cpu") -> nn.Module:
        return build_gfpgan(GFPGANConfig()).to(device)

    def load_file(self, spec: ModelSpec, path: Path, device: str | torch.device = "cpu") -> nn.Module:
        return load_gfpgan(path, spec.name, device)

    def load(self, model: str, model_dir: Path | None, place: Placement, download: bool) -> FaceRunner:
        path, spec = model_file(model, "gfpgan", "GFPGAN", model_dir, download)
        net = load_gfpgan(path, spec.name if spec else None, place.device)
        return prepare_for_inference(net, place.device, place.precision, place.channels_last)

    def weights_file(self, model: str, model_dir: Path | None, download: bool) -> Path:
        return model_file(model, "gfpgan", "GFPGAN", model_dir, download)[0]

    def network(self, model: str, path: Path) -> nn.Module:
        return load_gfpgan(path, model, "cpu")


GFPGAN_FAMILY: FaceFamilyImpl = GFPGANFamily()


def load_gfpgan(path: Path, name: str | None = None, device: str | torch.device = "cpu") -> GFPGAN:
    """The GFPGAN in ``path``, checked key by key against the releases' shape (``GFPGANConfig()``);
    ``name``: the registry name, for the advice in messages."""
    return adopt_state(lambda: build_gfpgan(GFPGANConfig()), load_checkpoint(path, name), path, device)
