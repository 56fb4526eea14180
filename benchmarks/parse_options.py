"""``python -m benchmarks.parse_options``: the engine end to end under each ParseNet option, side by
side, and how far each one's 8-bit output is from the default's.

Variants (``--variants``, comma-separated): ``auto`` (the default: fp32 on a CPU), ``int8``,
``bf16`` (restore.parse_precision), ``small`` (restore.parse_small_below = 256) and combinations
such as ``int8+small``. Each round builds a fresh engine per variant (so the int8 calibration is in
its load time) and restores the same photos in rotating order; results are written as PNG so the
comparison sees the pixels, not JPEG's rounding of them. GPEN-BFR-256 + ParseNet with random
weights, faces from the photo set's known landmarks (the detector is not run: it is the same in
every variant).

Prints, per variant: load seconds, the engine's restore stage (GPEN + ParseNet) per face (median
over rounds, and best), its ratio to ``auto``, and against ``auto``'s output: the largest and mean
absolute difference in 8-bit levels and the share of pixels more than 1 level off, over the whole
photos and over the faces' boxes.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchmarks.known_faces import FaceTable, KnownFaces
from benchmarks.models import write_models
from benchmarks.photos import PhotoSet, build_photo_set
from gpen_watch.config import ParsePrecision, RestoreConfig


@dataclass
class Tally:
    load_s: list[float] = field(default_factory=list)
    per_face_s: list[float] = field(default_factory=list)
    faces: int = 0


def variant_config(name: str, base: RestoreConfig) -> RestoreConfig:
    """The restore settings a variant name stands for."""
    precision: ParsePrecision = "auto"
    small = 0
    for part in name.split("+"):
        if part == "small":
            small = 256
        elif part in ("auto", "fp32", "bf16", "int8"):
            precision = part  # type: ignore[assignment]
        else:
            raise SystemExit(f"unknown variant part {part!r}: use auto, fp32, bf16, int8, small")
    return dataclasses.replace(base, parse_precision=precision, parse_small_below=small)


def run_variant(cfg: RestoreConfig, photos: PhotoSet, out: Path, tally: Tally) -> None:
    from gpen_watch.restore.api import FileJob
    from gpen_watch.restore.engines.restorer import Restorer

    t0 = time.perf_counter()
    restorer = Restorer(cfg, device="cpu", download=False, detector=KnownFaces(None, FaceTable(photos.faces)))
    tally.load_s.append(time.perf_counter() - t0)
    out.mkdir(parents=True, exist_ok=True)
    jobs = [FileJob(p.path, out / f"{p.path.stem}.png", format="png") for p in photos.photos]
    restore_s = 0.0
    faces = 0
    with restorer:
        for res in restorer.restore_files(jobs):
            if not res.ok:
                raise SystemExit(f"{res.src}: {res.error}")
            restore_s += res.timings.get("restore", 0.0)
            faces += res.faces
    tally.per_face_s.append(restore_s / max(1, faces))
    tally.faces = faces


def _boxes_mask(photos: PhotoSet, hw: tuple[int, int]) -> np.ndarray:
    # The result's own size: pre-scaling made it smaller than the photo written.
    faces = FaceTable(photos.faces).faces_for(hw[0], hw[1])
    mask = np.zeros(hw, bool)
    for f in faces:
        x1, y1, x2, y2 = (round(float(v)) for v in f.box)
        mask[max(0, y1) : max(0, y2), max(0, x1) : max(0, x2)] = True
    return mask


def _read(path: Path) -> np.ndarray:
    import cv2

    pixels = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if pixels is None:
        raise SystemExit(f"{path}: cannot be read back")
    return pixels.astype(np.int16)


def compare(reference: Path, other: Path, photos: PhotoSet) -> dict[str, float]:
    """8-bit differences of ``other``'s PNGs from ``reference``'s: whole photos and face boxes."""
    diffs: list[np.ndarray] = []
    in_boxes: list[np.ndarray] = []
    for ref in sorted(reference.glob("*.png")):
        a, b = _read(ref), _read(other / ref.name)
        d = np.abs(a - b).max(axis=-1)  # a pixel differs by its worst channel
        diffs.append(d.ravel())
        in_boxes.append(d[_boxes_mask(photos, (d.shape[0], d.shape[1]))])
    whole, boxes = np.concatenate(diffs), np.concatenate(in_boxes)
    return {
        "max": float(whole.max()),
        "mean": float(whole.mean()),
        "over1": float((whole > 1).mean()),
        "box_mean": float(boxes.mean()),
        "box_over1": float((boxes > 1).mean()),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.parse_options", description=__doc__)
    ap.add_argument("--images", type=int, default=3)
    ap.add_argument("--megapixels", type=float, default=12.0)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--variants", default="auto,int8,bf16,small,int8+small")
    ap.add_argument("--keep", type=Path, help="keep the photos and results in this folder")
    args = ap.parse_args(argv)
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    if "auto" not in names:
        names.insert(0, "auto")
    with tempfile.TemporaryDirectory(prefix="gpen-parse-bench-") as tmp:
        root = args.keep or Path(tmp)
        models = write_models(root / "models", size=256, parse=True)
        photos = build_photo_set(root / "photos", args.images, args.megapixels)
        base = RestoreConfig(model=models.gpen, detector=models.detector, model_dir=models.model_dir)
        tallies = {n: Tally() for n in names}
        for r in range(args.rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            for name in order:
                run_variant(variant_config(name, base), photos, root / "out" / f"{r}" / name, tallies[name])
                print(f"round {r + 1}: {name} {tallies[name].per_face_s[-1]:.3f} s a face", flush=True)
        ref_s = statistics.median(tallies["auto"].per_face_s)
        print(f"\n{photos.total_faces} faces on {len(photos.photos)} photos; GPEN-BFR-256 + ParseNet, CPU")
        print(
            "variant | load s | restore s/face median (best) | x auto | max | mean | >1 level | box mean | box >1"
        )
        for name in names:
            t = tallies[name]
            med = statistics.median(t.per_face_s)
            d = compare(root / "out" / "0" / "auto", root / "out" / "0" / name, photos)
            print(
                f"{name} | {statistics.median(t.load_s):.1f} | {med:.3f} ({min(t.per_face_s):.3f}) | "
                f"{ref_s / med:.2f} | {d['max']:.0f} | {d['mean']:.4f} | {100 * d['over1']:.3f} % | "
                f"{d['box_mean']:.3f} | {100 * d['box_over1']:.2f} %"
            )


if __name__ == "__main__":
    main()
