"""``python -m benchmarks.generator_sizes``: seconds a face of each GPEN generator, model only.

Random weights (the same compute as the released files), one face a pass, the models' rounds
interleaved so a machine that gets busier slows them alike; prints each round, the best and the
median.
For the models table in the README (docs/benchmarks.md, "Generator sizes").
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.generator_sizes", description=__doc__)
    parser.add_argument("models", nargs="*", default=["GPEN-BFR-512", "GPEN-BFR-1024"])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: every core)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--precision", default="fp32", choices=["fp32", "fp16", "bf16"])
    args = parser.parse_args(argv)

    import torch

    from gpen_watch.restore.nets.gpen_model import GPEN_CONFIGS, GPENRunner, build_gpen, prepare_for_inference
    from gpen_watch.restore.runtime.device import set_threads, tune_malloc_for_inference

    if args.device == "cpu":
        tune_malloc_for_inference()  # as the engine does before its models load
    threads = set_threads(args.threads or None)
    runs: dict[str, GPENRunner] = {}
    for name in args.models:
        torch.manual_seed(0)
        runs[name] = prepare_for_inference(build_gpen(GPEN_CONFIGS[name]), args.device, args.precision)

    def face(name: str) -> torch.Tensor:
        size = GPEN_CONFIGS[name].size
        return torch.rand(1, 3, size, size, device=args.device) * 2 - 1

    def timed(name: str) -> float:
        x = face(name)
        t0 = time.perf_counter()
        runs[name](x)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        return time.perf_counter() - t0

    for name in runs:
        timed(name)  # warm-up: the first pass allocates and, on a GPU, picks kernels
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name in runs:
            seconds[name].append(timed(name))
    print(f"{args.device}, {threads} threads, {args.precision}, one face a pass, {args.rounds} rounds")
    for name, values in seconds.items():
        rounds = " ".join(f"{v:.2f}" for v in values)
        # Other jobs on a shared machine only ever add time: the best round is the model's cost.
        best, median = min(values), statistics.median(values)
        print(f"{name}: best {best:.2f}, median {median:.2f} s a face (rounds: {rounds})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
