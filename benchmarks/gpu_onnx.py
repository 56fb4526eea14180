"""The GPU script's ONNX Runtime runs of the engine (``benchmarks.gpu``, end to end): the engine
on the CUDA and TensorRT providers, each after a warm-up that makes and caches its exports.

A provider this onnxruntime lacks is not skipped silently: its run becomes the CPU provider's,
recorded with why, so a machine without onnxruntime-gpu still says what the ONNX engine does there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.engine_modes import engine_mode

GPU_PROVIDERS = ("cuda", "tensorrt")


@dataclass(frozen=True)
class OnnxRun:
    mode: str  # "engine[onnx-cuda]", or "engine[onnx-cpu]" where the provider is missing
    asked: str
    why: str  # "" when the provider asked for is there


def available_providers() -> list[str]:
    """ONNX Runtime's providers in this environment; [] without onnxruntime."""
    try:
        import onnxruntime as ort
    except ImportError:
        return []
    return list(ort.get_available_providers())


def plan(available: list[str]) -> list[OnnxRun]:
    """One run per GPU provider, the CPU provider in place of one that is missing (once)."""
    from gpen_watch.catalog.providers import PROVIDERS

    runs: list[OnnxRun] = []
    for name in GPU_PROVIDERS:
        provider = PROVIDERS[name]
        if provider.ort_name in available:
            runs.append(OnnxRun(engine_mode("onnx", name), name, ""))
            continue
        why = (
            f"{provider.ort_name} is not in this onnxruntime ({', '.join(available) or 'not installed'}); "
            f"pip install {provider.package} in place of onnxruntime"
        )
        if all(r.mode != engine_mode("onnx", "cpu") for r in runs):
            runs.append(OnnxRun(engine_mode("onnx", "cpu"), name, why))
    return runs


def onnx_runs(
    work: Path, spec_path: Path, model_dir: Path, timeout: Callable[[], float]
) -> list[tuple[str, Callable[[], Any], dict[str, Any]]]:
    """(mode, start, what to record beside it) for each planned run; ``start`` warms up first."""
    from benchmarks import runner
    from benchmarks.engine_modes import warm_up

    out: list[tuple[str, Callable[[], Any], dict[str, Any]]] = []
    for run in plan(available_providers()):
        extra: dict[str, Any] = {"provider_asked": run.asked, **({"fallback": run.why} if run.why else {})}

        def start(mode: str = run.mode, extra: dict[str, Any] = extra) -> Any:
            done = warm_up(mode, spec_path, work, model_dir, None, timeout())
            extra["warm_up"] = done.line()
            return runner.run_in_child(mode, spec_path, work / "out" / mode, work, timeout())

        out.append((run.mode, start, extra))
    return out
