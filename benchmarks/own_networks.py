"""``python -m benchmarks.own_networks``: the project's own RetinaFace and ParseNet beside facexlib's.

The same weights and the same input for both: RetinaFace-MobileNet0.25 with its real weights
(../shared) and RetinaFace-R50 with random ones, each on the Solvay photo padded to a multiple of 32
(or skimage's astronaut where ../shared is absent), and ParseNet with random weights on four 512 px
crops of it. A line per network and implementation: the seconds to import and build it ("build s")
and the resident memory that added (torch, NumPy, OpenCV and Pillow already loaded, as in a
restorer), and its peak over one pass, each measured in a fresh process of
its own (facexlib's import brings torchvision); then the median and best milliseconds a pass,
measured in one process with all three loaded, in interleaved rounds so that a shared machine's
load falls on each alike. The ratio is facexlib's median over this one's (above 1: faster).
"own, prepared" is the network as the engine runs it: BatchNorm folded, channels_last, and for
ParseNet the rewrites of ``upconv`` and ``reflect_conv``.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

IMPLS = ("facexlib", "own", "own, prepared")
NETS = ("RetinaFace-MobileNet0.25", "RetinaFace-R50", "ParseNet")
SHARED = Path(__file__).resolve().parents[1].parent / "shared"
SOLVAY = SHARED / "data" / "Solvay_conference_1927.png"
REAL_MOBILENET = SHARED / "fixtures" / "retinaface_mobilenet0.25_real.pth"


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _photo() -> Any:
    import numpy as np

    if SOLVAY.is_file():
        import cv2

        read = cv2.imread(str(SOLVAY), cv2.IMREAD_COLOR)
        if read is None:
            raise SystemExit(f"cannot read {SOLVAY}")
        bgr = read
    else:
        from skimage import data

        bgr = np.ascontiguousarray(data.astronaut()[:, :, ::-1])
    h, w = bgr.shape[:2]
    padded = np.empty((-(-h // 32) * 32, -(-w // 32) * 32, 3), np.uint8)
    padded[:] = (104, 117, 123)
    padded[:h, :w] = bgr
    return padded


def _input(net: str) -> Any:
    import numpy as np
    import torch

    photo = _photo()
    if net == "ParseNet":
        # Four square crops across the photo, resized to the parser's 512 px, in its [-1, 1].
        side = min(photo.shape[:2])
        lefts = np.linspace(0, photo.shape[1] - side, 4).astype(int)
        crops = np.stack([photo[:side, left : left + side] for left in lefts])
        x = torch.from_numpy(crops).permute(0, 3, 1, 2).float() / 127.5 - 1
        return torch.nn.functional.interpolate(x, size=(512, 512), mode="area")
    return torch.from_numpy(photo).permute(2, 0, 1).unsqueeze(0).float() - torch.tensor(
        [104.0, 117.0, 123.0]
    ).view(1, 3, 1, 1)


def _state(net: str) -> dict[str, Any]:
    """The weights both implementations load: the real file, or random ones made the same way
    each time (the own module's initialisation, seed 0, BatchNorm statistics randomised)."""
    import torch

    if net == "RetinaFace-MobileNet0.25" and REAL_MOBILENET.is_file():
        return dict(torch.load(REAL_MOBILENET, map_location="cpu", weights_only=True))
    from benchmarks.graph_opts import _randomise_bn
    from gpen_watch.restore.nets.parsenet import ParseNet
    from gpen_watch.restore.nets.retinaface import build_retinaface

    torch.manual_seed(0)
    model = ParseNet() if net == "ParseNet" else build_retinaface(_arch(net))
    _randomise_bn(model)
    return model.state_dict()


def _arch(net: str) -> str:
    return "resnet50" if net == "RetinaFace-R50" else "mobile0.25"


def _build(impl: str, net: str) -> Any:
    """``impl``'s network ``net`` with random weights (loaded by the caller)."""
    import torch

    if impl == "facexlib":
        import warnings

        warnings.simplefilter("ignore")  # torchvision's resnet50(pretrained=False) deprecation
        if net == "ParseNet":
            from facexlib.parsing.parsenet import ParseNet as Reference

            return Reference(in_size=512, out_size=512, parsing_ch=19)
        from facexlib.detection.retinaface import RetinaFace

        return RetinaFace(network_name=_arch(net), half=False, device=torch.device("cpu"))
    from gpen_watch.restore.nets.parsenet import ParseNet
    from gpen_watch.restore.nets.retinaface import build_retinaface

    return ParseNet() if net == "ParseNet" else build_retinaface(_arch(net))


def _ready(impl: str, net: str, state: dict[str, Any]) -> Any:
    import torch

    model = _build(impl, net)
    model.load_state_dict(state, strict=True)
    model.eval()
    if impl == "own, prepared":
        from gpen_watch.restore.nets.fold import prepare_conv_net, prepare_detector

        cpu = torch.device("cpu")
        model = prepare_conv_net(model, cpu) if net == "ParseNet" else prepare_detector(model, cpu)
    return model


def _as_input(impl: str, x: Any) -> Any:
    from gpen_watch.restore.nets.fold import as_channels_last

    return as_channels_last(x) if impl == "own, prepared" else x


def child(impl: str, net: str) -> dict[str, Any]:
    """One implementation of one network alone in this process: what importing and building it
    costs, and its peak memory over a pass."""
    # What the engine imports anyway, so that the import costs are only the networks' own.
    import cv2  # noqa: F401
    import numpy  # noqa: F401
    import PIL.Image  # noqa: F401
    import torch

    base = _rss_mb()
    t0 = time.perf_counter()
    model = _build(impl, net)
    build_s = time.perf_counter() - t0
    after_import = _rss_mb()
    del model
    x = _input(net)
    model = _ready(impl, net, _state(net))
    with torch.inference_mode():
        model(_as_input(impl, x))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"build_s": build_s, "import_mb": after_import - base, "peak_mb": peak_mb}


def speeds(net: str, rounds: int) -> dict[str, list[float]]:
    """Milliseconds a pass of each implementation, all in this process on the same input, in
    interleaved rounds so that a shared machine's load falls on each alike."""
    import torch

    x = _input(net)
    state = _state(net)
    models = {impl: _ready(impl, net, state) for impl in IMPLS}
    inputs = {impl: _as_input(impl, x) for impl in IMPLS}
    times: dict[str, list[float]] = {impl: [] for impl in IMPLS}
    with torch.inference_mode():
        for impl in IMPLS:
            models[impl](inputs[impl])
        for _ in range(rounds):
            for impl in IMPLS:
                t = time.perf_counter()
                models[impl](inputs[impl])
                times[impl].append((time.perf_counter() - t) * 1000)
    return times


def _run_child(impl: str, net: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.own_networks", "--child", impl, net],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["failed"])[-1]}
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.own_networks", description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--only", choices=NETS, help="one network only")
    p.add_argument("--child", nargs=2, metavar=("IMPL", "NET"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1])))
        return 0
    import torch

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.rounds} rounds")
    if not SOLVAY.is_file():
        print("note: ../shared is absent: the astronaut photo and random MobileNet weights")
    print(
        f"{'network':<26}{'implementation':<16}{'build s':>9}{'import MB':>10}{'peak MB':>9}"
        f"{'median ms':>11}{'best ms':>9}{'ratio':>7}"
    )
    for net in [args.only] if args.only else NETS:
        alone = {impl: _run_child(impl, net) for impl in IMPLS}
        times = speeds(net, args.rounds)
        ref = statistics.median(times["facexlib"])
        for impl in IMPLS:
            r, t = alone[impl], times[impl]
            cost = (
                f"  {r['error']}"
                if "error" in r
                else f"{r['build_s']:>9.2f}{r['import_mb']:>10.0f}{r['peak_mb']:>9.0f}"
            )
            median = statistics.median(t)
            print(f"{net:<26}{impl:<16}{cost}{median:>11.0f}{min(t):>9.0f}{ref / median:>7.2f}")
        print(f"{'':<26}input {tuple(_input(net).shape)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
