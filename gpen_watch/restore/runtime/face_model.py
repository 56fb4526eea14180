"""What the enhancer runs on a batch of aligned crops, whatever the network (``FaceModel``), and
what a model family provides to make one (``FaceFamilyImpl``).

A family is named in the registry (``catalog.registry.FACE_FAMILIES``: its checkpoints' kind and
the "module:attribute" of its implementation); ``family_impl`` imports that implementation where a
model is loaded (workers, ``models verify``), never in the service's parent process.
"""

from __future__ import annotations

import contextlib
import importlib
from pathlib import Path
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor, nn

from gpen_watch.catalog.model_spec import ModelSpec
from gpen_watch.catalog.registry import FaceFamily, face_family
from gpen_watch.restore.runtime.device import Placement


class FaceModel(Protocol):
    """A face-restoration network, ready for inference on its device."""

    @property
    def size(self) -> int:
        """The side (px) of the aligned crops it takes and gives back."""
        ...

    @property
    def network(self) -> nn.Module:
        """The network itself: what unloading it gives back (``modelsets.weights_mb``)."""
        ...

    def autocast(self) -> contextlib.AbstractContextManager[object]:
        """The precision it runs in, which the parser shares when restore.parse_precision is auto."""
        ...

    def __call__(self, faces: Tensor, /, fidelity: Tensor | None = None) -> Tensor:
        """(N, 3, S, S) RGB faces, scaled as the family's frame says (``FaceFrame.mean``, ``.std``)
        -> the restored faces, fp32, on the same scale. ``fidelity``: (N,) weights in [0, 1] for a
        family that takes one (``FaceFamily.fidelity``); never given to the others."""
        ...


@runtime_checkable
class FaceFamilyImpl(Protocol):
    """How one family's networks are built, checked and loaded (``registry.FaceFamily.impl``)."""

    def build(self, spec: ModelSpec, device: str | torch.device = "cpu") -> nn.Module:
        """``spec``'s network with random weights (nothing is downloaded)."""
        ...

    def load_file(self, spec: ModelSpec, path: Path, device: str | torch.device = "cpu") -> nn.Module:
        """``spec``'s network with the weights of ``path``, checked against it, in eval mode."""
        ...

    def load(self, model: str, model_dir: Path | None, place: Placement, download: bool) -> FaceModel:
        """restore.model = ``model`` (a registry name or a checkpoint file) ready on ``place``;
        ModelError when it cannot be had."""
        ...

    def weights_file(self, model: str, model_dir: Path | None, download: bool) -> Path:
        """The weights file restore.model = ``model`` names, fetched as ``load`` would fetch it but
        not loaded: what another engine exports and keys its cache by."""
        ...

    def network(self, model: str, path: Path) -> nn.Module:
        """The network in ``path`` (restore.model = ``model``'s file), checked, on the CPU in eval
        mode, as another engine exports it: ``forward(faces)``, or ``forward(faces, fidelity)`` for
        a family with a fidelity weight; ``config.size`` is its side."""
        ...


def family_impl(family: FaceFamily) -> FaceFamilyImpl:
    """The implementation ``family`` names, imported now."""
    module, _, attr = family.impl.partition(":")
    impl = vars(importlib.import_module(module)).get(attr)
    if not isinstance(impl, FaceFamilyImpl):
        raise TypeError(
            f"{family.impl}: not a face family implementation (restore.runtime.face_model.FaceFamilyImpl)"
        )
    return impl


def load_face_model(model: str, model_dir: Path | None, place: Placement, download: bool) -> FaceModel:
    """restore.model = ``model``, loaded by its family (``registry.face_family``) onto ``place``."""
    return family_impl(face_family(model)).load(model, model_dir, place, download)
