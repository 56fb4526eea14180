"""The fp16 copies a GPU's provider runs (restore.engines.onnx_half): which providers open them,
that a copy computes the fp32 export's function at fp16's precision, is cached beside the export
and made again when stale, and that where the GPU's provider does not start or fails a run the CPU
provider runs the fp32 export, not the copy.

No GPU provider runs here. ONNX Runtime's CPU provider runs the fp16 graphs too (slower), so the
copies themselves are real and run; only the provider that would pick them is stood in for, by
ONNX Runtime's list of installed providers or by ``runs_half``.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

import onnx
import torch
from conftest import TinyModels, make_tiny_models, same_photo_but_overlaps
from conftest import tiny_restore_config as tiny_config

from gpen_watch.catalog import providers as onnx_providers
from gpen_watch.imaging.load import load_image
from gpen_watch.restore.api import FileJob
from gpen_watch.restore.engines import onnx_derived, onnx_export, onnx_half
from gpen_watch.restore.engines.onnx_face_model import OnnxFaceModel
from gpen_watch.restore.engines.onnx_modules import OpenedExport, ProviderSession, open_export
from gpen_watch.restore.engines.restorer import Restorer

# As in test_onnx_engine: the fp32 export against torch, float32 rounding only.
FP32_ATOL = 1e-4
# fp16 keeps 2^-11 (4.9e-4) relative per operation. Over the tiny generator's ~25 layers, on outputs
# up to ~2, errors that all added up in one direction would stay under 25 * 4.9e-4 * 2 = 2.5e-2
# (measured: 1.2e-3). Three 8-bit levels of the result (2/255 each); a wrong graph is off by far more.
FP16_ATOL = 2.5e-2


def faces(n: int = 2) -> torch.Tensor:
    return torch.rand(n, 3, 64, 64, generator=torch.Generator().manual_seed(3)) * 2 - 1


def run(path: Path, x: torch.Tensor) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, {onnx_export.INPUT_NAME: x.numpy()})[0])


def test_the_gpu_providers_open_fp16_copies_where_they_run_and_precision_allows() -> None:
    assert [p.name for p in onnx_providers.PROVIDERS.values() if p.half] == [
        "cuda",
        "tensorrt",
        "directml",
        "rocm",
    ]
    there = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    for precision in ("auto", "fp16", "bf16"):
        assert onnx_providers.runs_half(onnx_providers.choose("cuda", there), precision)
    assert not onnx_providers.runs_half(onnx_providers.choose("cuda", there), "fp32")
    # Not installed: the CPU provider runs, and it runs the fp32 exports.
    assert not onnx_providers.runs_half(onnx_providers.choose("cuda", ["CPUExecutionProvider"]), "auto")
    for name in ("cpu", "openvino", "coreml"):
        everything = [p.ort_name for p in onnx_providers.PROVIDERS.values()]
        assert not onnx_providers.runs_half(onnx_providers.choose(name, everything), "auto")


def test_the_fp16_copy_computes_the_export_at_fp16_precision_and_is_cached(
    tiny_onnx_gpen: OnnxFaceModel, tmp_path: Path
) -> None:
    fp32 = tmp_path / tiny_onnx_gpen.export.path.name
    shutil.copy(tiny_onnx_gpen.export.path, fp32)
    made = onnx_half.cached_half(fp32)
    assert made.made and made.path == fp32.with_name(f"{fp32.stem}.fp16.onnx")
    graph = onnx.load(str(made.path)).graph
    weights = {t.data_type for t in graph.initializer if len(t.dims) == 4}
    assert weights == {onnx.TensorProto.FLOAT16}  # every convolution's weights
    # Fed and read as the fp32 export is.
    for value in [*graph.input, *graph.output]:
        assert value.type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    x = faces()
    want, got = run(fp32, x), run(made.path, x)
    assert got.dtype == np.float32 and got.shape == want.shape
    diff = float(np.abs(got - want).max())
    assert 0 < diff <= FP16_ATOL, diff  # really fp16 (not the export under another name), and close

    def weight_bytes(path: Path) -> int:
        return sum(len(t.raw_data) for t in onnx.load(str(path)).graph.initializer if len(t.dims) == 4)

    assert weight_bytes(made.path) * 2 == weight_bytes(fp32)  # the weights at half the size

    again = onnx_half.cached_half(fp32)
    assert not again.made and again.manifest == made.manifest
    # Cut short: refused by its hash and made again; a run killed before the manifest, likewise.
    made.path.write_bytes(made.path.read_bytes()[:1000])
    assert onnx_half.cached_half(fp32).made
    onnx_derived.manifest_path(made.path).unlink()
    assert onnx_half.cached_half(fp32).made
    # A new fp32 export (new weights, another exporter) makes its copy stale.
    model = onnx.load(str(fp32))
    first = next(t for t in model.graph.initializer if len(t.dims) == 4)
    first.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(first) * 1.01, first.name))
    onnx.save(model, str(fp32))
    assert onnx_derived.stale_reason(
        made.path, onnx_derived.file_sha256(fp32), onnx_half.converter_key()
    ) == ("made from another fp32 export")
    assert onnx_half.cached_half(fp32).made
    # Nothing left behind from the temp names.
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [fp32.name, made.path.name, made.path.name + ".json"]
    )


@pytest.fixture
def cuda_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    """ONNX Runtime lists CUDA's provider as installed (no GPU provider can run here)."""
    import onnxruntime as ort

    monkeypatch.setattr(
        ort, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"]
    )


def open_on_cuda(models: TinyModels, exported: OnnxFaceModel) -> OpenedExport:
    """The tiny generator's cached export opened for restore.provider = cuda, precision auto."""

    def build() -> tuple[torch.nn.Module, int]:
        raise AssertionError("the export is cached: nothing is built")

    return open_export(models.gpen, build, None, "cuda", 1, exported.export.path.parent, precision="auto")


def test_a_gpu_provider_that_does_not_start_leaves_the_fp32_export_to_the_cpu_provider(
    tiny_models: TinyModels,
    tiny_onnx_gpen: OnnxFaceModel,
    cuda_listed: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # This build cannot start CUDA's provider: what a machine with onnxruntime-gpu and no working
    # driver gives.
    with caplog.at_level(logging.WARNING, logger="onnxruntime"):
        opened = open_on_cuda(tiny_models, tiny_onnx_gpen)
    assert opened.note is not None and "restore.provider = cuda" in opened.note
    assert not opened.half and opened.export.path == tiny_onnx_gpen.export.path
    assert opened.session.get_providers() == ["CPUExecutionProvider"]
    x = faces()
    got = np.asarray(opened.session.run(None, {onnx_export.INPUT_NAME: x.numpy()})[0])
    assert float(np.abs(got - tiny_onnx_gpen(x).numpy()).max()) <= FP32_ATOL  # the fp32 graph, not the copy


class _GpuWithoutHalfKernels:
    """Stands for a GPU provider's sessions (none can run here): one on an fp16 copy does not
    start, as a provider lacking an operator's fp16 kernel refuses it; one on the fp32 export runs
    (on the CPU provider underneath) and reports the GPU's provider first."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def __call__(self, path: Path, providers: list[tuple[str, dict[str, str]]], threads: int | None) -> Any:
        if providers[0][0] != "CUDAExecutionProvider":
            return self.real(path, providers, threads)
        if path.name.endswith(".fp16.onnx"):
            raise RuntimeError("Could not find an implementation for Resize(19) node with name 'up'")
        session = self.real(path, providers[-1:], threads)
        session.get_providers = lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"]
        return session


def test_a_gpu_provider_that_refuses_the_fp16_copy_keeps_the_fp32_export_on_the_gpu(
    tiny_models: TinyModels,
    tiny_onnx_gpen: OnnxFaceModel,
    cuda_listed: None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from gpen_watch.restore.engines import onnx_modules

    monkeypatch.setattr(onnx_modules, "_session", _GpuWithoutHalfKernels(onnx_modules._session))
    with caplog.at_level(logging.WARNING):
        opened = open_on_cuda(tiny_models, tiny_onnx_gpen)
    assert opened.note is None and not opened.half
    assert opened.session.get_providers()[0] == "CUDAExecutionProvider"
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert said == [
        f"restore.provider = cuda runs the fp32 export of {tiny_onnx_gpen.export.path.name}: "
        "it did not start on its fp16 copy"
    ]
    x = faces()
    got = np.asarray(opened.session.run(None, {onnx_export.INPUT_NAME: x.numpy()})[0])
    assert float(np.abs(got - tiny_onnx_gpen(x).numpy()).max()) <= FP32_ATOL


class _FailingGpu:
    """A GPU provider's session that started and then fails each run (its device lost)."""

    def run(self, outputs: object, feeds: object) -> list[object]:
        raise RuntimeError("CUDA failure 999: unknown error")


def test_a_gpu_provider_that_fails_a_run_hands_the_fp32_export_to_the_cpu_provider(
    tiny_onnx_gpen: OnnxFaceModel, tmp_path: Path
) -> None:
    fp32 = tmp_path / tiny_onnx_gpen.export.path.name
    shutil.copy(tiny_onnx_gpen.export.path, fp32)
    half = onnx_half.cached_half(fp32).path
    choice = onnx_providers.choose("cuda", ["CUDAExecutionProvider", "CPUExecutionProvider"])
    session = ProviderSession(_FailingGpu(), half, choice, threads=1, cpu_path=fp32)
    x = faces()
    (got,) = session.run(None, {onnx_export.INPUT_NAME: x.numpy()})
    assert float(np.abs(got - tiny_onnx_gpen(x).numpy()).max()) <= FP32_ATOL


@pytest.fixture(scope="module")
def half_models(tmp_path_factory: pytest.TempPathFactory) -> TinyModels:
    return make_tiny_models(tmp_path_factory.mktemp("half_models"))


@pytest.fixture
def restorers(
    half_models: TinyModels, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Restorer]]:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    # No parser: the tiny models' random ParseNet masks every face out, and the faces' pixels are
    # what the generator's fp16 copy changes.
    with Restorer(tiny_config(half_models, engine="onnx"), download=False) as fp32:
        # The CPU provider stands in for a GPU's: it opens the fp16 copies as CUDA's would.
        monkeypatch.setattr(onnx_providers, "runs_half", lambda choice, precision: precision != "fp32")
        with Restorer(tiny_config(half_models, engine="onnx"), download=False) as half:
            yield {"fp32": fp32, "fp16": half}


@pytest.mark.slow  # exports the tiny generator and detector: about 30 s
def test_where_fp16_runs_the_restorer_opens_a_copy_of_the_generator_not_of_the_detector(
    restorers: dict[str, Restorer], half_models: TinyModels, grace_hopper_path: Path, tmp_path: Path
) -> None:
    out = {}
    for name, r in restorers.items():
        (result,) = r.restore_files([FileJob(grace_hopper_path, tmp_path / f"{name}.png", format="png")])
        assert result.ok and result.faces > 0, result.error
        out[name] = load_image(tmp_path / f"{name}.png").bgr8
    assert restorers["fp16"].engine_label.endswith("CPU provider, fp16")
    assert not restorers["fp32"].engine_label.endswith("fp16")
    copies = sorted(p.name for p in half_models.model_dir.iterdir() if p.name.endswith(".fp16.onnx"))
    assert copies == [f"{half_models.gpen.stem}.fp16.onnx"]
    # The faces really were restored, and by the copy: fp16 moves some values by a level.
    assert np.abs(out["fp32"].astype(int) - load_image(grace_hopper_path).bgr8.astype(int)).max() > 10
    assert not np.array_equal(out["fp16"], out["fp32"])
    # The same faces found (the detector is fp32 in both) and pasted within fp16's few levels.
    same_photo_but_overlaps(out["fp16"], out["fp32"], "tiny models, fp16 copies", levels=3)
