"""The PyTorch engine's networks (restore.engine = "torch", ``networks.ENGINES``): each loaded
from its checked weights file and prepared for inference on the restorer's device."""

from __future__ import annotations

import torch
from torch import nn

from gpen_watch.config import ParsePrecision, RestoreConfig
from gpen_watch.restore.engines import verify
from gpen_watch.restore.nets.fold import prepare_detector
from gpen_watch.restore.nets.retinaface import RetinaFace
from gpen_watch.restore.nets.rrdbnet import RRDBNet
from gpen_watch.restore.runtime.device import Placement, placement
from gpen_watch.restore.runtime.face_model import FaceModel, load_face_model
from gpen_watch.restore.runtime.formats import formats_label
from gpen_watch.restore.stages.enhance import prepare_parser, resolve_parse_precision


def torch_label() -> str:
    """ "PyTorch 2.14.1": the release, without the build's local tag ("+cpu")."""
    return f"PyTorch {torch.__version__.split('+')[0]}"


class TorchNetworks:
    """``networks.Networks`` with every network a torch module on the restorer's device."""

    def __init__(self, cfg: RestoreConfig, download: bool, threads: int | None, note: str = "") -> None:
        self.cfg = cfg
        self.download = download
        self._note = note  # set when it stands in for an engine that cannot run here
        # Where it runs and ParseNet's format there, resolved once (``placement``), with the
        # sentences saying why a format asked for is not the one that runs.
        self._place: Placement | None = None
        self._parse: tuple[ParsePrecision, str] = (cfg.parse_precision, "")

    @property
    def label(self) -> str:
        """ "PyTorch 2.14.1, fp32" (with ", ParseNet int8" where ParseNet's format differs): the
        formats that really run, once placed."""
        if self._place is None:
            return torch_label()
        parser = self._parse[0] if self.cfg.use_parse else None
        return f"{torch_label()}, {formats_label(self._place.precision, parser)}"

    @property
    def note(self) -> str:
        notes = (self._note, self._place.note if self._place else "", self._parse[1])
        return " ".join(n for n in notes if n)

    @property
    def through(self) -> str:
        return ""

    def placement(self, device: str) -> Placement:
        place = placement(device, self.cfg.precision, self.cfg.channels_last)
        self._place = place
        self._parse = resolve_parse_precision(self.cfg.parse_precision, place)
        return place

    def face_model(self, model: str, place: Placement) -> FaceModel:
        return load_face_model(model, self.cfg.model_dir, place, self.download)

    def detector(self, name: str, place: Placement) -> RetinaFace:
        net = verify.load_detector(name, self.cfg.model_dir, device=str(place.device), download=self.download)
        return prepare_detector(net, place.device)

    def parse_precision(self, place: Placement) -> ParsePrecision:
        # Resolved for the device once, at ``placement``: each enhancer is told what runs.
        if self._place != place:
            self._parse = resolve_parse_precision(self.cfg.parse_precision, place)
            self._place = place
        return self._parse[0]

    def parser(self, place: Placement) -> nn.Module:
        raw = verify.load_parser(self.cfg.model_dir, device=str(place.device), download=self.download)
        return prepare_parser(raw, place, self.parse_precision(place))

    def upscaler(self, factor: int, model: str, place: Placement) -> RRDBNet:
        return verify.load_upscaler(factor, model, self.cfg.model_dir, str(place.device), self.download)
