"""The real upstream GPEN pipeline, run from a user's checkout of yangxy/GPEN (never vendored).

``python -m benchmarks.real_upstream CHECKOUT BASE PHOTOSET OUTDIR PHOTO [PHOTO ...]`` builds
upstream's ``FaceEnhancement`` (its RetinaFace, GPEN generator and ParseNet, weights read from
``BASE/weights`` in upstream's file names), then restores each photo the way its ``demo.py`` loop
does (``cv2.imread``, ``process``, ``cv2.imwrite`` of the result; the side-by-side comparison file
demo.py also writes is left out) and prints one JSON line. One photo per process is the seed
recipe; several photos in one process is upstream's warm loop.

Random detector weights find no faces, so upstream's detector runs on each photo for its cost and
its answer is then replaced by the photo set's known landmarks, in upstream's own format, exactly as
``benchmarks.known_faces`` does for gpen-watch.
"""

from __future__ import annotations

import time

_T_START = time.perf_counter()  # before torch is imported: process start-up counts per photo

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from benchmarks.known_faces import FaceTable  # noqa: E402
from benchmarks.photos import PhotoSet  # noqa: E402
from benchmarks.stages import peak_rss_mb  # noqa: E402

# Upstream's demo.py settings for GPEN-BFR-256 and -512 (its README's commands).
UPSTREAM_MODELS = {256: ("GPEN-BFR-256", 1, 0.5), 512: ("GPEN-BFR-512", 2, 1.0)}


def upstream_faces(table: FaceTable, height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The known faces in the shape upstream's ``RetinaFaceDetection.detect`` returns: boxes with
    a score (N, 5) and landmarks (N, 10) as five x's followed by five y's."""
    faces = table.faces_for(height, width)
    if not faces:
        return np.zeros((0, 5), np.float32), np.zeros((0, 10), np.float32)
    dets = np.array([[*f.box, 1.0] for f in faces], np.float32)
    landms = np.array([f.landmarks.T.reshape(-1) for f in faces], np.float32)
    return dets, landms


def build(checkout: Path, base: Path, size: int, table: FaceTable) -> Any:
    """Upstream's FaceEnhancement on the CPU, its detector answering with ``table``'s faces."""
    sys.path.insert(0, str(checkout))
    from face_enhancement import FaceEnhancement  # type: ignore[import-not-found]

    model, multiplier, narrow = UPSTREAM_MODELS[size]
    args = argparse.Namespace(
        channel_multiplier=multiplier,
        narrow=narrow,
        key=None,
        alpha=1.0,
        sr_model="realesrnet",
        sr_scale=2,
        tile_size=0,
    )
    # use_sr=False as in upstream's default; its constructor still loads the SR network.
    enhancer = FaceEnhancement(
        args, base_dir=str(base) + "/", in_size=size, model=model, use_sr=False, device="cpu"
    )
    network_detect = enhancer.facedetector.detect

    def detect(img: np.ndarray, *a: Any, **kw: Any) -> tuple[np.ndarray, np.ndarray]:
        network_detect(img, *a, **kw)  # for its cost; random weights find nothing useful
        return upstream_faces(table, int(img.shape[0]), int(img.shape[1]))

    enhancer.facedetector.detect = detect
    return enhancer


def write_sr_weights(checkout: Path, base: Path) -> None:
    """Random weights for the SR network upstream's constructor loads even with SR off."""
    import torch

    sys.path.insert(0, str(checkout / "sr_model"))
    from rrdbnet_arch import RRDBNet  # type: ignore[import-not-found]

    net = RRDBNet(num_in_ch=3, num_out_ch=3, num_feat=32, num_block=23, num_grow_ch=32, scale=2)
    torch.save({"params_ema": net.state_dict()}, base / "weights" / "realesrnet_x2.pth")


def main(argv: list[str]) -> int:
    if argv[:1] == ["--setup-sr"]:
        write_sr_weights(Path(argv[1]), Path(argv[2]))
        return 0
    checkout, base, photo_set, out_dir, size, *photos = argv
    import cv2

    table = FaceTable(PhotoSet.load(Path(photo_set)).faces)
    t0 = time.perf_counter()
    enhancer = build(Path(checkout), Path(base), int(size), table)
    load_s = time.perf_counter() - t0
    per_photo = []
    faces = 0
    for photo in map(Path, photos):
        t1 = time.perf_counter()
        img = cv2.imread(str(photo), cv2.IMREAD_COLOR)
        out, orig_faces, _ = enhancer.process(img, aligned=False)
        if not cv2.imwrite(str(Path(out_dir) / photo.name), out):
            raise RuntimeError(f"{out_dir}: cannot write {photo.name}")
        per_photo.append(time.perf_counter() - t1)
        faces += len(orig_faces)
    print(
        json.dumps(
            {
                "faces": faces,
                "startup_s": t0 - _T_START,
                "load_s": load_s,
                "work_s": sum(per_photo),
                "per_photo_s": per_photo,
                "rss_mb": peak_rss_mb(),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
