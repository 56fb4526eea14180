"""A GPEN generator run by ONNX Runtime: a drop-in for the torch face model (``GPENRunner``) on a
batch of aligned crops, the same ``restore.face_model.FaceModel`` the enhancer calls.

The session runs the project's own export (``onnx_export``) of the user's weights file, on the
provider restore.provider names (``onnx_providers``); a provider that is missing or will not start
leaves it on the CPU provider with ``note`` saying so. Not wired into the engine yet (issue 36).
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from gpen_watch.catalog import providers as onnx_providers
from gpen_watch.restore.engines.onnx_export import INPUT_NAME, CachedExport, cached_export

log = logging.getLogger(__name__)


class WeightsSize(nn.Module):
    """Stands for the session's weights where a ``nn.Module`` is asked for (``FaceModel.network``,
    which ``modelsets.weights_mb`` sizes): one meta-device buffer of their byte count, so the memory
    accounting sees what unloading gives back without a second copy of the weights."""

    def __init__(self, nbytes: int) -> None:
        super().__init__()
        self.register_buffer("weights", torch.empty(nbytes, dtype=torch.uint8, device="meta"))


@dataclass
class OnnxFaceModel:
    """An ONNX Runtime session over a GPEN export: (N, 3, S, S) RGB faces in [-1, 1] -> fp32 faces."""

    session: Any  # onnxruntime.InferenceSession (typed loosely: onnxruntime is an optional extra)
    side: int
    choice: onnx_providers.ProviderChoice
    export: CachedExport
    note: str | None  # why the provider asked for is not the one that runs; None when it is

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
        # The export is fp32 throughout; the parser beside it (torch) gets no autocast from it.
        return contextlib.nullcontext()

    def __call__(self, faces: Tensor, /) -> Tensor:
        x = faces.detach().to("cpu", torch.float32).contiguous().numpy()
        (out,) = self.session.run(None, {INPUT_NAME: x})
        # Back where the faces came from, as the torch runner leaves them on its device.
        return torch.from_numpy(np.asarray(out, dtype=np.float32)).to(faces.device)


def _session(path: Path, providers: list[tuple[str, dict[str, str]]], threads: int | None) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads:
        opts.intra_op_num_threads = threads
    return ort.InferenceSession(str(path), sess_options=opts, providers=providers)


def open_session(
    path: Path, provider: str, threads: int | None = None
) -> tuple[Any, onnx_providers.ProviderChoice, str | None]:
    """A session on ``path`` for restore.provider = ``provider``, with the note to show (None: the
    provider asked for runs). A provider that is installed but fails to start is retried on the CPU
    provider alone, so an error that stays is the file's own (the caller may re-export)."""
    import onnxruntime as ort

    choice = onnx_providers.choose(provider, ort.get_available_providers())
    note = choice.note
    if choice.asked is onnx_providers.CPU or note is not None:
        return _session(path, choice.providers, threads), choice, note
    try:
        session = _session(path, choice.providers, threads)
    # ONNX Runtime raises plain RuntimeErrors and its own pybind types for a provider whose libraries
    # or device are missing; none of them is worth a traceback when the CPU provider can run.
    except Exception as exc:  # noqa: BLE001
        note = onnx_providers.failed_note(choice.asked, str(exc).splitlines()[0][:200])
        return _session(path, choice.providers[-1:], threads), choice, note
    if choice.asked.ort_name not in session.get_providers():
        # ONNX Runtime dropped it itself (it only warns): say so as if it were missing.
        note = onnx_providers.failed_note(choice.asked, "ONNX Runtime left it out of the session")
    return session, choice, note


def load_onnx_gpen(
    weights: Path,
    provider: str = "cpu",
    cache_dir: Path | None = None,
    threads: int | None = None,
) -> OnnxFaceModel:
    """The GPEN generator in ``weights`` as an ONNX Runtime face model: exported at first use (or
    when the file, the exporter or the cache changed), then opened on ``provider``."""
    from gpen_watch.restore.engines.gpen_family import load_gpen

    def build() -> tuple[nn.Module, int]:
        # Only when there is no usable export: the weights are read for exporting, not for running.
        gpen = load_gpen(weights, device="cpu", download=False)
        return gpen, int(gpen.config.size)

    export = cached_export(weights, build, cache_dir)
    try:
        session, choice, note = open_session(export.path, provider, threads)
    except Exception as exc:
        if export.exported:
            raise
        # A cached file that passed its hash check but that this ONNX Runtime will not read:
        # made again once, from the weights.
        log.warning("ONNX Runtime refused the cached export %s (%s); exporting again", export.path, exc)
        export = cached_export(weights, build, cache_dir, force=True)
        session, choice, note = open_session(export.path, provider, threads)
    if note:
        log.warning("%s", note)
    return OnnxFaceModel(session=session, side=export.manifest.size, choice=choice, export=export, note=note)
