"""The CodeFormer family (``registry.FACE_FAMILIES``): the released network
(``nets.codeformer_model``) built, checked and loaded from its checkpoint, strictly, and run by the
enhancer as a ``FaceRunner`` that passes each face's restore.fidelity as the network's w."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import torch

from gpen_watch.restore.engines.released_family import ReleasedFamily
from gpen_watch.restore.nets.codeformer_model import CodeFormer, build_codeformer
from gpen_watch.restore.runtime.face_model import FaceFamilyImpl

_CODEFORMER = ReleasedFamily("codeformer", "CodeFormer", build_codeformer)
CODEFORMER_FAMILY: FaceFamilyImpl = _CODEFORMER


def load_codeformer(path: Path, name: str | None = None, device: str | torch.device = "cpu") -> CodeFormer:
    """The CodeFormer in ``path``, checked key by key against the released shape."""
    return cast(CodeFormer, _CODEFORMER.load_network(path, name, device))
