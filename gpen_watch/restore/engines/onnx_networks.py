"""The ONNX Runtime engine's networks (restore.engine = "onnx", ``networks.ENGINES``).

Every network is the project's own torch network, prepared as the torch engine prepares it
(BatchNorm folded, the parser's rewrites), exported once per weights file by ``onnx_export`` and
run in an ONNX Runtime session on restore.provider; ``onnx_modules.OnnxNet`` lets the stages call
it as they call the torch module. The torch side (align, paste, the detector's decoding) stays on
the CPU in fp32: the sessions take and give numpy arrays there.

The exported forms: the generator (N, 3, S, S), only the batch dynamic; the detector, whose input
is a whole padded photo, with batch, height and width dynamic (multiples of 32) and its three
outputs (boxes, scores, landmarks); the parser (height and width dynamic: 512 px faces, and
256 px ones under restore.parse_small_below) giving only its class map; the upscaler's tiles with
height and width dynamic on its unshuffle grid. On a provider that runs fp16 graphs (a GPU's:
``Provider.half``) the generator, the parser and the upscaler run the fp16 copy of their export
unless restore.precision is fp32; the detector stays fp32 everywhere.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import cast

import torch
from torch import Tensor, nn

from gpen_watch.base.errors import ModelError
from gpen_watch.catalog import providers as onnx_providers
from gpen_watch.catalog.registry import (
    UPSCALER_CONFIGS,
    UPSCALER_NAMES,
    face_family,
    get_spec,
    parser_spec,
    upscaler_spec,
)
from gpen_watch.catalog.rrdbnet_config import RRDBConfig
from gpen_watch.config import ParsePrecision, RestoreConfig
from gpen_watch.modelstore.store import ensure_model
from gpen_watch.restore.engines import verify
from gpen_watch.restore.engines.onnx_export import ExportSpec
from gpen_watch.restore.engines.onnx_face_model import load_onnx_face
from gpen_watch.restore.engines.onnx_modules import OnnxNet, open_export
from gpen_watch.restore.nets.fold import fold_batchnorm, prepare_detector
from gpen_watch.restore.nets.retinaface import RetinaFace, config_for
from gpen_watch.restore.nets.rrdbnet import RRDBNet
from gpen_watch.restore.nets.upconv import polyphase_upsample_blocks
from gpen_watch.restore.runtime.device import Placement, placement
from gpen_watch.restore.runtime.face_model import FaceModel, family_impl

log = logging.getLogger(__name__)

# Example inputs: H differs from W where both are dynamic, so the exporter cannot tie them.
DETECTOR_SPEC = ExportSpec("detector", ("photos",), ("loc", "conf", "landmarks"), (2, 3, 320, 416), 32)
PARSER_SPEC = ExportSpec("parser", ("faces",), ("logits",), (2, 3, 256, 320), 32)
# restore.provider's names as their makers write them, where ONNX Runtime's own differ.
_SHOWN = {
    "cpu": "CPU",
    "openvino": "OpenVINO",
    "tensorrt": "TensorRT",
    "directml": "DirectML",
    "rocm": "ROCm",
}


def upscaler_export_spec(cfg: RRDBConfig) -> ExportSpec:
    return ExportSpec("upscaler", ("tiles",), ("upscaled",), (2, 3, 64, 96), max(1, cfg.unshuffle))


def provider_shown(name: str) -> str:
    """ "OpenVINO" for restore.provider = openvino."""
    return _SHOWN.get(name, onnx_providers.PROVIDERS[name].ort_name.removesuffix("ExecutionProvider"))


class _ClassMap(nn.Module):
    """ParseNet giving only its class map: the engine reads nothing else of it, and an empty
    second output (``fold.drop_image_head``) is nothing worth exporting."""

    def __init__(self, parser: nn.Module) -> None:
        super().__init__()
        self.parser = parser

    def forward(self, faces: Tensor) -> Tensor:
        out: Tensor = self.parser(faces)[0]
        return out


class OnnxNetworks:
    """``networks.Networks`` with every network an ONNX Runtime session on restore.provider."""

    def __init__(self, cfg: RestoreConfig, download: bool, threads: int | None, note: str = "") -> None:
        import onnxruntime as ort

        self.cfg = cfg
        self.download = download
        self.threads = threads
        self.version = ort.__version__
        self._note = note
        # restore.provider's word for what the first session ran on (the rest run on the same).
        self._runs = cfg.provider
        self._opened = False
        self._half = False  # some session runs an fp16 copy
        if cfg.use_parse and cfg.parse_precision not in ("auto", "fp32"):
            log.info(
                "restore.parse_precision = %s: the onnx engine's parser runs as its generator does "
                "(fp32, or fp16 on a GPU's provider)",
                cfg.parse_precision,
            )

    @property
    def label(self) -> str:
        # The format its sessions run, as the torch engine's label says its own.
        form = "fp16" if self._half else "fp32"
        return f"ONNX Runtime {self.version}, {provider_shown(self._runs)} provider, {form}"

    @property
    def note(self) -> str:
        return self._note

    @property
    def through(self) -> str:
        return f" through ONNX Runtime ({provider_shown(self._runs)} provider)"

    def placement(self, device: str) -> Placement:
        # The sessions run on restore.provider's device; what torch still does (align, paste, the
        # detector's decoding) is light and stays on the CPU, in fp32 as the exports are.
        return placement("cpu", "fp32", False)

    def _opened_on(self, choice: onnx_providers.ProviderChoice, note: str | None, half: bool) -> None:
        """Record what a session runs on; a note is said once per restorer (``Restorer`` logs the
        first at start, and one that differs from it here)."""
        self._half = self._half or half
        runs = choice.runs if note is None else onnx_providers.CPU.name
        if not self._opened:
            self._runs, self._opened = runs, True
        if note and not self._note:
            self._note = note
        elif note and note != self._note:
            log.warning("%s", note)

    def face_model(self, model: str, place: Placement) -> FaceModel:
        # Every family's network exported as it is (CodeFormer's fidelity weight an input).
        family = face_family(model)
        impl = family_impl(family)
        path = impl.weights_file(model, self.cfg.model_dir, self.download)
        face = load_onnx_face(
            path,
            lambda: impl.network(model, path),
            self.cfg.provider,
            threads=self.threads,
            say_note=False,
            precision=self.cfg.precision,
            fidelity=self.cfg.fidelity if family.fidelity else None,
        )
        self._opened_on(face.choice, face.note, face.half)
        return face

    def _net(
        self,
        path: Path,
        build: Callable[[], nn.Module],
        spec: ExportSpec,
        config: object = None,
        precision: str = "fp32",
    ) -> OnnxNet:
        opened = open_export(
            path, lambda: (build(), 0), spec, self.cfg.provider, self.threads, precision=precision
        )
        self._opened_on(opened.choice, opened.note, opened.half)
        return OnnxNet(opened.session, opened.export, config, as_tuple=spec.kind in ("detector", "parser"))

    def detector(self, name: str, place: Placement) -> RetinaFace:
        spec = get_spec(name)
        if spec.kind != "detector":
            raise ModelError(f"{spec.name} is a {spec.kind} model, not a face detector")
        path = ensure_model(spec, self.cfg.model_dir, download=self.download)
        cpu = torch.device("cpu")

        def build() -> nn.Module:
            net = verify.load_detector(name, self.cfg.model_dir, device="cpu", download=False)
            return prepare_detector(net, cpu)

        # FaceDetector reads the network's config (anchors, variances) and calls it: OnnxNet does both.
        # fp32 on every provider, as the torch engine's detector: the landmarks place every face.
        return cast(RetinaFace, self._net(path, build, DETECTOR_SPEC, config_for(spec.arch)))

    def parse_precision(self, place: Placement) -> ParsePrecision:
        return "fp32"

    def parser(self, place: Placement) -> nn.Module:
        spec = parser_spec()
        path = ensure_model(spec, self.cfg.model_dir, download=self.download)

        def build() -> nn.Module:
            # prepare_conv_net's rewrites but the CPU's ring-padded convolutions (``reflect_conv``):
            # those run as oneDNN's own ops, which the exporter cannot translate. The phases are
            # interleaved by reshaping: strided writes would export as ScatterNDs (``upconv``).
            parser = verify.load_model_file(spec, path, "cpu").eval()
            fold_batchnorm(parser)
            polyphase_upsample_blocks(parser, interleave="reshape")
            return _ClassMap(parser)

        return self._net(path, build, PARSER_SPEC, precision=self.cfg.precision)

    def upscaler(self, factor: int, model: str, place: Placement) -> RRDBNet:
        def build() -> nn.Module:
            return verify.load_upscaler(factor, model, self.cfg.model_dir, "cpu", download=False)

        if model and model not in UPSCALER_NAMES:
            # The user's own file: its shape is in its keys, read (and checked) once here.
            net = verify.load_upscaler(factor, model, self.cfg.model_dir, "cpu", self.download)
            path, config = Path(model).expanduser(), net.config
            del net
        else:
            spec = upscaler_spec(factor, model)
            path = ensure_model(spec, self.cfg.model_dir, download=self.download)
            config = UPSCALER_CONFIGS[spec.name]
        # The Upscaler reads the network's config (factor, grid) and calls it: OnnxNet does both.
        return cast(RRDBNet, self._net(path, build, upscaler_export_spec(config), config, self.cfg.precision))
