"""The upstream way of restoring a photo, as a baseline: one face at a time, fp32, full-frame paste.

What GPEN's and GFPGAN's inference scripts do inside a process, written from their description
(no code taken): read the photo, detect on a copy of at most 1000 px, then for each face align it,
run the generator on that one face, warp the restored face *and its mask over the whole frame* and
keep the stronger mask per pixel; blend the frame once, write it. The same models, detector code,
alignment, small-face rules and output quality as the engine, so only the pipeline differs. The engine's pre-scale
rule (restore.max_side) is applied too, so every mode writes the same pixels count.

Run as a module it restores one photo in a fresh process and prints a JSON line: that is benchmark
mode 1, the ``batch_infer.sh`` recipe (a shell loop starting one inference process per image).
"""

from __future__ import annotations

import time

_T_START = time.perf_counter()  # before torch is imported: process start-up counts in mode 1

import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import cv2  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks.known_faces import FaceTable, KnownFaces  # noqa: E402
from benchmarks.photos import PhotoSet  # noqa: E402
from benchmarks.spec import RunSpec  # noqa: E402
from benchmarks.stages import StageClock, peak_rss_mb  # noqa: E402


class UpstreamStyle:
    """Models loaded once; ``restore`` handles one photo the upstream way."""

    def __init__(self, spec: RunSpec) -> None:
        from gpen_watch.restore.engines import verify
        from gpen_watch.restore.engines.gpen_family import load_gpen, runner
        from gpen_watch.restore.runtime.device import Placement, resolve_device, set_threads
        from gpen_watch.restore.stages.detect import FaceDetector
        from gpen_watch.restore.stages.enhance import FaceEnhancer

        t0 = time.perf_counter()
        m = spec.models
        set_threads(spec.threads)
        dev = resolve_device(spec.device)
        gpen = load_gpen(m.gpen, model_dir=m.model_dir, device=str(dev), download=False)
        parser = verify.load_parser(m.model_dir, device=str(dev), download=False) if m.use_parse else None
        net = verify.load_detector(m.detector, m.model_dir, device=str(dev), download=False)
        photos = PhotoSet.load(spec.photo_set)
        table = None if spec.detect_real else FaceTable(photos.faces)
        network = FaceDetector(net, dev, max_side=spec.detect_max_side, shrink_above=spec.detect_shrink_above)
        self.detector = KnownFaces(network, table)
        self.size = int(gpen.config.size)
        # Batch 1, fp32, no channels_last: the upstream scripts' setting.
        place = Placement(dev, "fp32", False)
        self.enhancer = FaceEnhancer(runner(gpen, place), place, 1, parser)
        self.spec = spec
        restore = spec.restore_config()
        self.min_face, self.smooth_below = restore.min_face, restore.smooth_below
        self.clock = StageClock()
        self.generator = StageClock()
        self.load_s = time.perf_counter() - t0

    def restore(self, src: Path, dst: Path) -> int:
        """Restore ``src`` into ``dst`` (JPEG); returns the number of faces."""
        from gpen_watch.restore.stages import align, paste

        clock = self.clock
        with clock.time("decode"):
            img = cv2.imread(str(src), cv2.IMREAD_COLOR)
            if img is None:
                raise RuntimeError(f"{src}: cannot read")
        long_side = max(img.shape[:2])
        if self.spec.max_side and long_side > self.spec.max_side:
            with clock.time("prescale"):
                k = self.spec.max_side / long_side
                size = (round(img.shape[1] * k), round(img.shape[0] * k))
                img = cv2.resize(img, size, interpolation=cv2.INTER_AREA)
        with clock.time("detect"):
            faces = self.detector.detect([img])[0]
        # The engine's rules for small faces, so every mode restores and smooths the same faces.
        faces = [f for f in faces if f.size >= self.min_face]
        frame = _FullFrame(img)
        for face in faces:
            with clock.time("align"):
                crop, affine = align.align_faces(img, face.landmarks[None].astype(np.float32), self.size)
            with clock.time("restore"), self.generator.time("generator"):
                restored, masks = self.enhancer.enhance(crop)
            with clock.time("paste"):
                restored = paste.smooth_small_faces(restored, face.box[None], self.smooth_below)
                mask = (
                    paste.soften_parse_mask(cv2.resize(masks[0], (self.size, self.size)))
                    if masks is not None
                    else paste.feather_mask(self.size)
                )
                frame.add(restored[0], affine[0], mask)
        with clock.time("paste"):
            out = frame.blend()
        with clock.time("encode"):
            if not cv2.imwrite(str(dst), out, [cv2.IMWRITE_JPEG_QUALITY, self.spec.jpeg_quality]):
                raise RuntimeError(f"{dst}: cannot write")
        return len(faces)


class _FullFrame:
    """Upstream paste-back: every face and mask warped over the whole frame, the stronger mask wins."""

    def __init__(self, img: np.ndarray) -> None:
        self.img = img
        self.face: np.ndarray | None = None
        self.mask: np.ndarray | None = None

    def add(self, face: np.ndarray, affine: np.ndarray, mask: np.ndarray) -> None:
        h, w = self.img.shape[:2]
        inverse = cv2.invertAffineTransform(affine)
        face_full = cv2.warpAffine(face, inverse, (w, h), flags=cv2.INTER_CUBIC)
        mask_full = cv2.warpAffine(mask, inverse, (w, h), flags=cv2.INTER_CUBIC)
        if self.face is None or self.mask is None:
            self.face, self.mask = face_full, mask_full
            return
        stronger = mask_full > self.mask
        self.face = np.where(stronger[..., None], face_full, self.face)
        self.mask = np.where(stronger, mask_full, self.mask)

    def blend(self) -> np.ndarray:
        if self.face is None or self.mask is None:
            return self.img
        m = np.clip(self.mask, 0.0, 1.0)[..., None]
        out = self.img.astype(np.float32) * (1.0 - m) + self.face.astype(np.float32) * m
        blended: np.ndarray = np.clip(out + 0.5, 0, 255).astype(np.uint8)
        return blended


def main(argv: list[str]) -> int:
    """``python -m benchmarks.upstream SPEC SRC DST``: one photo, one process (mode 1)."""
    spec_path, src, dst = argv
    spec = RunSpec.load(Path(spec_path))
    pipeline = UpstreamStyle(spec)
    t0 = time.perf_counter()
    faces = pipeline.restore(Path(src), Path(dst))
    work_s = time.perf_counter() - t0
    print(
        json.dumps(
            {
                "faces": faces,
                "startup_s": t0 - _T_START - pipeline.load_s,  # interpreter, imports
                "load_s": pipeline.load_s,
                "work_s": work_s,
                "stages": pipeline.clock.totals,
                "generator_s": pipeline.generator.totals.get("generator", 0.0),
                "rss_mb": peak_rss_mb(),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
