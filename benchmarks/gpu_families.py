"""``benchmarks.gpu``'s section on the other face model families (``--model``, by default
GFPGAN-v1.4 and CodeFormer), for the next time a GPU is lent: each family's network alone,
faces/s per precision at a few batch sizes with its peak GPU memory (random weights: the same
compute), then the engine end to end on the photo set with that model, beside GPEN's rows.

With ``--dry-run`` the same code runs on the CPU at batch 1 and one precision, to check it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

# Enough to see where each family's throughput levels off, within a short budget.
FAMILY_BATCHES = (1, 8, 32)
DEFAULT_MODELS = ("GFPGAN-v1.4", "CodeFormer")


class Timer(Protocol):
    def __call__(self, fn: Callable[[], Any], min_time: float = ..., warmup: int = ...) -> float: ...


class Rows(Protocol):
    def add(self, section: str, row: dict[str, Any]) -> None: ...


def model_only(
    rec: Rows,
    left: Callable[[], float],
    models: tuple[str, ...],
    device: str,
    precisions: tuple[str, ...],
    batches: tuple[int, ...],
    time_call: Timer,
) -> None:
    """Each family's network alone: faces/s and peak memory per precision and batch."""
    import torch

    from gpen_watch.catalog import registry
    from gpen_watch.restore.engines.verify import build_model
    from gpen_watch.restore.nets.runner import prepare_for_inference

    for name in models:
        spec = registry.get_spec(name)
        torch.manual_seed(0)
        runner = prepare_for_inference(build_model(spec), device, "fp32", True)
        fidelity = registry.face_family(name).fidelity
        for precision in precisions:
            run = dataclasses.replace(runner, precision=precision)  # type: ignore[arg-type]
            for batch in batches:
                if left() < 60:
                    rec.add(
                        "skipped", {"what": f"{name} model-only {precision} batch {batch}+", "why": "budget"}
                    )
                    return
                x = torch.rand(batch, 3, runner.size, runner.size, device=device) * 2 - 1
                w = torch.full((batch,), 0.5) if fidelity else None
                if device == "cuda":
                    torch.cuda.reset_peak_memory_stats()

                def call(run: Any = run, x: Any = x, w: Any = w) -> Any:
                    return run(x, w) if w is not None else run(x)

                try:
                    sec = time_call(call)
                except torch.cuda.OutOfMemoryError:
                    torch.cuda.empty_cache()
                    rec.add("families", {"model": name, "precision": precision, "batch": batch, "oom": True})
                    continue
                rec.add(
                    "families",
                    {
                        "model": name,
                        "precision": precision,
                        "batch": batch,
                        "faces_per_s": round(batch / sec, 1),
                        "ms_per_batch": round(sec * 1000, 2),
                        "peak_mem_gb": round(torch.cuda.max_memory_allocated() / 2**30, 2)
                        if device == "cuda"
                        else None,
                    },
                )
        del runner
        if device == "cuda":
            torch.cuda.empty_cache()


def end_to_end(
    rec: Rows,
    left: Callable[[], float],
    models: tuple[str, ...],
    spec_path: Path,
    work: Path,
    record: Callable[[str, Any], None],
) -> None:
    """The engine on the photo set with each family's model (random weights saved as its release
    stores them, beside GPEN's in the run's model folder), one row each in "end_to_end"."""
    from benchmarks import runner
    from benchmarks.engine_modes import TORCH_MODE, with_model
    from benchmarks.models import save_face_model
    from benchmarks.spec import RunSpec

    spec = RunSpec.load(spec_path)
    for name in models:
        mode = with_model(TORCH_MODE, name)
        if left() < 90:
            rec.add("skipped", {"what": f"end-to-end {mode}", "why": "budget"})
            continue
        save_face_model(spec.models.model_dir, name)
        try:
            run = runner.run_in_child(mode, spec_path, work / "out" / mode, work, timeout=max(60.0, left()))
        except Exception as exc:  # noqa: BLE001 - one failed run is a result; the rest still run
            rec.add("end_to_end", {"mode": mode, "error": f"{type(exc).__name__}: {exc}"[-600:]})
            continue
        record(mode, run)
