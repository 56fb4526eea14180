"""Real pixels for the loupe's 1:1: a region of a run's full-size result and the same region of its
original, cut by the service from the files the journal names for that run; or, on Compare runs,
the same region of two runs' results. A request names the runs by id, the side from a fixed list
and the region by four whole numbers; never a path.

The loupe's two halves are ``Halves``: the right one, whose pixels the region is in (a result),
and the left one (the original, or the other run's result), whose crop is the same part of the
photo (it may be larger, when it was pre-scaled, or smaller, when the result was upscaled) brought
to the same size, so that the two lie on one another under the slider. A region is at most
``MAX_SIDE`` pixels a side and ``MAX_AREA`` in all: a screen's worth.

Decoding a 24 MP photo takes about a second and 70 MB. The two images of the photo being looked
at (``KEEP``) stay decoded while crops of it are asked for, and are let go ``IDLE_S`` after the
last one; decoding runs off the event loop, one image at a time. Pillow, OpenCV and numpy are
imported at the first crop: a service whose dashboard is never zoomed to 1:1 never loads them.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from gpen_watch.dashboard.views import Side
from gpen_watch.journal.records import Job

if TYPE_CHECKING:
    import numpy as np

MAX_SIDE = 4096
MAX_AREA = 4096 * 1024
KEEP = 2
IDLE_S = 60.0
QUALITY = 92

# A run and what a download of it means ("result", "original") -> the file and its name, or None
# when that file is not where gpen-watch left it (``review.Review.download_file``).
FileOf = Callable[[Job, str], "tuple[Path, str] | None"]


@dataclass(frozen=True)
class Region:
    """A rectangle of the result's pixels: left, top, width and height."""

    x: int
    y: int
    w: int
    h: int

    @classmethod
    def parse(cls, query: Any) -> Region:
        """The region a crop's query names; 400 with a sentence for anything else."""
        values = []
        for name in ("x", "y", "w", "h"):
            text = str(query.get(name, ""))
            if not text.isdigit() or len(text) > 6:
                raise web.HTTPBadRequest(text="x, y, w and h must be whole numbers of pixels (0 or more).\n")
            values.append(int(text))
        region = cls(*values)
        if (
            region.w < 1
            or region.h < 1
            or region.w > MAX_SIDE
            or region.h > MAX_SIDE
            or region.w * region.h > MAX_AREA
        ):
            raise web.HTTPBadRequest(
                text=f"A region is 1 to {MAX_SIDE} pixels a side and at most {MAX_AREA:,} pixels in all.\n"
            )
        return region


@dataclass(frozen=True)
class Halves:
    """What a loupe's halves show at 1:1, each a run and one of its files: ``after`` the right half
    (a result: the region is in its pixels), ``before`` the left half, cut at the same part."""

    after: tuple[Job, Side]
    before: tuple[Job, Side]

    @classmethod
    def of_run(cls, job: Job) -> Halves:
        """A photo's page: the run's result against its original."""
        return cls((job, Side.AFTER), (job, Side.BEFORE))

    @classmethod
    def of_two(cls, left: Job, right: Job) -> Halves:
        """Compare runs: one run's result against the other's."""
        return cls((right, Side.AFTER), (left, Side.AFTER))

    def half(self, side: Side) -> tuple[Job, Side]:
        return self.after if side == Side.AFTER else self.before


@dataclass
class _Decoded:
    pixels: np.ndarray  # (H, W, 3) uint8 BGR, oriented
    icc: bytes | None
    stamp: tuple[int, int, int]  # the file's inode, size and mtime when decoded
    used: float = field(default_factory=time.monotonic)


@dataclass
class RealPixels:
    """The crops of one dashboard, with its few decoded images."""

    file_of: FileOf
    _kept: OrderedDict[tuple[int, Side], _Decoded] = field(default_factory=OrderedDict)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _sweeper: asyncio.TimerHandle | None = None

    async def sizes(self, halves: Halves) -> dict[str, list[int]]:
        """Each half's pixel size (width, height), as oriented: {"after": ..., "before": ...}."""
        out = {}
        for side in Side:
            image = await self._image(*halves.half(side))
            h, w = image.pixels.shape[:2]
            out[str(side)] = [w, h]
        return out

    async def crop(self, halves: Halves, side: Side, region: Region) -> bytes:
        """``region`` of the right half's result (``side`` after), or the same part of the left
        half's file at the same size (before), as an sRGB JPEG."""
        after = await self._image(*halves.after)
        ah, aw = after.pixels.shape[:2]
        if region.x + region.w > aw or region.y + region.h > ah:
            raise web.HTTPBadRequest(text=f"That region is not inside the result ({aw} x {ah} pixels).\n")
        image = after if side == Side.AFTER else await self._image(*halves.before)
        return await asyncio.get_running_loop().run_in_executor(None, _cut, image, (aw, ah), region)

    async def sizes_reply(self, halves: Halves) -> web.Response:
        """A loupe's ``real.json``: what ``sizes`` says, never cached."""
        return web.json_response(await self.sizes(halves), headers={"Cache-Control": "private, no-store"})

    async def crop_reply(self, halves: Halves, request: web.Request) -> web.Response:
        """A loupe's ``crop/{side}.jpg?x=&y=&w=&h=``."""
        region = Region.parse(request.query)
        body = await self.crop(halves, Side(request.match_info["side"]), region)
        return web.Response(
            body=body, content_type="image/jpeg", headers={"Cache-Control": "private, max-age=60"}
        )

    async def _image(self, job: Job, side: Side) -> _Decoded:
        found = self.file_of(job, "result" if side == Side.AFTER else "original")
        if found is None:
            raise web.HTTPNotFound(
                text="That file is not where gpen-watch left it (moved, deleted, or replaced by a newer run).\n"
            )
        path = found[0]
        async with self._lock:  # one decode at a time: a second request for it waits for the first
            stamp = _stamp(path)
            key = (job.id, side)
            kept = self._kept.get(key)
            if kept is None or kept.stamp != stamp:
                kept = await asyncio.get_running_loop().run_in_executor(None, _decode, path)
                self._kept[key] = kept
            kept.used = time.monotonic()
            self._kept.move_to_end(key)
            while len(self._kept) > KEEP:
                self._kept.popitem(last=False)
            self._sweep_later()
            return kept

    def _sweep_later(self) -> None:
        if self._sweeper is None and self._kept:
            # When the image used longest ago will have been idle IDLE_S.
            due = min(v.used for v in self._kept.values()) + IDLE_S - time.monotonic()
            self._sweeper = asyncio.get_running_loop().call_later(max(0.0, due) + 0.1, self._sweep)

    def _sweep(self) -> None:
        self._sweeper = None
        now = time.monotonic()
        for key in [k for k, v in self._kept.items() if now - v.used >= IDLE_S]:
            del self._kept[key]
        self._sweep_later()


def _stamp(path: Path) -> tuple[int, int, int]:
    try:
        st = path.lstat()
    except OSError:
        raise web.HTTPNotFound(
            text="That file is not where gpen-watch left it (moved or deleted).\n"
        ) from None
    return st.st_ino, st.st_size, st.st_mtime_ns


def _decode(path: Path) -> _Decoded:
    from gpen_watch.imaging.errors import ImageInputError
    from gpen_watch.imaging.load import load_image

    try:
        loaded = load_image(path)  # a link or anything but a plain file is refused, not followed
    except ImageInputError as exc:
        raise web.HTTPUnprocessableEntity(text=f"{exc}\n") from None
    return _Decoded(loaded.bgr8, loaded.icc_profile, _stamp(path))


def _cut(image: _Decoded, after_size: tuple[int, int], region: Region) -> bytes:
    import cv2

    from gpen_watch.imaging.preview import srgb_jpeg

    h, w = image.pixels.shape[:2]
    aw, ah = after_size
    if (w, h) == (aw, ah):
        part = image.pixels[region.y : region.y + region.h, region.x : region.x + region.w]
    else:
        # The same part of a photo of another size, brought to the region's size.
        kx, ky = w / aw, h / ah
        x0, y0 = int(region.x * kx), int(region.y * ky)
        x1 = max(x0 + 1, min(w, round((region.x + region.w) * kx)))
        y1 = max(y0 + 1, min(h, round((region.y + region.h) * ky)))
        smaller = (x1 - x0) > region.w
        part = cv2.resize(
            image.pixels[y0:y1, x0:x1],
            (region.w, region.h),
            interpolation=cv2.INTER_AREA if smaller else cv2.INTER_CUBIC,
        )
    return srgb_jpeg(part, image.icc, QUALITY)
