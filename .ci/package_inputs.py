"""What .ci/package_check restores with: tiny real-architecture models and one real photo.

Run with the checkout's venv (it needs the test helpers in tests/conftest.py and skimage); the
installed wheel then loads these files the way it loads users' own. Usage:
``python .ci/package_inputs.py FOLDER`` makes FOLDER/models/ (the detector under its registry file
name, for --model-dir, and tiny-gpen-64.pth, for --model) and FOLDER/photos/astronaut.png.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(folder: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from conftest import make_tiny_models
    from PIL import Image
    from skimage import data

    models = make_tiny_models(folder / "models")
    photos = folder / "photos"
    photos.mkdir(parents=True)
    Image.fromarray(data.astronaut()).save(photos / "astronaut.png")
    print(f"package: tiny models in {models.model_dir}, photo in {photos}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
