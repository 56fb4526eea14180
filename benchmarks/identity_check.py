"""``python -m benchmarks.identity_check``: what the identity check costs a face, beside restoring it.

The check of one restored face is the landmark predictor on its crop before, two 150 px chips cut
from the crops before and after, and the descriptor network on both (the engine describes every
face of the photos a generator pass finished in one network pass: ``--batch`` faces here). Beside
it, the same process times what restoring that face costs: the generator alone (GPEN-BFR-512 and
GPEN-BFR-256, random weights: the same compute as the released files) and ParseNet's mask (on by
default). Rounds are interleaved, so a machine that gets busier slows them alike; other jobs only
ever add time, so the best round is each one's cost. The process's CPU seconds are counted too:
on a shared machine they say the work each part does better than the wall clock (the networks keep
both threads busy, the predictor one). Needs dlib's two model files (``--dlib``,
../shared/fixtures/dlib beside the repository by default) and, for real faces, the Solvay photo.
For docs/benchmarks.md, "The identity check".
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

SHARED = Path(__file__).resolve().parents[1].parent / "shared"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.identity_check", description=__doc__)
    parser.add_argument("--dlib", type=Path, default=SHARED / "fixtures" / "dlib")
    parser.add_argument("--photo", type=Path, default=SHARED / "data" / "Solvay_conference_1927.png")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: every core)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=8, help="faces checked in one pass")
    args = parser.parse_args(argv)

    import torch

    from gpen_watch.restore.engines.face_checks import load_identity_models
    from gpen_watch.restore.nets.gpen_model import GPEN_CONFIGS, build_gpen, prepare_for_inference
    from gpen_watch.restore.nets.parsenet import ParseNet
    from gpen_watch.restore.runtime.device import Placement, set_threads, tune_malloc_for_inference
    from gpen_watch.restore.stages.enhance import prepare_parser

    tune_malloc_for_inference()
    threads = set_threads(args.threads or None)
    cpu = torch.device("cpu")
    # As the engine loads them (restore.engines.face_checks), from the folder the files are in.
    identity = load_identity_models(args.dlib, cpu)
    torch.manual_seed(0)
    generators = {
        name: prepare_for_inference(build_gpen(GPEN_CONFIGS[name]), "cpu", "fp32")
        for name in ("GPEN-BFR-512", "GPEN-BFR-256")
    }
    place = Placement(cpu, "fp32", False)
    parsenet = prepare_parser(ParseNet(in_size=512, out_size=512), place, "fp32")
    crops = {size: _crops(args.photo, size, args.batch) for size in (512, 256)}

    def generate(name: str) -> Callable[[], tuple[float, float]]:
        size = GPEN_CONFIGS[name].size
        x = torch.rand(1, 3, size, size) * 2 - 1
        return lambda: _seconds(lambda: generators[name](x))

    def parse() -> tuple[float, float]:
        x = torch.rand(1, 3, 512, 512) * 2 - 1
        with torch.inference_mode():
            return _seconds(lambda: parsenet(x))

    def check(size: int) -> Callable[[], tuple[float, float]]:
        before, points = crops[size]
        after = before[:, :, ::-1].copy()  # another picture of the same place: the work is the same
        return lambda: _per(
            len(before), _seconds(lambda: identity.compare(list(before), list(after), list(points)))
        )

    def predictor(size: int) -> Callable[[], tuple[float, float]]:
        before, points = crops[size]
        return lambda: _per(len(before), _seconds(lambda: identity.points_of(list(before), list(points))))

    timers: dict[str, Callable[[], tuple[float, float]]] = {
        "GPEN-BFR-512, generator": generate("GPEN-BFR-512"),
        "GPEN-BFR-256, generator": generate("GPEN-BFR-256"),
        "ParseNet at 512, the mask": parse,
        "identity check, 512 px crops": check(512),
        "identity check, 256 px crops": check(256),
        "  of which the predictor, 512 px": predictor(512),
        "  of which the predictor, 256 px": predictor(256),
    }
    for timer in timers.values():
        timer()  # warm-up
    seconds: dict[str, list[tuple[float, float]]] = {name: [] for name in timers}
    for _ in range(args.rounds):
        for name, timer in timers.items():
            seconds[name].append(timer())
    best = {name: min(v[0] for v in values) for name, values in seconds.items()}
    cpu_best = {name: min(v[1] for v in values) for name, values in seconds.items()}
    print(f"cpu, {threads} threads, fp32, {args.rounds} rounds, {args.batch} faces a check; seconds a face")
    for name, values in seconds.items():
        median = statistics.median(v[0] for v in values)
        print(f"{name}: wall best {best[name]:.4f}, median {median:.4f}; CPU best {cpu_best[name]:.4f}")
    for size, model in ((512, "GPEN-BFR-512"), (256, "GPEN-BFR-256")):
        for what, table in (("wall", best), ("CPU", cpu_best)):
            cost = table[f"identity check, {size} px crops"]
            alone = table[f"{model}, generator"]
            with_mask = alone + table["ParseNet at 512, the mask"]
            print(
                f"{model} ({what}): the check is {100 * cost / alone:.1f} % of the generator's time a "
                f"face, {100 * cost / with_mask:.1f} % with ParseNet's mask (the default)"
            )
    return 0


def _per(n: int, seconds: tuple[float, float]) -> tuple[float, float]:
    return seconds[0] / n, seconds[1] / n


def _seconds(work: Callable[[], object]) -> tuple[float, float]:
    """Wall and process CPU seconds of ``work``."""
    import torch

    t0, c0 = time.perf_counter(), time.process_time()
    with torch.inference_mode():
        work()
    return time.perf_counter() - t0, time.process_time() - c0


def _crops(photo: Path, size: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` faces of the photo as GPEN's aligned crops of ``size`` px, with their landmarks in the
    crop (found by the detector's real weights beside the repository, else a face at the template)."""
    from gpen_watch.imaging.load import load_image
    from gpen_watch.restore.stages import align

    image = load_image(photo).bgr8
    template = align.face_template(size)
    landmarks = _landmarks(image)[:n]
    affines = [align.estimate_similarity(lm, template) for lm in landmarks]
    crops = np.stack([align.warp_affine_resampled(image, m, (size, size)) for m in affines])
    return crops, np.stack([align.transform_points(m, lm) for m, lm in zip(affines, landmarks)])


def _landmarks(image: np.ndarray) -> list[np.ndarray]:
    import torch

    from gpen_watch.catalog.registry import get_spec
    from gpen_watch.restore.engines.verify import load_weights
    from gpen_watch.restore.nets.fold import prepare_detector
    from gpen_watch.restore.nets.retinaface import build_retinaface
    from gpen_watch.restore.stages.detect import FaceDetector

    spec = get_spec("retinaface_mobile0.25")
    weights = SHARED / "fixtures" / "retinaface_mobilenet0.25_real.pth"
    cpu = torch.device("cpu")
    net = load_weights(build_retinaface(spec.arch), weights, spec.name)
    faces = FaceDetector(prepare_detector(net, cpu), cpu).detect([image])[0]
    return [f.landmarks.astype(np.float64) for f in faces]


if __name__ == "__main__":
    sys.exit(main())
