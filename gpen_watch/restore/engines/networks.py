"""What runs a restorer's networks (restore.engine): one module per engine behind ``Networks``,
named in ``ENGINES``, and the choice among them with its fallback.

An engine makes each network the stages call (the face model, the detector, the parser, the
upscaler) and says where the torch side of the pipeline runs. The stages call what it makes as
they call the torch networks, so an engine adds nothing to them: adding one is a module with a
``Networks`` class and its line in ``ENGINES``.
"""

from __future__ import annotations

import importlib
import logging
from typing import Protocol

from torch import nn

from gpen_watch.config import ParsePrecision, RestoreConfig
from gpen_watch.restore.nets.retinaface import RetinaFace
from gpen_watch.restore.nets.rrdbnet import RRDBNet
from gpen_watch.restore.runtime.device import Placement
from gpen_watch.restore.runtime.face_model import FaceModel

log = logging.getLogger(__name__)

# restore.engine -> "module:class" of its ``Networks``, imported only when chosen (the torch
# engine never imports onnxruntime).
ENGINES: dict[str, str] = {
    "torch": "gpen_watch.restore.engines.torch_networks:TorchNetworks",
    "onnx": "gpen_watch.restore.engines.onnx_networks:OnnxNetworks",
}
# What the onnx engine needs that the torch one does not: ONNX Runtime, and for exporting the
# dynamo exporter's onnxscript and onnx (pyproject's ``onnx`` extra).
ONNX_PACKAGES = ("onnxruntime", "onnx", "onnxscript")


class Networks(Protocol):
    """One engine's networks for one restorer (``cfg``: its settings, ``threads``: its CPU threads)."""

    @property
    def label(self) -> str:
        """What runs them and in what number format, for status, the dashboard and the tray:
        "PyTorch 2.14.1, fp32", "PyTorch 2.14.1, fp32, ParseNet int8", "ONNX Runtime 1.24.1,
        OpenVINO provider, fp32" (``Restorer.engine_label``)."""
        ...

    @property
    def note(self) -> str:
        """Why what runs is not what the settings asked for, a sentence for each thing that is not
        (the engine, the provider, a number format the device would emulate); "" when all are."""
        ...

    @property
    def through(self) -> str:
        """What ``Restorer.loaded`` adds after the device and precision: " through ONNX Runtime
        (CPU provider)"; "" for the torch engine."""
        ...

    def placement(self, device: str) -> Placement:
        """Where the torch side of the pipeline runs (align, paste, and with torch every network)
        for restore.device = ``device``, in a format the device computes natively."""
        ...

    def face_model(self, model: str, place: Placement) -> FaceModel: ...

    def detector(self, name: str, place: Placement) -> RetinaFace:
        """The detector network ``FaceDetector`` runs, ready (BatchNorm folded)."""
        ...

    def parse_precision(self, place: Placement) -> ParsePrecision:
        """restore.parse_precision as the enhancer is to be told it: resolved for the device by
        torch (``enhance.resolve_parse_precision``), "fp32" for ONNX Runtime's export."""
        ...

    def parser(self, place: Placement) -> nn.Module:
        """ParseNet, ready (``enhance.prepare_parser``'s result, or what stands for it)."""
        ...

    def upscaler(self, factor: int, model: str, place: Placement) -> RRDBNet: ...


def missing_onnx_package() -> str | None:
    """The first of ``ONNX_PACKAGES`` that cannot be imported here; None when all can."""
    for name in ONNX_PACKAGES:
        try:
            importlib.import_module(name)
        # A broken install raises more than ImportError (a missing shared library: OSError).
        except Exception:  # noqa: BLE001
            return name
    return None


def onnx_missing_note(package: str) -> str:
    return (
        f"restore.engine = onnx: {package} is not installed, so the PyTorch engine runs instead "
        f"(pip install 'gpen-watch[onnx]' to have the ONNX Runtime engine)."
    )


def open_networks(cfg: RestoreConfig, download: bool, threads: int | None) -> Networks:
    """The engine restore.engine names; the torch engine, with its note saying why, when the onnx
    one cannot run here."""
    name = cfg.engine
    note = ""
    if name == "onnx":
        missing = missing_onnx_package()
        if missing is not None:
            name, note = "torch", onnx_missing_note(missing)
    module, _, attr = ENGINES[name].partition(":")
    made: Networks = getattr(importlib.import_module(module), attr)(cfg, download, threads, note)
    return made
