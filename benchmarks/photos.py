"""The benchmark's photo set: real photos blown up to camera sizes, with their faces' landmarks.

Sources (each used when available): the 1927 Solvay conference group photo (29 faces, marked by hand
in ``solvay``), NASA's astronaut portrait from scikit-image and the US Navy's Grace Hopper portrait
from matplotlib (one face each; landmarks from a trained MTCNN, shipped with the project's test
data). Each is upscaled to about ``megapixels`` and given a fixed film grain: smooth upscaled
pixels compress far better than a camera's, which would make decoding unrealistically cheap.
Photo i also gets its index stamped into one corner, so no two files are identical (the daemon's
journal would treat byte-identical drops as duplicates).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import cv2
import numpy as np

SHARED_SOLVAY = Path("shared") / "data" / "Solvay_conference_1927.png"
# Trained RetinaFace-MobileNet0.25 weights (``--detect-real``).
SHARED_DETECTOR = Path("shared") / "fixtures" / "retinaface_mobilenet0.25_real.pth"
# Landmarks (left eye, right eye, nose, mouth left, mouth right) of the one face in each portrait.
_ASTRONAUT_FACE = [[205.0, 101.7], [246.8, 103.7], [224.7, 129.0], [201.7, 139.2], [245.3, 141.9]]
_HOPPER_FACE = [[221.7, 192.2], [309.8, 186.1], [269.4, 239.2], [232.7, 279.6], [306.6, 275.9]]
_JPEG_QUALITY = 92
_GRAIN_SIGMA = 4.0


# Source name -> (aspect w/h, per face the 5 landmarks as [x, y] normalised to [0, 1] of width and
# height): JSON-able, so the photo set travels to the measured processes as a file.
FaceMarks = dict[str, tuple[float, list[list[list[float]]]]]


@dataclass(frozen=True)
class Source:
    name: str
    bgr: np.ndarray  # (H, W, 3) uint8
    landmarks: np.ndarray  # (F, 5, 2) float32, in the source's pixels


@dataclass(frozen=True)
class Photo:
    path: Path
    source: str
    width: int
    height: int
    faces: int


@dataclass(frozen=True)
class PhotoSet:
    folder: Path
    photos: list[Photo]
    faces: FaceMarks
    notes: list[str]

    @property
    def total_faces(self) -> int:
        return sum(p.faces for p in self.photos)

    def save(self, path: Path) -> None:
        data = {
            "folder": str(self.folder),
            "photos": [{**asdict(p), "path": str(p.path)} for p in self.photos],
            "faces": self.faces,
            "notes": self.notes,
        }
        path.write_text(json.dumps(data, indent=1))

    @classmethod
    def load(cls, path: Path) -> PhotoSet:
        data = json.loads(path.read_text())
        photos = [Photo(**{**p, "path": Path(p["path"])}) for p in data["photos"]]
        faces = {k: (float(a), lm) for k, (a, lm) in data["faces"].items()}
        return cls(Path(data["folder"]), photos, faces, data["notes"])


def find_solvay(start: Path | None = None) -> Path | None:
    """``../shared/data/Solvay_conference_1927.png`` seen from the repository (or any parent)."""
    return find_shared(SHARED_SOLVAY, start)


def find_shared(relative: Path, start: Path | None = None) -> Path | None:
    """``../<relative>`` (e.g. shared/fixtures/...) seen from the repository (or any parent)."""
    here = (start or Path(__file__)).resolve()
    for folder in here.parents:
        candidate = folder / relative
        if candidate.is_file():
            return candidate
    return None


def load_sources(solvay: Path | None = None) -> tuple[list[Source], list[str]]:
    """The real photos available here, and notes on any that are missing."""
    notes: list[str] = []
    sources: list[Source] = []
    path = solvay if solvay is not None else find_solvay()
    if path is not None and path.is_file():
        from benchmarks import solvay as solvay_faces

        img = cv2.imread(str(path), cv2.IMREAD_COLOR)
        if img is not None and (img.shape[1], img.shape[0]) == solvay_faces.SIZE_WH:
            sources.append(Source("solvay-1927", img, solvay_faces.landmarks()))
        else:
            notes.append(f"{path}: not the expected 1328x568 Solvay photo; left out")
    else:
        notes.append("Solvay_conference_1927.png not found (../shared/data): group photo left out")
    from skimage import data

    sources.append(
        Source(
            "astronaut",
            np.ascontiguousarray(data.astronaut()[:, :, ::-1]),
            np.array([_ASTRONAUT_FACE], np.float32),
        )
    )
    import matplotlib.cbook

    hopper_path = matplotlib.cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)
    hopper = cv2.imread(str(hopper_path))
    if hopper is not None:
        sources.append(Source("grace-hopper", hopper, np.array([_HOPPER_FACE], np.float32)))
    else:
        notes.append(f"{hopper_path}: cannot be read; Grace Hopper's portrait left out")
    return sources, notes


def build_photo_set(folder: Path, count: int, megapixels: float, solvay: Path | None = None) -> PhotoSet:
    """Write ``count`` JPEGs of about ``megapixels`` each into ``folder``, cycling through the sources."""
    folder.mkdir(parents=True, exist_ok=True)
    sources, notes = load_sources(solvay)
    grain = np.random.default_rng(0).normal(0.0, _GRAIN_SIGMA, (509, 503, 1)).astype(np.float32)
    scaled: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    photos: list[Photo] = []
    for i in range(count):
        src = sources[i % len(sources)]
        if src.name not in scaled:
            scaled[src.name] = _upscale(src, megapixels, grain)
        pixels = scaled[src.name][0].copy()
        _stamp(pixels, i)
        path = folder / f"{i:03d}-{src.name}.jpg"
        cv2.imwrite(str(path), pixels, [cv2.IMWRITE_JPEG_QUALITY, _JPEG_QUALITY])
        h, w = pixels.shape[:2]
        photos.append(Photo(path, src.name, w, h, len(src.landmarks)))
    faces: FaceMarks = {}
    for src in sources:
        h, w = src.bgr.shape[:2]
        faces[src.name] = (w / h, (src.landmarks / np.array([w, h], np.float32)).round(5).tolist())
    return PhotoSet(folder, photos, faces, notes)


def _upscale(src: Source, megapixels: float, grain: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    h, w = src.bgr.shape[:2]
    k = (megapixels * 1e6 / (w * h)) ** 0.5
    size = (max(64, round(w * k)), max(64, round(h * k)))
    interp = cv2.INTER_CUBIC if k > 1 else cv2.INTER_AREA
    big = cv2.resize(src.bgr, size, interpolation=interp).astype(np.float32)
    reps = (-(-size[1] // grain.shape[0]), -(-size[0] // grain.shape[1]), 1)
    big += np.tile(grain, reps)[: size[1], : size[0]]
    pixels = np.clip(big, 0, 255).astype(np.uint8)
    landmarks = src.landmarks * np.array([size[0] / w, size[1] / h], np.float32)
    return pixels, landmarks


def _stamp(pixels: np.ndarray, index: int) -> None:
    """Write ``index`` as bits into 16 small blocks in the top-left corner."""
    for bit in range(16):
        value = 255 if (index >> bit) & 1 else 0
        pixels[:4, bit * 4 : bit * 4 + 4] = value
