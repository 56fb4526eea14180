"""``python -m benchmarks.gpu``: the prepared GPU measurements, in one call of a few minutes.

Run once on a machine with a GPU, then paste the result into docs/benchmarks.md. Everything is
measured in order of importance and written as it goes (``gpu.json``, ``gpu.md`` in ``--out``), so
a run cut short by ``--budget`` still reports what it got; what the budget left out is listed as skipped.

1. GPEN-BFR-512 model-only faces/s (random weights: same compute), eager, batch 1..64, for
   bf16 / fp16 / fp32 with channels_last; channels_last off at a few batch sizes; cudnn.benchmark
   off vs on.
2. Output difference of bf16 / fp16 / TF32 against strict fp32 on the 8-bit output (max, mean).
2b. The whole face, GPEN plus ParseNet, through the engine's own ``FaceEnhancer`` (uint8 crops in,
   restored crops and parse masks back on the host), per precision and batch, channels_last on
   and off: the faces/s a worker's device loop can reach at best.
3. End to end on a photo set of ``--images`` 12 MP photos: the engine (``restore`` path, its
   defaults on this GPU; then on ONNX Runtime's CUDA and TensorRT providers, the CPU provider
   where one is missing, each after an untimed warm-up that exports), the warm one-face loop, and the daemon (one worker asking for its own
   read-ahead; the same with the old fixed 4 photos in flight; two workers sharing the GPU):
   images/s, faces/s, and the ratio of faces/s to the best model-only figure.
3b. The other face model families (``--model``, default GFPGAN-v1.4 and CodeFormer): each network
   alone, faces/s and peak memory per precision at batch 1, 8 and 32, then the engine end to end
   with each (``benchmarks.gpu_families``).
4. RetinaFace-R50 detection at ~1000 px: fp32, channels_last, fp16 autocast.
5. torch.compile (default mode, and "reduce-overhead", which uses CUDA graphs) at two batch sizes.
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import functools
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import gpu_families
from gpen_watch.config import ResolvedPrecision

BATCHES = (1, 2, 4, 8, 16, 32, 64)
PRECISIONS: tuple[ResolvedPrecision, ...] = ("bf16", "fp16", "fp32")
# --dry-run: the same code paths on the CPU with small sizes, to check the script without a GPU.
DRY = {"on": False}


def _device() -> str:
    return "cpu" if DRY["on"] else "cuda"


def _sync() -> None:
    import torch

    if not DRY["on"]:
        torch.cuda.synchronize()


def _autocast(dtype: Any) -> Any:
    import contextlib

    import torch

    if dtype is None or (DRY["on"] and dtype == torch.float16):
        return contextlib.nullcontext()
    return torch.autocast(_device(), dtype=dtype)


class Budget:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()


class Recorder:
    """Results so far, rewritten to disk after every measurement."""

    def __init__(self, out: Path, meta: dict[str, Any]) -> None:
        self.out = out
        self.data: dict[str, Any] = {
            **meta,
            "model_only": [],
            "precision_diff": [],
            "face_with_mask": [],
            "end_to_end": [],
            "families": [],
            "detector": [],
            "skipped": [],
        }

    def add(self, section: str, row: dict[str, Any]) -> None:
        self.data[section].append(row)
        print(json.dumps({section: row}), flush=True)
        self.save()

    def save(self) -> None:
        (self.out / "gpu.json").write_text(json.dumps(self.data, indent=1))
        (self.out / "gpu.md").write_text(markdown(self.data))


def time_call(fn: Callable[[], Any], min_time: float = 0.6, warmup: int = 3) -> float:
    """Seconds per call on the GPU (synchronised), after warm-up."""
    if DRY["on"]:
        min_time, warmup = 0.0, 1
    for _ in range(warmup):
        fn()
    _sync()
    n, t0 = 0, time.perf_counter()
    while True:
        for _ in range(max(1, n)):  # doubling chunks: few synchronisations
            fn()
        n += max(1, n)
        _sync()
        elapsed = time.perf_counter() - t0
        if elapsed >= min_time and n >= 3:
            return elapsed / n


def gpen_call(model: Any, precision: str, x: Any, compiled: Any = None) -> Callable[[], Any]:
    import torch

    net = compiled or model
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)

    def run() -> Any:
        with torch.inference_mode(), _autocast(dtype):
            return net(x)

    return run


def model_only(rec: Recorder, budget: Budget, size: int) -> tuple[dict[bool, Any], float]:
    """Sections 1-2; returns the models (by channels_last) and the best faces/s seen."""
    import torch

    from gpen_watch.restore.nets.gpen_model import GPEN_CONFIGS, build_gpen, prepare_for_inference

    torch.manual_seed(0)
    base = build_gpen(GPEN_CONFIGS[f"GPEN-BFR-{size}"])
    models = {
        cl: prepare_for_inference(copy.deepcopy(base), _device(), "fp32", cl).model for cl in (True, False)
    }
    torch.backends.cudnn.benchmark = True
    best = 0.0

    def measure(precision: str, cl: bool, batch: int, note: str = "") -> None:
        nonlocal best
        x = torch.rand(batch, 3, size, size, device=_device()) * 2 - 1
        if cl:
            x = x.contiguous(memory_format=torch.channels_last)
        try:
            sec = time_call(gpen_call(models[cl], precision, x))
        except torch.cuda.OutOfMemoryError:
            torch.cuda.empty_cache()
            rec.add("model_only", {"precision": precision, "channels_last": cl, "batch": batch, "oom": True})
            return
        fps = batch / sec
        best = max(best, fps)
        rec.add(
            "model_only",
            {
                "precision": precision,
                "channels_last": cl,
                "batch": batch,
                "cudnn_benchmark": torch.backends.cudnn.benchmark,
                "compile": note or "eager",
                "faces_per_s": round(fps, 1),
                "ms_per_batch": round(sec * 1000, 2),
                "peak_mem_gb": None if DRY["on"] else round(torch.cuda.max_memory_allocated() / 2**30, 2),
            },
        )

    for precision in PRECISIONS:
        for batch in BATCHES[:2] if DRY["on"] else BATCHES:
            if budget.left() < 60:
                rec.add("skipped", {"what": f"model-only {precision} batch {batch}+", "why": "budget"})
                break
            measure(precision, True, batch)
    for precision in PRECISIONS:
        for batch in (2,) if DRY["on"] else (8, 32, 64):
            if budget.left() > 60:
                measure(precision, False, batch)
    torch.backends.cudnn.benchmark = False
    for batch in (2,) if DRY["on"] else (8, 32):
        measure("bf16", True, batch)
    torch.backends.cudnn.benchmark = True
    precision_diff(rec, models[True], size)
    return models, best


def face_with_mask(rec: Recorder, budget: Budget, size: int) -> float:
    """Section 2b; returns the best faces/s of GPEN plus ParseNet."""
    import numpy as np
    import torch

    from gpen_watch.restore.engines.gpen_family import runner
    from gpen_watch.restore.nets.gpen_model import GPEN_CONFIGS, build_gpen
    from gpen_watch.restore.nets.parsenet import ParseNet
    from gpen_watch.restore.runtime.device import Placement
    from gpen_watch.restore.stages.enhance import FaceEnhancer

    torch.manual_seed(0)
    gpen = build_gpen(GPEN_CONFIGS[f"GPEN-BFR-{size}"])
    parser = ParseNet().eval()
    rng = np.random.default_rng(0)
    best = 0.0
    batches = (2,) if DRY["on"] else (8, 32, 64)
    # A dry run on a CPU: fp16 has no CPU path in the engine, and one precision shows the code works.
    for precision in ("bf16",) if DRY["on"] else PRECISIONS:
        for cl in (True, False):
            if not cl and precision != "bf16":
                continue  # channels_last off only where it matters most, to save the budget
            place = Placement(torch.device(_device()), precision, cl)
            enhancer = FaceEnhancer(
                runner(copy.deepcopy(gpen), place), place, max(batches), copy.deepcopy(parser)
            )
            for batch in batches:
                if budget.left() < 60:
                    rec.add(
                        "skipped", {"what": f"GPEN + ParseNet {precision} batch {batch}+", "why": "budget"}
                    )
                    return best
                enhancer.face_batch = batch
                crops = rng.integers(0, 256, (batch, size, size, 3), dtype=np.uint8)
                try:
                    sec = time_call(functools.partial(enhancer.enhance, crops))
                except torch.cuda.OutOfMemoryError:
                    torch.cuda.empty_cache()
                    rec.add("face_with_mask", {"precision": precision, "batch": batch, "oom": True})
                    continue
                best = max(best, batch / sec)
                rec.add(
                    "face_with_mask",
                    {
                        "precision": precision,
                        "channels_last": cl,
                        "batch": batch,
                        "faces_per_s": round(batch / sec, 1),
                        "ms_per_batch": round(sec * 1000, 2),
                        "peak_mem_gb": None
                        if DRY["on"]
                        else round(torch.cuda.max_memory_allocated() / 2**30, 2),
                    },
                )
            del enhancer
            if not DRY["on"]:
                torch.cuda.empty_cache()
    return best


def precision_diff(rec: Recorder, model: Any, size: int) -> None:
    import torch

    torch.manual_seed(1)
    n = 2 if DRY["on"] else 8
    x = (torch.rand(n, 3, size, size, device=_device()) * 2 - 1).contiguous(memory_format=torch.channels_last)

    def out8(precision: str, tf32: bool) -> Any:
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        y = gpen_call(model, precision, x)().float()
        return y.clamp(-1, 1).add(1).mul(127.5).round()

    ref = out8("fp32", False)
    for name, precision, tf32 in (("tf32", "fp32", True), ("bf16", "bf16", True), ("fp16", "fp16", True)):
        y = out8(precision, tf32)
        d = (y - ref).abs()
        rec.add(
            "precision_diff",
            {
                "precision": name,
                "max_abs_8bit": float(d.max()),
                "mean_abs_8bit": float(d.mean()),
                "nonfinite": int((~torch.isfinite(y)).sum()),
            },
        )
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cuda.matmul.allow_tf32 = False


def compile_modes(rec: Recorder, budget: Budget, models: dict[bool, Any], size: int) -> None:
    import torch

    for mode in ("default", "reduce-overhead"):
        for batch in (8, 32):
            if budget.left() < 150 or DRY["on"]:
                why = "dry run" if DRY["on"] else "budget"
                rec.add("skipped", {"what": f"torch.compile {mode} batch {batch}", "why": why})
                continue
            x = (torch.rand(batch, 3, size, size, device=_device()) * 2 - 1).contiguous(
                memory_format=torch.channels_last
            )
            t0 = time.perf_counter()
            try:
                compiled = torch.compile(
                    models[True], mode=None if mode == "default" else mode, dynamic=False
                )
                run = gpen_call(models[True], "bf16", x, compiled)
                run()
                _sync()
                compile_s = time.perf_counter() - t0
                sec = time_call(run)
            except Exception as exc:  # noqa: BLE001 - a compiler failure is a result, not a crash
                rec.add(
                    "model_only",
                    {
                        "precision": "bf16",
                        "channels_last": True,
                        "batch": batch,
                        "compile": mode,
                        "error": f"{type(exc).__name__}: {exc}"[:300],
                    },
                )
                continue
            rec.add(
                "model_only",
                {
                    "precision": "bf16",
                    "channels_last": True,
                    "batch": batch,
                    "compile": mode,
                    "faces_per_s": round(batch / sec, 1),
                    "ms_per_batch": round(sec * 1000, 2),
                    "compile_s": round(compile_s, 1),
                },
            )


def detector(rec: Recorder, budget: Budget) -> None:
    import torch

    from gpen_watch.restore.nets.retinaface import build_retinaface

    if budget.left() < 60:
        rec.add("skipped", {"what": "detector", "why": "budget"})
        return
    net = build_retinaface("resnet50").to(_device())
    h, w = (240, 320) if DRY["on"] else (768, 1024)
    x = torch.rand(1, 3, h, w, device=_device()) * 255 - 117
    for name, cl, dtype in (
        ("fp32", False, None),
        ("fp32 channels_last", True, None),
        ("fp16 autocast channels_last", True, torch.float16),
    ):
        model = net.to(memory_format=torch.channels_last) if cl else net
        xi = x.contiguous(memory_format=torch.channels_last) if cl else x

        def run(model: Any = model, xi: Any = xi, dtype: Any = dtype) -> Any:
            with torch.inference_mode(), _autocast(dtype):
                return model(xi)

        rec.add(
            "detector",
            {"variant": name, "input": f"{w}x{h}", "ms_per_image": round(time_call(run) * 1000, 2)},
        )


def end_to_end(
    rec: Recorder,
    budget: Budget,
    images: int,
    size: int,
    best_model_only: float,
    families: tuple[str, ...] = (),
) -> None:
    from benchmarks import runner
    from benchmarks.daemon_mode import run_daemon
    from benchmarks.models import write_models
    from benchmarks.photos import build_photo_set, find_solvay
    from benchmarks.spec import RunSpec

    if budget.left() < 120:
        rec.add("skipped", {"what": "end-to-end", "why": "budget"})
        return
    work = Path(tempfile.mkdtemp(prefix="gpen-gpu-bench-"))
    photos = build_photo_set(work / "photos", images, 0.3 if DRY["on"] else 12.0, find_solvay())
    photos.save(work / "photos.json")
    models = write_models(work / "models", size, tiny=DRY["on"])
    spec = RunSpec(models, work / "photos.json", work / "out", device=_device())
    spec.save(work / "spec.json")

    def in_child(mode: str) -> Callable[[], Any]:
        return lambda: runner.run_in_child(
            mode, work / "spec.json", work / "out" / mode, work, timeout=max(60, budget.left())
        )

    def daemon(name: str, sets: dict[str, object]) -> Callable[[], Any]:
        folder = work / "daemon" / name.replace(" ", "_").replace(",", "")
        return lambda: run_daemon(spec, folder, 1, max(60.0, budget.left()), sets=sets)

    # Most telling first, should the budget run out: the engine, the service itself (one worker
    # with the read-ahead it asks for), the old fixed 4 photos per worker, the warm one-face loop
    # (the baseline), two workers sharing the GPU.
    runs: list[tuple[str, Callable[[], Any]]] = [
        ("engine", in_child("engine")),
        ("daemon", daemon("daemon", {})),
        ("daemon, 4 in flight", daemon("daemon 4", {"workers.images_in_flight": 4})),
        ("warm-loop", in_child("warm-loop")),
        ("daemon, 2 workers per GPU", daemon("daemon 2w", {"workers.workers_per_device": 2})),
    ]
    if DRY["on"]:
        runs = [r for r in runs if r[0] in ("engine", "daemon", "warm-loop")]
    # The engine on ONNX Runtime (CUDA, TensorRT; the CPU provider where one is missing), after
    # the torch engine and the daemon: benchmarks.gpu_onnx.
    from benchmarks.gpu_onnx import onnx_runs

    recorded: dict[str, dict[str, Any]] = {}
    onnx = onnx_runs(work, work / "spec.json", models.model_dir, lambda: max(60, budget.left()))
    for i, (mode, start, extra) in enumerate(onnx):
        runs.insert(2 + i, (mode, start))
        recorded[mode] = extra
    for mode, start in runs:
        if budget.left() < 60:
            rec.add("skipped", {"what": f"end-to-end {mode}", "why": "budget"})
            continue
        try:
            run = start()
        except Exception as exc:  # noqa: BLE001 - one failed run is a result; the rest still run
            rec.add(
                "end_to_end",
                {"mode": mode, "error": f"{type(exc).__name__}: {exc}"[-600:], **recorded.get(mode, {})},
            )
            continue
        _record_run(rec, mode, run, best_model_only, recorded.get(mode, {}))
    from benchmarks import gpu_families

    gpu_families.end_to_end(
        rec,
        budget.left,
        families,
        work / "spec.json",
        work,
        lambda mode, run: _record_run(rec, mode, run, best_model_only, {}),
    )


def _record_run(rec: Recorder, mode: str, run: Any, best_model_only: float, extra: dict[str, Any]) -> None:
    """One end-to-end run's row."""
    rec.add(
        "end_to_end",
        {
            "mode": mode,
            "photos": run.ok,
            "faces": run.faces,
            "wall_s": round(run.wall_s, 2),
            "images_per_s": round(run.images_per_s, 2),
            "faces_per_s": round(run.faces_per_s, 1),
            "share_of_best_model_only": round(run.faces_per_s / best_model_only, 3)
            if best_model_only
            else None,
            "generator_busy": round(run.generator_busy, 3),
            "settings": run.settings,
            "stage_ms_per_image": {k: round(v / max(1, run.ok) * 1000, 1) for k, v in run.stages.items()},
            "rss_mb": run.rss_parent_mb,
            "rss_workers_mb": run.rss_workers_mb,
            **extra,
        },
    )


def markdown(data: dict[str, Any]) -> str:
    lines = [
        f"GPU: {data.get('gpu')}, torch {data.get('torch')}, CUDA {data.get('cuda')}, {data.get('date')}",
        "",
    ]
    rows = [r for r in data["model_only"] if "faces_per_s" in r]
    if rows:
        lines += [
            "GPEN model-only faces/s (eager unless stated):",
            "",
            "| precision | channels_last | compile | cudnn.benchmark | "
            + " | ".join(f"b{b}" for b in BATCHES)
            + " |",
            "|---|---|---|---|" + "---|" * len(BATCHES),
        ]
        keys = sorted(
            {
                (
                    r["precision"],
                    r["channels_last"],
                    r.get("compile", "eager"),
                    r.get("cudnn_benchmark", True),
                )
                for r in rows
            },
            key=str,
        )
        for key in keys:
            cells = {
                r["batch"]: r["faces_per_s"]
                for r in rows
                if (
                    r["precision"],
                    r["channels_last"],
                    r.get("compile", "eager"),
                    r.get("cudnn_benchmark", True),
                )
                == key
            }
            lines.append(
                f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | "
                + " | ".join(str(cells.get(b, "")) for b in BATCHES)
                + " |"
            )
        lines.append("")
    for section in ("precision_diff", "face_with_mask", "end_to_end", "families", "detector", "skipped"):
        if data[section]:
            lines.append(f"{section}:")
            lines += [f"- {json.dumps(r)}" for r in data[section]]
            lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("results") / f"gpu-{dt.date.today().isoformat()}")
    p.add_argument("--budget", type=float, default=420, help="seconds for everything (default 420)")
    p.add_argument("--images", type=int, default=24, help="12 MP photos for the end-to-end run (default 24)")
    p.add_argument("--model-size", type=int, choices=[256, 512], default=512)
    p.add_argument("--dry-run", action="store_true", help="check the script on the CPU with tiny sizes")
    p.add_argument(
        "--model",
        default=",".join(gpu_families.DEFAULT_MODELS),
        help="face models of other families measured beside GPEN (default: %(default)s; '' for none)",
    )
    args = p.parse_args(argv)
    import torch

    DRY["on"] = args.dry_run
    if args.dry_run:
        args.model_size, args.images = 256, 2
    elif not torch.cuda.is_available():
        print("no CUDA device: this script measures a GPU", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    budget = Budget(args.budget)
    rec = Recorder(
        args.out,
        {
            "date": dt.datetime.now().isoformat(timespec="seconds"),
            "gpu": "dry run on CPU" if DRY["on"] else torch.cuda.get_device_name(0),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(),
            "model": f"GPEN-BFR-{args.model_size} (random weights)",
        },
    )
    families = tuple(m.strip() for m in args.model.split(",") if m.strip())
    models, best = model_only(rec, budget, args.model_size)
    face_with_mask(rec, budget, args.model_size)
    end_to_end(rec, budget, args.images, args.model_size, best, families)
    gpu_families.model_only(
        rec,
        budget.left,
        families,
        _device(),
        ("bf16",) if DRY["on"] else PRECISIONS,
        (1,) if DRY["on"] else gpu_families.FAMILY_BATCHES,
        time_call,
    )
    detector(rec, budget)
    compile_modes(rec, budget, models, args.model_size)
    rec.save()
    print(markdown(rec.data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
