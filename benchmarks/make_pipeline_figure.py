"""Draw docs/assets/pipeline.png: what gpen-watch does to the faces of a real photo, with its own code.

The 1927 Solvay group photo (../shared/data), its faces found by RetinaFace-MobileNet0.25 with its
real, trained weights (../shared/fixtures), aligned to GPEN's template, restored, pasted back.
The GPEN weights cannot be downloaded where this is drawn: the restoration step runs the real
GPEN-BFR-256 architecture with random weights, so its faces are noise, and the figure says so.

    python -m benchmarks.make_pipeline_figure
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import torch

from benchmarks.photos import find_solvay
from gpen_watch.imaging.load import load_image
from gpen_watch.restore.engines.gpen_family import runner
from gpen_watch.restore.nets.gpen_model import GPEN_CONFIGS, build_gpen
from gpen_watch.restore.nets.retinaface import build_retinaface
from gpen_watch.restore.runtime.device import Placement
from gpen_watch.restore.stages import align, paste
from gpen_watch.restore.stages.detect import FaceDetector
from gpen_watch.restore.stages.enhance import FaceEnhancer

ROOT = Path(__file__).resolve().parents[1]
DETECTOR_WEIGHTS = Path("fixtures") / "retinaface_mobilenet0.25_real.pth"
WIDTH = 1328  # the photo's own width: the first row shows it at 1:1
TILE = 212  # six tiles across the photo's width
SIZE = 256  # GPEN-BFR-256's crop
# Aligned crops shown in the second row: front-row faces nearest the middle.
SHOWN = 3


def _real_detector(solvay: Path) -> FaceDetector:
    weights = solvay.parents[1] / DETECTOR_WEIGHTS
    cpu = torch.device("cpu")
    net = build_retinaface("mobile0.25")
    net.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True), strict=True)
    return FaceDetector(net, cpu)


def _label(tile: np.ndarray, text: str, scale: float = 0.5) -> np.ndarray:
    bar = np.full((34, tile.shape[1], 3), 255, np.uint8)
    cv2.putText(bar, text, (6, 23), cv2.FONT_HERSHEY_SIMPLEX, scale, (40, 40, 40), 1, cv2.LINE_AA)
    return np.vstack([bar, tile])


def _tile(image: np.ndarray) -> np.ndarray:
    return cv2.resize(image, (TILE, TILE), interpolation=cv2.INTER_AREA)


def main() -> None:
    solvay = find_solvay()
    if solvay is None:
        raise SystemExit("Solvay_conference_1927.png not found in ../shared/data")
    img = load_image(solvay).bgr8  # as the engine decodes it
    faces = _real_detector(solvay).detect([img])[0]
    lm = np.stack([f.landmarks for f in faces]).astype(np.float32)
    crops, affines = align.align_faces(img, lm, SIZE)
    torch.manual_seed(0)
    gpen = build_gpen(GPEN_CONFIGS["GPEN-BFR-256"])
    place = Placement(torch.device("cpu"), "fp32", False)
    enhancer = FaceEnhancer(runner(gpen, place), place, 8)

    marked = img.copy()
    for f in faces:
        x0, y0, x1, y1 = (round(float(v)) for v in f.box)
        cv2.rectangle(marked, (x0, y0), (x1, y1), (0, 200, 0), 1, cv2.LINE_AA)
        for x, y in f.landmarks:
            cv2.circle(marked, (round(float(x)), round(float(y))), 2, (0, 255, 255), -1, cv2.LINE_AA)
    row1 = _label(
        marked,
        f"1. detect: RetinaFace-MobileNet0.25, trained weights: {len(faces)} faces, 5 landmarks each",
        0.6,
    )

    # The front row's faces nearest the middle: large enough to see.
    front = sorted(range(len(faces)), key=lambda i: -float(faces[i].box[1]))[:9]
    pick = sorted(front, key=lambda i: abs(float(faces[i].box[0]) - WIDTH / 2))[:SHOWN]
    pick.sort(key=lambda i: float(faces[i].box[0]))
    tiles = []
    for n, i in enumerate(pick):
        crop = crops[i].copy()
        if n == 0:
            for x, y in align.face_template(SIZE):
                cv2.circle(crop, (round(float(x)), round(float(y))), 3, (255, 0, 255), -1, cv2.LINE_AA)
        tiles.append(_label(_tile(crop), "2. aligned to template" if n == 0 else "2. aligned"))
    mask = cv2.cvtColor((paste.feather_mask(SIZE) * 255).astype(np.uint8), cv2.COLOR_GRAY2BGR)
    tiles.append(_label(_tile(mask), "3. paste mask"))
    # Only the face shown is restored: the random generator's output says nothing of the others.
    one = slice(pick[0], pick[0] + 1)
    restored, _ = enhancer.enhance(crops[one])
    back = paste.paste_faces(img, restored, affines[one])
    tiles.append(_label(_tile(restored[0]), "4. GPEN, RANDOM weights"))
    region = paste.paste_region(affines[pick[0]], SIZE, img.shape[:2])
    assert region is not None
    x0, y0, x1, y1 = region
    zoom = cv2.resize(back[y0:y1, x0:x1], (TILE, TILE), interpolation=cv2.INTER_CUBIC)
    tiles.append(_label(zoom, "5. pasted back"))
    gap = (WIDTH - TILE * len(tiles)) // (len(tiles) - 1)
    parts: list[np.ndarray] = []
    for t in tiles:
        if parts:
            parts.append(np.full((t.shape[0], gap, 3), 255, np.uint8))
        parts.append(t)
    row2 = np.hstack(parts)
    row2 = np.hstack([row2, np.full((row2.shape[0], WIDTH - row2.shape[1], 3), 255, np.uint8)])
    sheet = np.vstack([row1, np.full((8, WIDTH, 3), 255, np.uint8), row2])
    (ROOT / "docs" / "assets").mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(ROOT / "docs" / "assets" / "pipeline.png"), sheet, [cv2.IMWRITE_PNG_COMPRESSION, 9])


if __name__ == "__main__":
    main()
