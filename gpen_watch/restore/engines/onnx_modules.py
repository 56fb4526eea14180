"""ONNX Runtime sessions dressed as the torch networks the stages call, and where their exports go.

The stages (detect, enhance's parser, upscale) call a network as ``net(x)`` on a torch tensor and
read a few attributes of it (the detector's and the upscaler's ``config``). ``OnnxNet`` is that
call over a session: numpy in, torch tensors out, on the tensor's own device (the CPU: the onnx
engine keeps the torch side there). Its weights are counted as ``WeightsSize`` counts the
generator's, by the export's byte size, without a second copy.
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from gpen_watch.catalog import providers as onnx_providers
from gpen_watch.platform import paths
from gpen_watch.restore.engines.onnx_export import CachedExport, ExportSpec, cached_export
from gpen_watch.restore.engines.onnx_half import cached_half

log = logging.getLogger(__name__)


class WeightsSize(nn.Module):
    """Stands for a session's weights where a ``nn.Module`` is asked for (``FaceModel.network``,
    which ``modelsets.weights_mb`` sizes): one meta-device buffer of their byte count, so the memory
    accounting sees what unloading gives back without a second copy of the weights."""

    def __init__(self, nbytes: int) -> None:
        super().__init__()
        self.register_buffer("weights", torch.empty(nbytes, dtype=torch.uint8, device="meta"))


def _session(path: Path, providers: list[tuple[str, dict[str, str]]], threads: int | None) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads:
        opts.intra_op_num_threads = threads
    return ort.InferenceSession(str(path), sess_options=opts, providers=providers)


class ProviderSession:
    """A session on a provider other than the CPU's that, when a run fails there (OpenVINO's
    compiler refusing a node only at inference, a GPU lost), runs that call and every later one on
    the CPU provider alone, saying so once: a provider's fault must not fail the user's photo.
    Everything else is the session's own (``get_inputs``, ``get_providers``...)."""

    def __init__(
        self,
        session: Any,
        path: Path,
        choice: onnx_providers.ProviderChoice,
        threads: int | None,
        cpu_path: Path | None = None,
    ):
        self.session = session
        self.path = path
        self.choice = choice
        self.threads = threads
        # What the CPU provider runs instead: the fp32 export where ``path`` is its fp16 copy.
        self.cpu_path = cpu_path or path
        self.fell_back = False

    def run(self, outputs: list[str] | None, feeds: dict[str, np.ndarray]) -> list[Any]:
        try:
            return list(self.session.run(outputs, feeds))
        # As at start (``open_session``): ONNX Runtime's failures are plain RuntimeErrors or its own
        # pybind types. One that the CPU provider repeats is raised from there, as the file's own.
        except Exception as exc:
            if self.fell_back:
                raise
            reason = str(exc).splitlines()[0][:200]
            log.warning("%s", onnx_providers.run_failed_note(self.choice.asked, self.path.name, reason))
            self.session = _session(self.cpu_path, self.choice.providers[-1:], self.threads)
            self.fell_back = True
        return list(self.session.run(outputs, feeds))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)


def open_session(
    path: Path, provider: str, threads: int | None = None, cpu_path: Path | None = None
) -> tuple[Any, onnx_providers.ProviderChoice, str | None]:
    """A session on ``path`` for restore.provider = ``provider``, with the note to show (None: the
    provider asked for runs). A provider that is installed but fails to start is retried on the CPU
    provider alone, so an error that stays is the file's own (the caller may re-export); one that
    starts is wrapped in ``ProviderSession``, for a run that fails there. ``cpu_path``: what the CPU
    provider opens where it stands in for another (the fp32 export where ``path`` is its fp16 copy)."""
    import onnxruntime as ort

    choice = onnx_providers.choose(provider, ort.get_available_providers())
    cpu_path = cpu_path or path
    note = choice.note
    if choice.asked is onnx_providers.CPU:
        return _session(path, choice.providers, threads), choice, note
    if note is not None:
        return _session(cpu_path, choice.providers, threads), choice, note
    try:
        session = _session(path, choice.providers, threads)
    # ONNX Runtime raises plain RuntimeErrors and its own pybind types for a provider whose libraries
    # or device are missing; none of them is worth a traceback when the CPU provider can run.
    except Exception as exc:  # noqa: BLE001
        note = onnx_providers.failed_note(choice.asked, str(exc).splitlines()[0][:200])
        return _session(cpu_path, choice.providers[-1:], threads), choice, note
    if choice.asked.ort_name not in session.get_providers():
        # ONNX Runtime dropped it itself (it only warns): say so as if it were missing.
        note = onnx_providers.failed_note(choice.asked, "ONNX Runtime left it out of the session")
        if cpu_path != path:
            session = _session(cpu_path, choice.providers[-1:], threads)
        return session, choice, note
    return ProviderSession(session, path, choice, threads, cpu_path), choice, note


class OnnxNet(nn.Module):
    """``session`` where a stage calls a torch network: (N, C, H, W) float in, its outputs out as
    fp32 tensors (a tuple when ``as_tuple``, as RetinaFace and ParseNet give them), and ``config``
    as the torch network's (the detector's anchors, the upscaler's factor and grid)."""

    def __init__(
        self, session: Any, export: CachedExport, config: object = None, as_tuple: bool = False
    ) -> None:
        super().__init__()
        self.session = session
        self.export = export
        self.config = config
        self.weights = WeightsSize(export.manifest.onnx_bytes)
        self._input = session.get_inputs()[0].name
        self._as_tuple = as_tuple

    def to(self, *args: Any, **kwargs: Any) -> OnnxNet:
        # The session stays on its provider's device; the meta-device size buffer cannot be copied.
        return self

    def forward(self, x: Tensor) -> Tensor | tuple[Tensor, ...]:
        # contiguous(): the stages hand channels_last views, ONNX Runtime reads NCHW.
        arr = x.detach().to("cpu", torch.float32).contiguous().numpy()
        outs = self.session.run(None, {self._input: arr})
        tensors = tuple(torch.from_numpy(np.asarray(o, dtype=np.float32)).to(x.device) for o in outs)
        return tensors if self._as_tuple else tensors[0]


def writable(folder: Path) -> bool:
    """Whether a file can be made in ``folder`` (tried, not inferred from its mode: root, ACLs and
    read-only mounts all say otherwise than the permission bits)."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def cache_folder(source: Path) -> Path:
    """Where ``source``'s exports go: beside it, or when that folder takes no new file (a read-only
    restore.model_dir, a system install) a folder of the user's cache, one per source folder."""
    if writable(source.parent):
        return source.parent
    tag = hashlib.sha256(str(source.parent.resolve()).encode()).hexdigest()[:16]
    folder = paths.cache_dir() / "onnx" / tag
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@dataclass(frozen=True)
class OpenedExport:
    """A session over one network's export, and what it runs."""

    session: Any
    export: CachedExport  # the fp32 export (its fp16 copy, where one runs, is made from it)
    choice: onnx_providers.ProviderChoice
    note: str | None  # why the provider asked for is not the one that runs; None when it is
    half: bool  # the session runs the export's fp16 copy


def open_export(
    source: Path,
    build: Callable[[], tuple[nn.Module, int]],
    spec: ExportSpec | None,
    provider: str,
    threads: int | None,
    cache_dir: Path | None = None,
    precision: str = "fp32",
) -> OpenedExport:
    """A session on ``source``'s export (made now unless a whole, current one is cached) on
    ``provider``, with the note ``open_session`` gives; on a provider that runs fp16 graphs, and
    unless ``precision`` (restore.precision) is fp32, on the export's fp16 copy (``onnx_half``),
    with the fp32 export kept for the CPU provider should the GPU's fail. A cached file this ONNX
    Runtime will not read, though its hashes match, is made once more."""
    import onnxruntime as ort

    folder = cache_dir or cache_folder(source)
    half = onnx_providers.runs_half(onnx_providers.choose(provider, ort.get_available_providers()), precision)
    export = cached_export(source, build, folder, spec=spec)
    try:
        path = _half_copy(export.path, force=False) if half else export.path
        session, choice, note = open_session(path, provider, threads, cpu_path=export.path)
    except Exception as exc:
        if export.exported:
            raise
        log.warning("ONNX Runtime refused the cached export %s (%s); making it again", export.path, exc)
        export = cached_export(source, build, folder, force=True, spec=spec)
        path = _half_copy(export.path, force=True) if half else export.path
        session, choice, note = open_session(path, provider, threads, cpu_path=export.path)
    if path != export.path and note is not None and choice.note is None:
        # The provider is installed but did not start on the fp16 copy (an operator its fp16
        # kernels lack): it may still run the fp32 export, which keeps the work on the GPU.
        fp32_session, fp32_choice, fp32_note = open_session(export.path, provider, threads)
        if fp32_note is None:
            log.warning(
                "restore.provider = %s runs the fp32 export of %s: it did not start on its fp16 copy",
                provider,
                export.path.name,
            )
            session, choice, note, path = fp32_session, fp32_choice, None, export.path
    return OpenedExport(session, export, choice, note, path != export.path and note is None)


def _half_copy(fp32: Path, force: bool) -> Path:
    """The fp16 copy of the export at ``fp32``, or ``fp32`` itself, with one sentence, where the
    copy cannot be made: the provider then runs the fp32 export, slower but the same faces."""
    try:
        return cached_half(fp32, force=force).path
    # The converter is ONNX Runtime's own script and raises what its graph walk meets.
    except Exception as exc:  # noqa: BLE001
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        log.warning("could not make the fp16 copy of %s (%s); it runs in fp32", fp32.name, reason)
        return fp32
