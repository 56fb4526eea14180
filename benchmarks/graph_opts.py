"""``python -m benchmarks.graph_opts``: ParseNet and RetinaFace-R50 passes under each load-time variant.

Model only, random weights with randomised BatchNorm statistics, one face (ParseNet at 512 px) or
one shrunk photo (the detector at the engine's 1000 px input), variants run in interleaved rounds
so a shared machine's load hits each alike. Prints the median and best milliseconds a pass, the
ratio to plain eager fp32, and the largest difference of the outputs from it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings
from collections.abc import Callable

import torch
from torch import nn

from gpen_watch.restore.nets.fold import as_channels_last, fold_batchnorm, prepare_conv_net
from gpen_watch.restore.nets.parsenet import ParseNet
from gpen_watch.restore.nets.quant import quantize_parser, quantize_static
from gpen_watch.restore.nets.retinaface import build_retinaface

Variant = Callable[[torch.Tensor], torch.Tensor]


def _randomise_bn(model: nn.Module) -> None:
    with torch.no_grad():
        for bn in model.modules():
            if isinstance(bn, nn.BatchNorm2d) and bn.running_mean is not None and bn.running_var is not None:
                bn.running_mean.uniform_(-0.3, 0.3)
                bn.running_var.uniform_(0.5, 2.0)
                bn.weight.uniform_(0.5, 1.5)
                bn.bias.uniform_(-0.2, 0.2)


def _first(out: object) -> torch.Tensor:
    return out[0] if isinstance(out, (tuple, list)) else out  # type: ignore[return-value]


def variants(
    build: Callable[[], nn.Module],
    compile_too: bool,
    quantize: Callable[[nn.Module], nn.Module] | None = None,
) -> tuple[dict[str, Variant], dict[str, float]]:
    """The variants of one network, and the seconds each took to prepare (compile and int8
    calibration included). ``quantize`` makes the int8 variant from the folded network."""
    out: dict[str, Variant] = {}
    prep: dict[str, float] = {}

    def add(name: str, make: Callable[[], Variant]) -> None:
        t0 = time.perf_counter()
        out[name] = make()
        prep[name] = time.perf_counter() - t0

    def plain() -> Variant:
        m = build()
        return lambda x: _first(m(x))

    def folded(
        channels_last: bool = False,
        dtype: torch.dtype | None = None,
        autocast: bool = False,
        fold: bool = True,
    ) -> Variant:
        m = build()
        if fold:
            fold_batchnorm(m)
        if channels_last:
            m = m.to(memory_format=torch.channels_last)
        if dtype is not None:
            m = m.to(dtype)

        def run(x: torch.Tensor) -> torch.Tensor:
            if channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            if dtype is not None:
                x = x.to(dtype)
            if autocast:
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    return _first(m(x)).float()
            return _first(m(x)).float()

        return run

    add("fp32 eager", plain)
    add("fp32 folded", folded)
    add("fp32 channels_last (not folded)", lambda: folded(channels_last=True, fold=False))
    add("fp32 folded channels_last", lambda: folded(channels_last=True))

    def loaded(rewrite: bool = True) -> Variant:
        m = prepare_conv_net(build(), torch.device("cpu"), rewrite=rewrite)
        return lambda x: _first(m(as_channels_last(x)))

    add("fp32 before rewrites (folded, channels_last, copies dropped)", lambda: loaded(rewrite=False))
    add("fp32 as loaded (and polyphase upsampling, ring-fixed padding)", loaded)
    if quantize is not None:
        q = quantize

        def int8() -> Variant:
            m = q(prepare_conv_net(build(), torch.device("cpu"), rewrite=False))
            return lambda x: _first(m(as_channels_last(x)))

        add("int8 static (folded, torch.ao FX)", int8)
    add("bf16 autocast (folded)", lambda: folded(autocast=True))
    add("bf16 weights (folded)", lambda: folded(dtype=torch.bfloat16))
    add("bf16 weights channels_last (folded)", lambda: folded(channels_last=True, dtype=torch.bfloat16))
    if compile_too:

        def compiled() -> Variant:
            m = build()
            fold_batchnorm(m)
            c = torch.compile(m)
            return lambda x: _first(c(x))

        add("fp32 folded + torch.compile", compiled)
    return out, prep


def measure(
    name: str,
    build: Callable[[], nn.Module],
    x: torch.Tensor,
    rounds: int,
    compile_too: bool,
    keep: str,
    quantize: Callable[[nn.Module], nn.Module] | None = None,
) -> None:
    runs, prep = variants(build, compile_too, quantize)  # int8 calibration runs outside inference mode
    with torch.inference_mode():
        runs = {k: v for k, v in runs.items() if k == "fp32 eager" or any(w in k for w in keep.split(","))}
        ref = runs["fp32 eager"](x)
        times: dict[str, list[float]] = {k: [] for k in runs}
        diff: dict[str, float] = {}
        for k, f in runs.items():  # warm-up pass (oneDNN primitives, compiled kernels), and the check
            t0 = time.perf_counter()
            y = f(x)
            prep[k] += time.perf_counter() - t0
            diff[k] = float((y - ref).abs().max())
        for _ in range(rounds):
            for k, f in runs.items():
                t0 = time.perf_counter()
                f(x)
                times[k].append(time.perf_counter() - t0)
    base = statistics.median(times["fp32 eager"])
    print(f"\n{name}, input {tuple(x.shape)}, {rounds} interleaved rounds, load {os.getloadavg()[0]:.2f}")
    print(
        f"{'variant':38s} {'median ms':>10s} {'best ms':>8s} {'x eager':>8s} {'max diff':>9s} {'prep+1st s':>10s}"
    )
    for k, ts in times.items():
        med = statistics.median(ts)
        print(
            f"{k:38s} {med * 1e3:10.0f} {min(ts) * 1e3:8.0f} {base / med:8.2f} {diff[k]:9.2e} {prep[k]:10.1f}"
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.graph_opts", description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--compile", action="store_true", help="also torch.compile (inductor); slow to prepare")
    p.add_argument("--only", choices=["parse", "detect"], help="one network only")
    p.add_argument(
        "--variants", default="", help="comma-separated parts of variant names to keep (default all)"
    )
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")

    def parse() -> nn.Module:
        torch.manual_seed(0)
        m: nn.Module = ParseNet().eval()
        _randomise_bn(m)
        return m

    def detect() -> nn.Module:
        torch.manual_seed(0)
        m: nn.Module = build_retinaface("resnet50")
        _randomise_bn(m)
        return m

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    if args.only in (None, "parse"):
        measure(
            "ParseNet",
            parse,
            torch.rand(1, 3, 512, 512) * 2 - 1,
            args.rounds,
            args.compile,
            args.variants,
            quantize_parser,
        )
    if args.only in (None, "detect"):
        # A portrait shrunk to the detector's 1000 px, mean-subtracted BGR.
        measure(
            "RetinaFace-R50",
            detect,
            torch.rand(1, 3, 1024, 1024) * 255 - 115,
            args.rounds,
            args.compile,
            args.variants,
            # Calibrated on another random input of the detector's range, not the measured one.
            lambda m: quantize_static(m, torch.rand(2, 3, 512, 512) * 255 - 115),
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
