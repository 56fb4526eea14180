"""The tray icon image: the gpen-watch face (package data: gpen_watch/data/icon.png) with a badge for
queue depth and state.

Drawn at 64 px (backends scale it: 16-24 px in most panels, 32+ on HiDPI). The badge fills the
lower-right quarter and more, since a number in it has to be read at 16 px.
"""

from __future__ import annotations

import logging
from functools import lru_cache

from PIL import Image, ImageDraw, ImageFont

from gpen_watch.platform import resources
from gpen_watch.tray.model import Badge

log = logging.getLogger(__name__)

SIZE = 64


def load_base(size: int = SIZE) -> Image.Image:
    """The icon without badge; a drawn stand-in when the asset is missing (a broken install)."""
    path = resources.find(*resources.ICON)
    if path is not None:
        try:
            with path.open("rb") as fp, Image.open(fp) as im:
                result: Image.Image = im.convert("RGBA").resize((size, size), Image.Resampling.LANCZOS)
                return result
        except OSError as exc:
            log.warning("tray icon %s unreadable (%s); using a plain one", path, exc)
    base = Image.new("RGBA", (size, size), (0, 0, 0, 0))
    ImageDraw.Draw(base).rounded_rectangle((0, 0, size - 1, size - 1), radius=size // 5, fill="#24475e")
    return base


def render(base: Image.Image, badge: Badge) -> Image.Image:
    """``base`` with ``badge`` in its lower-right corner (a new image; ``base`` is not changed)."""
    size = base.width
    image = base.copy()
    draw = ImageDraw.Draw(image)
    if badge.text:
        height = round(size * 0.58)
        px = round(height * 0.78)
        while True:  # shrink the figure until the pill fits the icon ("99+")
            face = font(px)
            left, _top, right, _bottom = draw.textbbox((0, 0), badge.text, font=face, stroke_width=1)
            width = max(height, right - left + round(height * 0.35))
            if width <= size or px <= 6:
                break
            px -= 1
        width = min(width, size)
    else:
        # No number: a smaller dot that still shows the state colour.
        height = width = round(size * 0.40)
    box = (size - width, size - height, size - 1, size - 1)
    # A ring in the panel-neutral colour of the icon's rim keeps the badge apart from the face.
    ring = max(1, size // 32)
    draw.rounded_rectangle(
        (box[0] - ring, box[1] - ring, box[2], box[3]), radius=height // 2 + ring, fill="#ffffff"
    )
    draw.rounded_rectangle(box, radius=height // 2, fill=badge.fill)
    if badge.text:
        cx, cy = (box[0] + box[2] + 1) / 2, (box[1] + box[3] + 1) / 2
        # stroke in the text colour: a bolder figure, readable after scaling down to 16 px.
        draw.text(
            (cx, cy),
            badge.text,
            font=face,
            fill=badge.ink,
            anchor="mm",
            stroke_width=1,
            stroke_fill=badge.ink,
        )
    return image


@lru_cache(maxsize=8)
def font(px: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    # Pillow's built-in scalable font (no system fonts needed); a bitmap font without FreeType.
    try:
        return ImageFont.load_default(size=px)
    except (TypeError, OSError, ImportError):
        return ImageFont.load_default()
