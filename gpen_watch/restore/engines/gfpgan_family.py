"""The GFPGAN family (``registry.FACE_FAMILIES``): the released v1.3 and v1.4 networks
(``nets.gfpgan_model``) built, checked and loaded from their checkpoints, strictly, and run by the
enhancer as a ``FaceRunner``. The decoder's noise is the checkpoint's stored maps, so a photo
restored twice comes out the same (docs/models.md)."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import torch

from gpen_watch.restore.engines.released_family import ReleasedFamily
from gpen_watch.restore.nets.gfpgan_model import GFPGAN, GFPGANConfig, build_gfpgan
from gpen_watch.restore.runtime.face_model import FaceFamilyImpl

_GFPGAN = ReleasedFamily("gfpgan", "GFPGAN", lambda: build_gfpgan(GFPGANConfig()))
GFPGAN_FAMILY: FaceFamilyImpl = _GFPGAN


def load_gfpgan(path: Path, name: str | None = None, device: str | torch.device = "cpu") -> GFPGAN:
    """The GFPGAN in ``path``, checked key by key against the releases' shape (``GFPGANConfig()``);
    ``name``: the registry name, for the advice in messages."""
    return cast(GFPGAN, _GFPGAN.load_network(path, name, device))
