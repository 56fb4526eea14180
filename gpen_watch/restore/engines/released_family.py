"""A face model family whose checkpoints all hold one released network of one shape (GFPGAN's
clean v1.3 and v1.4, CodeFormer): built by a function that takes no size, checked key by key and
loaded strictly, run by the enhancer as a ``FaceRunner``. GPEN, whose checkpoints come in sizes,
has a family module of its own (``gpen_family``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from gpen_watch.catalog.model_spec import ModelSpec
from gpen_watch.catalog.registry import FACE_MODEL_NAMES
from gpen_watch.restore.engines.verify import adopt_state, load_checkpoint, model_file
from gpen_watch.restore.nets.runner import FaceRunner, prepare_for_inference
from gpen_watch.restore.runtime.device import Placement


@dataclass(frozen=True)
class ReleasedFamily:
    """``FaceFamilyImpl`` for the registry kind ``kind`` (``label`` in messages), whose network
    ``make`` builds."""

    kind: str
    label: str
    make: Callable[[], nn.Module]

    def build(self, spec: ModelSpec, device: str | torch.device = "cpu") -> nn.Module:
        return self.make().to(device)

    def load_file(self, spec: ModelSpec, path: Path, device: str | torch.device = "cpu") -> nn.Module:
        return self.load_network(path, spec.name, device)

    def load(self, model: str, model_dir: Path | None, place: Placement, download: bool) -> FaceRunner:
        path, spec = model_file(model, self.kind, self.label, model_dir, download)
        net = self.load_network(path, spec.name if spec else None, place.device)
        return prepare_for_inference(net, place.device, place.precision, place.channels_last)

    def weights_file(self, model: str, model_dir: Path | None, download: bool) -> Path:
        return model_file(model, self.kind, self.label, model_dir, download)[0]

    def network(self, model: str, path: Path) -> nn.Module:
        # A user's own file (restore.model a path) has no registry name to advise fetching again.
        named = any(model.lower() == name.lower() for name in FACE_MODEL_NAMES)
        return self.load_network(path, model if named else None, "cpu")

    def load_network(
        self, path: Path, name: str | None = None, device: str | torch.device = "cpu"
    ) -> nn.Module:
        """The network in ``path``, checked key by key against the released shape; ``name``: the
        registry name, for the advice in messages."""
        return adopt_state(self.make, load_checkpoint(path, name), path, device)
