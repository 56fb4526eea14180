"""The CodeFormer family (``registry.FACE_FAMILIES``): the released network
(``nets.codeformer_model``) built, checked and loaded from its checkpoint, strictly, and run by the
enhancer as a ``FaceRunner`` that passes each face's restore.fidelity as the network's w."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from gpen_watch.catalog.registry import ModelSpec
from gpen_watch.restore.engines.verify import adopt_state, load_checkpoint, model_file
from gpen_watch.restore.nets.codeformer_model import CodeFormer, build_codeformer
from gpen_watch.restore.nets.runner import FaceRunner, prepare_for_inference
from gpen_watch.restore.runtime.device import Placement
from gpen_watch.restore.runtime.face_model import FaceFamilyImpl


class CodeFormerFamily:
    """``FaceFamilyImpl`` for CodeFormer checkpoints (registry kind "codeformer")."""

    def build(self, spec: ModelSpec, device: str | torch.device = "cpu") -> nn.Module:
        return build_codeformer().to(device)

    def load_file(self, spec: ModelSpec, path: Path, device: str | torch.device = "cpu") -> nn.Module:
        return load_codeformer(path, spec.name, device)

    def load(self, model: str, model_dir: Path | None, place: Placement, download: bool) -> FaceRunner:
        path, spec = model_file(model, "codeformer", "CodeFormer", model_dir, download)
        net = load_codeformer(path, spec.name if spec else None, place.device)
        return prepare_for_inference(net, place.device, place.precision, place.channels_last)

    def weights_file(self, model: str, model_dir: Path | None, download: bool) -> Path:
        return model_file(model, "codeformer", "CodeFormer", model_dir, download)[0]

    def network(self, model: str, path: Path) -> nn.Module:
        return load_codeformer(path, model, "cpu")


CODEFORMER_FAMILY: FaceFamilyImpl = CodeFormerFamily()


def load_codeformer(path: Path, name: str | None = None, device: str | torch.device = "cpu") -> CodeFormer:
    """The CodeFormer in ``path``, checked key by key against the released shape."""
    return adopt_state(build_codeformer, load_checkpoint(path, name), path, device)
