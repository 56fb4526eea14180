"""``python -m benchmarks.upscale``: what background upscaling (restore.upscale) costs on this machine.

1. CPU seconds per input megapixel for x2 and x4, for the default upscalers' architecture
   (RealESRNet, 32 features) and the Real-ESRGAN one (64 features), random weights (same compute):
   a small photo through the tiled upscaler, median of ``--repeat`` runs.
2. Peak memory against photo size: each size in a fresh process, its high-water mark (VmHWM) less
   the frames that must exist whatever the method (the photo in and the result out). Flat means
   the tiles bound the upscaler's memory. The trunk's depth does not change the memory of one
   window (its blocks run one after another), so this part uses one block instead of 23 to stay
   short; the widths, tiles and overlap are the real ones.

Results go to stdout as a Markdown table (paste into docs/benchmarks.md). ``--device cuda`` times
part 1 on a GPU instead (the engine's tiles, batch and precision for it: bf16 where supported), on a
``--side`` photo large enough to fill the batches (e.g. 2048); ``--skip-memory`` leaves out part 2.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path


def _per_megapixel(
    scale: int, feat: int, side: int, repeat: int, threads: int, device: str
) -> tuple[float, float]:
    """Wall seconds and CPU seconds (this process, all its threads) per input megapixel, medians."""
    import numpy as np

    from gpen_watch.catalog.rrdbnet_config import RRDBConfig
    from gpen_watch.restore.nets.rrdbnet import build_rrdbnet
    from gpen_watch.restore.runtime.device import placement, set_threads, tune_malloc_for_inference
    from gpen_watch.restore.stages.upscale import Upscaler

    set_threads(threads)
    place = placement(device, "auto", True)
    if place.device.type == "cpu":
        tune_malloc_for_inference()
    up = Upscaler(build_rrdbnet(RRDBConfig(scale, num_feat=feat)), place)
    photo = np.random.default_rng(0).integers(0, 256, (side, side, 3), dtype=np.uint8)
    up.upscale(photo)  # warm-up
    wall, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        up.upscale(photo)  # ends with the result on the host: no device work is left in flight
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    mp = side * side / 1e6
    return statistics.median(wall) / mp, statistics.median(cpu) / mp


def _child_memory(scale: int, side: int) -> dict[str, float]:
    """One photo of ``side`` x ``side`` through a one-block upscaler of the default width."""
    import numpy as np
    import torch

    from gpen_watch.catalog.rrdbnet_config import RRDBConfig
    from gpen_watch.restore.nets.rrdbnet import build_rrdbnet
    from gpen_watch.restore.runtime import memory
    from gpen_watch.restore.runtime.device import Placement, set_threads, tune_malloc_for_inference
    from gpen_watch.restore.stages.upscale import Upscaler

    set_threads(2)
    tune_malloc_for_inference()
    up = Upscaler(
        build_rrdbnet(RRDBConfig(scale, num_feat=32, num_block=1)),
        Placement(torch.device("cpu"), "fp32", False),
    )
    photo = np.random.default_rng(0).integers(0, 256, (side, side, 3), dtype=np.uint8)
    before = memory.rss()
    out = up.upscale(photo)
    after = memory.rss()
    assert out is not None and before is not None and after is not None
    frames_mb = (photo.nbytes + out.nbytes) / (1 << 20)
    return {
        "side": side,
        "out_side": out.shape[0],
        "frames_mb": round(frames_mb, 1),
        "peak_mb": after.peak_mb,
        "before_mb": before.now_mb,
        "working_mb": round(after.peak_mb - before.now_mb - out.nbytes / (1 << 20), 1),
        "estimate_mb": up.working_mb,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.upscale", description=__doc__.splitlines()[0])
    ap.add_argument("--side", type=int, default=128, help="side of the timed photo (px)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--skip-time", action="store_true")
    ap.add_argument("--device", default="cpu", help="device for the timing part: cpu, cuda, cuda:N")
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--child", nargs=2, type=int, metavar=("SCALE", "SIDE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(_child_memory(*args.child)))
        return 0
    if not args.skip_time:
        where = f"{args.threads} threads" if args.device == "cpu" else args.device
        print(
            f"| upscaler | features | wall s per input MP ({where}, {args.side} px photo) | CPU s per input MP |"
        )
        print("|---|---|---|---|")
        for name, scale, feat in (
            ("RealESRNet-x2", 2, 32),
            ("RealESRNet-x4", 4, 32),
            ("RealESRGAN-x2plus", 2, 64),
            ("RealESRGAN-x4plus", 4, 64),
        ):
            wall, cpu = _per_megapixel(scale, feat, args.side, args.repeat, args.threads, args.device)
            print(f"| {name} | {feat} | {wall:.3g} | {cpu:.3g} |", flush=True)
    if args.skip_memory:
        return 0
    print()
    print(
        "| factor | photo in | result | photo + result frames | peak RSS | upscaler working set (measured) | estimate |"
    )
    print("|---|---|---|---|---|---|---|")
    root = Path(__file__).resolve().parents[1]
    for scale, sides in ((2, (1024, 1536, 2048)), (4, (512, 768, 1024))):
        for side in sides:
            done = subprocess.run(
                [sys.executable, "-m", "benchmarks.upscale", "--child", str(scale), str(side)],
                cwd=root,
                capture_output=True,
                text=True,
                check=True,
            )
            r = json.loads(done.stdout)
            print(
                f"| x{scale} | {side}x{side} | {r['out_side']}x{r['out_side']} | {r['frames_mb']:.0f} MB "
                f"| {r['peak_mb']:.0f} MB | {r['working_mb']:.0f} MB | {r['estimate_mb']} MB |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
