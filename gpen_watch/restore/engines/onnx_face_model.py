"""A face model run by ONNX Runtime: a drop-in for the torch face model (``FaceRunner``) on a
batch of aligned crops, the same ``restore.face_model.FaceModel`` the enhancer calls, whatever the
family (GPEN, GFPGAN, CodeFormer with its fidelity weight as a second input of the graph).

The session runs the project's own export (``onnx_export``) of the user's weights file, on the
provider restore.provider names (``onnx_providers``); a provider that is missing or will not start
leaves it on the CPU provider with ``note`` saying so. The onnx engine (``onnx_networks``) loads it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from gpen_watch.catalog import providers as onnx_providers
from gpen_watch.restore.engines.onnx_export import FIDELITY_NAME, INPUT_NAME, CachedExport, generator_spec
from gpen_watch.restore.engines.onnx_modules import WeightsSize, open_export
from gpen_watch.restore.engines.onnx_modules import open_session as open_session
from gpen_watch.restore.nets.runner import SizedConfig

log = logging.getLogger(__name__)


@dataclass
class OnnxFaceModel:
    """An ONNX Runtime session over a face model's export: (N, 3, S, S) RGB faces on its family's
    scale [and (N,) fidelity weights] -> fp32 faces."""

    session: Any  # onnxruntime.InferenceSession (typed loosely: onnxruntime is an optional extra)
    side: int
    choice: onnx_providers.ProviderChoice
    export: CachedExport
    note: str | None  # why the provider asked for is not the one that runs; None when it is
    half: bool = False  # the session runs the export's fp16 copy (``onnx_half``)
    # The export takes a fidelity weight per face (CodeFormer); this one when none is given.
    fidelity: float | None = None

    @property
    def size(self) -> int:
        return self.side

    @property
    def network(self) -> nn.Module:
        return WeightsSize(self.export.manifest.onnx_bytes)

    @property
    def provider(self) -> str:
        """restore.provider's word for what runs."""
        return self.choice.runs if self.note is None else onnx_providers.CPU.name

    def autocast(self) -> contextlib.AbstractContextManager[object]:
        # The session's own graph fixes its precision (fp32, or an fp16 copy taking and giving
        # fp32); the parser beside it gets no autocast from it.
        return contextlib.nullcontext()

    def __call__(self, faces: Tensor, /, fidelity: Tensor | None = None) -> Tensor:
        x = faces.detach().to("cpu", torch.float32).contiguous().numpy()
        feeds = {INPUT_NAME: x}
        if self.fidelity is not None:
            weights = fidelity if fidelity is not None else torch.full((len(x),), self.fidelity)
            feeds[FIDELITY_NAME] = weights.detach().to("cpu", torch.float32).contiguous().numpy()
        (out,) = self.session.run(None, feeds)
        # Back where the faces came from, as the torch runner leaves them on its device.
        return torch.from_numpy(np.asarray(out, dtype=np.float32)).to(faces.device)


def load_onnx_face(
    weights: Path,
    build: Callable[[], nn.Module],
    provider: str = "cpu",
    cache_dir: Path | None = None,
    threads: int | None = None,
    say_note: bool = True,
    precision: str = "fp32",
    fidelity: float | None = None,
) -> OnnxFaceModel:
    """The face model in ``weights`` as an ONNX Runtime face model: exported at first use (or
    when the file, the exporter or the cache changed), then opened on ``provider``. ``build``: the
    network from the file (called only when there is no usable export), ``config.size`` its side;
    ``fidelity``: for a family that takes a fidelity weight, the one used when none is given (the
    weight is an input of the export). ``cache_dir``: default beside the file
    (``onnx_modules.cache_folder``). ``say_note``: log the provider's note here (the engine says it
    once for all its networks instead). ``precision``: restore.precision, which on a provider that
    runs fp16 graphs opens the export's fp16 copy (``onnx_modules.open_export``)."""

    def made() -> tuple[nn.Module, int]:
        net = build()
        config: SizedConfig = net.config  # type: ignore[assignment]
        return net, int(config.size)

    # The side is the network's, which the exporter puts into the example (``export_module``).
    spec = generator_spec(0, fidelity=True) if fidelity is not None else None
    opened = open_export(weights, made, spec, provider, threads, cache_dir, precision)
    if opened.note and say_note:
        log.warning("%s", opened.note)
    return OnnxFaceModel(
        session=opened.session,
        side=opened.export.manifest.size,
        choice=opened.choice,
        export=opened.export,
        note=opened.note,
        half=opened.half,
        fidelity=fidelity,
    )


def load_onnx_gpen(
    weights: Path,
    provider: str = "cpu",
    cache_dir: Path | None = None,
    threads: int | None = None,
    model: str | Path | None = None,
    model_dir: Path | None = None,
    say_note: bool = True,
    precision: str = "fp32",
) -> OnnxFaceModel:
    """``load_onnx_face`` for the GPEN generator in ``weights``. ``model``: restore.model as given
    (a registry name keeps its fixed shape), default the file itself."""
    from gpen_watch.restore.engines.gpen_family import load_gpen

    def build() -> nn.Module:
        # Only when there is no usable export: the weights are read for exporting, not for running.
        return load_gpen(model or weights, model_dir=model_dir, device="cpu", download=False)

    return load_onnx_face(weights, build, provider, cache_dir, threads, say_note, precision)
