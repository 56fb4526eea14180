"""``python -m benchmarks.detect_sizes``: what detecting at a photo's own size up to 1500 px costs.

The detector's time a photo (``FaceDetector.prepare`` + ``detect``, as the engine runs them) and the
faces it finds, under the rule before (every photo over restore.detect_max_side = 1000 px shrunk
to 1000) and the rule now (only photos over restore.detect_shrink_above = 1500 px shrunk), for the
benchmark's source photos at their own sizes and at the benchmark's sizes (2 and 12 MP, where both
rules shrink). RetinaFace-R50 with random weights (the same compute as the released file) and, where
../shared has them, RetinaFace-MobileNet0.25 with its real weights (whose face counts mean
something; the random R50 reports none, see below). Rounds interleave the two rules, so a machine that gets busier slows them alike.
For docs/benchmarks.md, "Detection at the photo's own size up to 1500 px".
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import cv2
import numpy as np
import torch

from benchmarks.photos import SHARED_DETECTOR, Source, find_shared, load_sources
from gpen_watch.restore.nets.fold import prepare_detector
from gpen_watch.restore.nets.retinaface import RetinaFace, build_retinaface
from gpen_watch.restore.runtime.device import set_threads
from gpen_watch.restore.stages.detect import FaceDetector

RULES = {"before (all over 1000 px shrunk)": 1000, "now (over 1500 px shrunk)": 1500}


def _networks(real: Path | None) -> dict[str, RetinaFace]:
    cpu = torch.device("cpu")
    torch.manual_seed(0)
    nets = {"R50 (random)": build_retinaface("resnet50")}
    if real is not None:
        mobile = build_retinaface("mobile0.25")
        mobile.load_state_dict(torch.load(real, map_location="cpu", weights_only=True), strict=True)
        nets["MobileNet (real)"] = mobile
    return {name: prepare_detector(net, cpu) for name, net in nets.items()}


def _photos(sources: list[Source], megapixels: list[float]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for src in sources:
        h, w = src.bgr.shape[:2]
        out[f"{src.name} {w}x{h}"] = src.bgr
        for mp in megapixels:
            k = (mp * 1e6 / (w * h)) ** 0.5
            size = (round(w * k), round(h * k))
            out[f"{src.name} {size[0]}x{size[1]}"] = cv2.resize(src.bgr, size, interpolation=cv2.INTER_CUBIC)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.detect_sizes", description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: every core)")
    parser.add_argument("--megapixels", default="2,12", help="benchmark sizes also measured (MP)")
    args = parser.parse_args(argv)
    threads = set_threads(args.threads or None)
    sources, notes = load_sources()
    for note in notes:
        print(f"note: {note}")
    photos = _photos(sources, [float(m) for m in args.megapixels.split(",") if m])
    nets = _networks(find_shared(SHARED_DETECTOR))
    cpu = torch.device("cpu")
    print(f"cpu, {threads} threads, {args.rounds} rounds; ms a photo (median, best) and faces found")
    for net_name, net in nets.items():
        # Random weights score thousands of anchors over 0.9, and their NMS would cost more than
        # the network: a threshold nothing passes leaves the network's cost, as a real one's is.
        threshold = 0.9 if "real" in net_name else 1.0
        detectors = {
            rule: FaceDetector(net, cpu, threshold=threshold, shrink_above=above)
            for rule, above in RULES.items()
        }
        for photo_name, bgr in photos.items():
            seconds: dict[str, list[float]] = {rule: [] for rule in RULES}
            faces: dict[str, int] = {}
            for det in detectors.values():
                det.detect([det.prepare(bgr)])  # warm-up: first pass at a size allocates
            for _ in range(args.rounds):
                for rule, det in detectors.items():
                    t0 = time.perf_counter()
                    found = det.detect([det.prepare(bgr)])[0]
                    seconds[rule].append(time.perf_counter() - t0)
                    faces[rule] = len(found)
            cells = [
                f"{rule}: {statistics.median(s) * 1e3:.0f} ms (best {min(s) * 1e3:.0f}), {faces[rule]} faces"
                for rule, s in seconds.items()
            ]
            print(f"{net_name:17} {photo_name:26} " + " | ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
