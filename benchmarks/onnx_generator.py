"""``python -m benchmarks.onnx_generator``: ms a face of the GPEN generator alone, PyTorch eager
beside ONNX Runtime (CPU provider, OpenVINO provider) and OpenVINO's own runtime, side by side.

Random weights in a GPEN shape (the same compute as the released file), saved once to a .pth so
every engine runs the same network, and exported by ``restore.engines.onnx_export`` (cached under
``--work``). Each engine runs in a child process of its own: a fresh heap, and the OpenVINO ones
can import ``onnxruntime-openvino`` from ``--openvino-path`` (``pip install --target``), since that
wheel replaces the plain onnxruntime one. A missing engine is reported, not fatal.

Also prints each engine's largest difference from the torch output on the same faces. Issue 36.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ENGINES = ("torch", "ort-cpu", "ort-openvino", "openvino")


def child(
    engine: str, weights: Path, work: Path, batches: list[int], rounds: int, threads: int
) -> dict[str, Any]:
    """Runs in the child: times ``engine`` at each batch, returns ms a face and the difference."""
    import numpy as np
    import torch

    from gpen_watch.restore.engines.gpen_family import load_gpen
    from gpen_watch.restore.nets.gpen_model import prepare_for_inference
    from gpen_watch.restore.runtime.device import set_threads, tune_malloc_for_inference

    tune_malloc_for_inference()
    set_threads(threads)
    faces = np.load(work / "faces.npy")
    size = faces.shape[-1]
    info: dict[str, object] = {}
    if engine == "torch":
        runner = prepare_for_inference(load_gpen(weights, download=False), "cpu", "fp32")

        def run(x: np.ndarray) -> np.ndarray:
            return runner(torch.from_numpy(x)).numpy()

        info["version"] = f"torch {torch.__version__}"
    else:
        from gpen_watch.restore.engines.onnx_export import INPUT_NAME, cached_export

        def build() -> tuple[torch.nn.Module, int]:
            return load_gpen(weights, download=False), size

        t0 = time.perf_counter()
        export = cached_export(weights, build, work)
        info["export_s"] = round(time.perf_counter() - t0, 1) if export.exported else None
        if engine == "openvino":
            import openvino as ov

            compiled = ov.Core().compile_model(str(export.path), "CPU", {"INFERENCE_NUM_THREADS": threads})

            def run(x: np.ndarray) -> np.ndarray:
                return np.asarray(compiled(x)[0])

            info["version"] = f"openvino {ov.__version__}"
        else:
            import onnxruntime as ort

            from gpen_watch.restore.engines.onnx_face_model import open_session

            session, _, note = open_session(export.path, engine.removeprefix("ort-"), threads)
            if note:
                raise RuntimeError(note)

            def run(x: np.ndarray) -> np.ndarray:
                return np.asarray(session.run(None, {INPUT_NAME: x})[0])

            info["version"] = f"onnxruntime {ort.__version__} {session.get_providers()[0]}"
    ms: dict[str, float] = {}
    for n in batches:
        x = np.ascontiguousarray(faces[:n])
        run(x)  # warm-up: first-call allocations, OpenVINO's shape specialisation
        times = []
        for _ in range(rounds):
            t = time.perf_counter()
            run(x)
            times.append(time.perf_counter() - t)
        ms[str(n)] = 1000 * statistics.median(times) / n
    out = run(np.ascontiguousarray(faces[:1]))
    np.save(work / f"out-{engine}.npy", out)
    ref = work / "out-torch.npy"
    info["max_diff"] = float(np.abs(out - np.load(ref)).max()) if ref.exists() else None
    info["ms"] = ms
    return info


def prepare(model: str, work: Path, max_batch: int) -> Path:
    """The random-weights .pth and the faces every engine gets, made once under ``work``."""
    import numpy as np
    import torch

    from gpen_watch.restore.nets.gpen_model import GPEN_CONFIGS, build_gpen

    work.mkdir(parents=True, exist_ok=True)
    weights = work / f"{model}-random.pth"
    if not weights.exists():
        torch.manual_seed(0)
        tmp = weights.with_suffix(".tmp")
        torch.save(build_gpen(GPEN_CONFIGS[model]).state_dict(), tmp)
        tmp.rename(weights)
    size = GPEN_CONFIGS[model].size
    rng = np.random.default_rng(0)
    np.save(work / "faces.npy", rng.uniform(-1, 1, (max_batch, 3, size, size)).astype(np.float32))
    for old in work.glob("out-*.npy"):
        old.unlink()
    return weights


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or "unknown CPU"


def table(results: dict[str, dict[str, Any]], batches: list[int]) -> str:
    base = results.get("torch", {}).get("ms", {})
    head = ["engine"] + [f"b{n} ms/face" for n in batches] + [f"b{n} vs torch" for n in batches]
    rows = [[*head, "max |diff|", "export s", "version"]]
    for engine, r in results.items():
        if "error" in r:
            rows.append([engine, f"not run: {r['error']}"])
            continue
        ms = r["ms"]
        ratios = [f"{base[str(n)] / ms[str(n)]:.2f}x" if str(n) in base else "-" for n in batches]
        diff = "-" if r.get("max_diff") is None else f"{r['max_diff']:.1e}"
        export = "cached" if r.get("export_s") is None else str(r["export_s"])
        export = "" if engine == "torch" else export
        rows.append([engine, *(f"{ms[str(n)]:.0f}" for n in batches), *ratios, diff, export, r["version"]])
    widths = [max(len(row[i]) for row in rows if i < len(row)) for i in range(len(head) + 3)]
    lines = []
    for row in rows:
        if len(row) == 2:
            lines.append(f"{row[0]:<{widths[0]}}  {row[1]}")
        else:
            lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)).rstrip())
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.onnx_generator", description=__doc__)
    parser.add_argument("--model", default="GPEN-BFR-512")
    parser.add_argument("--batches", default="1,4")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--work", type=Path, default=Path("/tmp/gpen_onnx_bench"))
    parser.add_argument(
        "--openvino-path",
        type=Path,
        default=None,
        help="pip --target folder with onnxruntime-openvino, openvino",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    batches = [int(b) for b in args.batches.split(",")]
    weights = args.work / f"{args.model}-random.pth"
    if args.child:
        info = child(args.child, weights, args.work, batches, args.rounds, args.threads)
        print("RESULT " + json.dumps(info))
        return 0

    prepare(args.model, args.work, max(batches))
    results: dict[str, dict[str, Any]] = {}
    # torch first: the others' differences are measured against its output.
    for engine in args.engines.split(","):
        env = dict(os.environ)
        if engine in ("ort-openvino", "openvino") and args.openvino_path:
            env["PYTHONPATH"] = os.pathsep.join(
                filter(None, [str(args.openvino_path), env.get("PYTHONPATH")])
            )
        cmd = [sys.executable, "-m", "benchmarks.onnx_generator", "--child", engine]
        cmd += ["--model", args.model, "--batches", args.batches, "--rounds", str(args.rounds)]
        cmd += ["--threads", str(args.threads), "--work", str(args.work)]
        print(f"running {engine} ...", file=sys.stderr, flush=True)
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        found = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if proc.returncode or not found:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            results[engine] = {"error": last[:160]}
        else:
            results[engine] = json.loads(found[-1].removeprefix("RESULT "))
    print(
        f"{args.model} generator alone, random weights, fp32; {cpu_model()}, {args.threads} threads; "
        f"median of {args.rounds} after a warm-up; {time.strftime('%Y-%m-%d')}"
    )
    print(table(results, batches))
    return 0


if __name__ == "__main__":
    sys.exit(main())
