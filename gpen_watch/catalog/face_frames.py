"""How a face model family frames a face, torch-free: where the five landmarks go in its crop, how
the crop's pixels become the network's numbers, and how the restored crop is blended back.

Each family in ``registry.FACE_FAMILIES`` names its frame; the align, enhance and paste stages read
it from the model set a photo is restored with, so two families restore the same detected faces,
each as it was trained.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Point = tuple[float, float]


@dataclass(frozen=True)
class PasteMask:
    """How a restored crop is blended into the photo, in crop space at 512 px (scaled linearly
    for other sides).

    ``plain``: the mask without a face parser: "feather" (a rounded rectangle that fades to zero
    before the crop's edge, ``paste.feather_mask``) or "square" (the whole crop but a margin,
    Gaussian-softened, ``paste.square_mask``). With a parser, ParseNet's classes ``not_face`` are
    left out, and the face mask is softened: ``parse_sigma`` is the sigma of the two Gaussian blurs;
    the outer ``parse_border`` pixels are zeroed before them (a soft edge), or after them when
    ``border_after_blur`` (a hard one, as facexlib does)."""

    plain: Literal["feather", "square"]
    not_face: tuple[int, ...]
    parse_border: float
    parse_sigma: float
    border_after_blur: bool = False

    @property
    def plain_label(self) -> str:
        """The mask without a parser, as the log and status name it: "feathered mask"."""
        return "feathered mask" if self.plain == "feather" else "square mask"


@dataclass(frozen=True)
class FaceFrame:
    """``template``: the five landmarks' places (x, y) in a 512 px crop, in the detector's order
    (left eye, right eye, nose tip, left and right mouth corners; left as seen), scaled linearly
    for other sides. ``mean`` and ``std``: per RGB channel, on pixels in [0, 1]; the network takes
    (pixel - mean) / std and gives the same scale back."""

    name: str
    template: tuple[Point, Point, Point, Point, Point]
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    mask: PasteMask


# GPEN's own reference points, looser than FFHQ's (eye distance 107 px instead of 126 at 512): the
# GPEN weights were trained on crops made with it, and would get faces too big from FFHQ's.
GPEN_FRAME = FaceFrame(
    name="GPEN",
    template=(
        (202.041, 242.884),
        (309.430, 242.290),
        (256.077, 303.959),
        (211.960, 366.828),
        (300.891, 366.336),
    ),
    mean=(0.5, 0.5, 0.5),
    std=(0.5, 0.5, 0.5),
    # Upstream GPEN's: background, hat and cloth left out (hair and neck kept), border 26 px, sigma 4.
    mask=PasteMask(plain="feather", not_face=(0, 14, 18), parse_border=26.0, parse_sigma=4.0),
)

# The FFHQ five-point template facexlib's FaceRestoreHelper aligns to (face_size 512), which the
# GFPGAN and CodeFormer releases were trained and are run with, and its paste-back: without a
# parser the crop square but a margin, softened; with one the classes facexlib keeps (hair in;
# background, hat, necklace, neck and cloth out), blurred twice (sigma 11), then a 10 px border zeroed.
FFHQ_FRAME = FaceFrame(
    name="FFHQ",
    template=(
        (192.98138, 239.94708),
        (318.90277, 240.1936),
        (256.63416, 314.01935),
        (201.26117, 371.41043),
        (313.08905, 371.15118),
    ),
    mean=(0.5, 0.5, 0.5),
    std=(0.5, 0.5, 0.5),
    mask=PasteMask(
        plain="square",
        not_face=(0, 14, 16, 17, 18),
        parse_border=10.0,
        parse_sigma=11.0,
        border_after_blur=True,
    ),
)
