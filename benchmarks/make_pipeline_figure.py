"""Draw assets/pipeline.png: what gpen-watch does to one face, using the project's own code.

Real face geometry (reference landmarks of skimage's astronaut), GPEN's alignment template, the
paste-back mask and region. The restored face itself needs the GPEN weights, which this figure does
not pretend to have: the crop is pasted back unchanged (the identity round trip the tests check).

    python -m benchmarks.make_pipeline_figure
"""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
from skimage import data

from gpen_watch.restore import align, paste

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ref = json.loads((ROOT / "tests" / "data" / "face_landmarks.json").read_text())["skimage.data.astronaut"]
    img = np.ascontiguousarray(data.astronaut()[:, :, ::-1])
    lm = np.array(ref["landmarks5_xy"], dtype=np.float32)
    crops, affines = align.align_faces(img, lm, 512)
    mask = paste.feather_mask(512)
    region = paste.paste_region(affines[0], 512, img.shape[:2])

    marked = img.copy()
    for x, y in lm[0]:
        cv2.circle(marked, (round(x), round(y)), 4, (0, 255, 255), -1, cv2.LINE_AA)
    if region is not None:
        x0, y0, x1, y1 = region
        cv2.rectangle(marked, (x0, y0), (x1 - 1, y1 - 1), (0, 200, 0), 2, cv2.LINE_AA)
    crop = crops[0].copy()
    for x, y in align.face_template(512):
        cv2.circle(crop, (round(x), round(y)), 5, (255, 0, 255), -1, cv2.LINE_AA)
    mask_bgr = cv2.cvtColor((mask * 255).astype(np.uint8), cv2.COLOR_GRAY2BGR)
    back = paste.paste_faces(img, crops, affines)

    tiles = [marked, crop, mask_bgr, back]
    labels = ["1. detect: 5 landmarks", "2. align to GPEN template", "3. paste mask", "4. paste back"]
    out = []
    for tile, label in zip(tiles, labels):
        t = cv2.resize(tile, (384, 384), interpolation=cv2.INTER_AREA)
        bar = np.full((40, 384, 3), 255, np.uint8)
        cv2.putText(bar, label, (10, 27), cv2.FONT_HERSHEY_SIMPLEX, 0.7, (40, 40, 40), 2, cv2.LINE_AA)
        out.append(np.vstack([bar, t]))
    sheet = np.hstack([np.hstack([o, np.full((o.shape[0], 8, 3), 255, np.uint8)]) for o in out])
    (ROOT / "assets").mkdir(exist_ok=True)
    cv2.imwrite(str(ROOT / "assets" / "pipeline.png"), sheet[:, :-8])


if __name__ == "__main__":
    main()
