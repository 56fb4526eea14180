"""Background upscaling (``restore.upscale``): a whole photo through an RRDBNet, tile by tile.

A photo is cut into a grid of core tiles; each runs through the network inside a larger window (the
core plus ``overlap`` input pixels on every side that is not the photo's edge), and only the core's
part of the output is kept. Every window has the same size, so several run as one batch, and memory
stays what one batch of windows needs, whatever the photo's size; only the result frame grows.

Where the overlap covers the network's receptive field (``RRDBConfig.receptive_radius``), a tiled
result equals the untiled one up to float32 rounding: each kept pixel saw all it would have seen,
and the windows that reach the photo's edge pad it as the whole photo would; but the CPU's
convolution kernels for a window's shape may sum in another order than for the whole photo's, so a
value on a rounding boundary can come out one level apart. With a smaller overlap (the trained
networks' influence fades long before their theoretical radius) the seams differ by a level or two
at most (tests/test_upscale.py states the measured tolerance).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from gpen_watch.restore.nets.rrdbnet import RRDBNet
from gpen_watch.restore.runtime.device import Placement, free_cached_memory, is_out_of_memory
from gpen_watch.restore.stages.detect import Face
from gpen_watch.restore.stages.enhance import OutOfMemory

# Input pixels of context around each core tile: Real-ESRGAN's and upstream GPEN's tile_pad is 10;
# 16 keeps the seams within a level or two at little extra cost ((192 / 160)^2 at x4 on a CPU).
DEFAULT_OVERLAP = 16
# Core tile sides (input pixels). x4's stage after the trunk runs at 16x the pixels, so its tiles
# are smaller for the same memory; on a GPU, larger tiles waste less on overlap.
_CPU_TILE = {2: 256, 4: 160}
_GPU_TILE = {2: 512, 4: 320}
# Float32 maps of window size per feature channel at the trunk's and at the output's resolution
# that the peak resident memory of one window's pass amounts to, allocator overhead included
# (fitted to the measurements in docs/benchmarks.md, "Background upscaling").
_TRUNK_MAPS_PER_FEAT = 16
_OUTPUT_MAPS_PER_FEAT = 6


@dataclass(frozen=True)
class Tile:
    """One core tile (written to the output) and the window (run through the network) holding it,
    in input pixels: rows ``y0:y1``, columns ``x0:x1``; the window's top-left is (``wy``, ``wx``)."""

    y0: int
    y1: int
    x0: int
    x1: int
    wy: int
    wx: int


def plan_tiles(h: int, w: int, tile: int, overlap: int) -> tuple[tuple[int, int], list[Tile]]:
    """The window size (rows, columns) and the tiles covering an ``h`` x ``w`` input.

    Windows are shifted inward at the photo's edges instead of cut, so all have one size; each core
    keeps at least ``overlap`` pixels of context on every side that is not the photo's edge.
    """
    win = (min(h, tile + 2 * overlap), min(w, tile + 2 * overlap))
    tiles = []
    for y0 in range(0, h, tile):
        wy = min(max(y0 - overlap, 0), h - win[0])
        for x0 in range(0, w, tile):
            wx = min(max(x0 - overlap, 0), w - win[1])
            tiles.append(Tile(y0, min(y0 + tile, h), x0, min(x0 + tile, w), wy, wx))
    return win, tiles


def working_mb(net: RRDBNet, tile: int, overlap: int, batch: int = 1) -> int:
    """Memory one batch of windows takes at its peak (MB), estimated from the network's width."""
    cfg = net.config
    side = tile + 2 * overlap
    trunk = (side / cfg.unshuffle) ** 2 * (cfg.num_feat + 4 * cfg.num_grow_ch) * _TRUNK_MAPS_PER_FEAT
    output = (side * cfg.scale) ** 2 * cfg.num_feat * _OUTPUT_MAPS_PER_FEAT
    return int(max(trunk, output) * 4 * batch / (1 << 20)) + 1


class Upscaler:
    """Runs an RRDBNet over (H, W, 3) BGR photos of either bit depth, in batches of tiles."""

    def __init__(
        self,
        net: RRDBNet,
        place: Placement,
        tile: int | None = None,
        overlap: int = DEFAULT_OVERLAP,
        batch: int | None = None,
    ) -> None:
        self.place = place
        self.factor = net.config.scale
        on_gpu = place.device.type == "cuda"
        # Tile origins must fall on the pixel-unshuffle grid, or a window's 2x2 blocks would not be
        # the whole photo's.
        grid = net.config.unshuffle
        self.tile = _round_up(tile or (_GPU_TILE if on_gpu else _CPU_TILE)[self.factor], grid)
        self.overlap = _round_up(overlap, grid)
        self.grid = grid
        self.batch = max(1, batch or (_gpu_batch(net, self.tile, self.overlap, place) if on_gpu else 1))
        net = net.to(place.device).eval()
        if on_gpu and place.channels_last:
            net = net.to(memory_format=torch.channels_last)
        self.net = net
        self.working_mb = working_mb(net, self.tile, self.overlap, self.batch)

    def upscale(
        self,
        pixels: np.ndarray,
        should_stop: Callable[[], bool] = lambda: False,
        tiles_done: Callable[[int, int], None] | None = None,
    ) -> np.ndarray | None:
        """(H, W, 3) uint8 or uint16 -> (H*f, W*f, 3) of the same dtype; None if ``should_stop``
        said so between two batches. Raises OutOfMemory when even one tile does not fit.
        ``tiles_done`` is told (tiles done, tiles in all) before each batch."""
        h, w = pixels.shape[:2]
        source = _pad_to_grid(pixels, self.grid)
        win, tiles = plan_tiles(source.shape[0], source.shape[1], self.tile, self.overlap)
        f = self.factor
        out = np.empty((h * f, w * f, 3), dtype=pixels.dtype)
        peak = float(np.iinfo(pixels.dtype).max)
        start = 0
        while start < len(tiles):
            if tiles_done is not None:
                tiles_done(start, len(tiles))
            if should_stop():
                return None
            chunk = tiles[start : start + self.batch]
            try:
                result = self._run(source, win, chunk, peak)
            except (torch.cuda.OutOfMemoryError, RuntimeError) as exc:
                if not is_out_of_memory(exc):
                    raise
                free_cached_memory(self.place.device)
                if self.batch == 1:
                    raise OutOfMemory("one upscaler tile does not fit on the device") from None
                self.batch = max(1, self.batch // 2)
                continue
            for t, tile_out in zip(chunk, result):
                # The core's place in the window, at the output's scale, cut to the unpadded photo.
                y1, x1 = min(t.y1, h), min(t.x1, w)
                if y1 <= t.y0 or x1 <= t.x0:
                    continue  # only padding
                oy, ox = (t.y0 - t.wy) * f, (t.x0 - t.wx) * f
                out[t.y0 * f : y1 * f, t.x0 * f : x1 * f] = tile_out[
                    oy : oy + (y1 - t.y0) * f, ox : ox + (x1 - t.x0) * f
                ]
            start += len(chunk)
        return out

    def _run(self, source: np.ndarray, win: tuple[int, int], chunk: list[Tile], peak: float) -> np.ndarray:
        """The windows of ``chunk`` through the network: (B, h*f, w*f, 3) of the source's dtype."""
        crops = np.stack([source[t.wy : t.wy + win[0], t.wx : t.wx + win[1]] for t in chunk])
        dev = self.place.device
        x = torch.from_numpy(crops).to(dev, non_blocking=True)
        # BGR integers -> RGB in [0, 1], (B, 3, h, w), as the networks were trained.
        x = x.flip(-1).permute(0, 3, 1, 2).float().div_(peak)
        if self.place.channels_last and dev.type == "cuda":
            x = x.contiguous(memory_format=torch.channels_last)
        with torch.inference_mode():
            with self._autocast():
                y = self.net(x)
            y = y.float().clamp_(0.0, 1.0).mul_(peak).round_()
            y = y.permute(0, 2, 3, 1).flip(-1)
            if source.dtype == np.uint8:
                # Converted on the device: a quarter of the bytes to copy back.
                small: np.ndarray = y.to(torch.uint8).cpu().numpy()
                return small
            # torch's uint16 is barely supported; int32 holds 0..65535.
            wide: np.ndarray = y.to(torch.int32).cpu().numpy().astype(source.dtype)
        return wide

    def _autocast(self) -> contextlib.AbstractContextManager[None]:
        if not self.place.half:
            return contextlib.nullcontext()
        dtype = torch.float16 if self.place.precision == "fp16" else torch.bfloat16
        return torch.autocast(self.place.device.type, dtype=dtype)


def to_upscaled(
    faces: list[Face], affines: np.ndarray | None, factor: int
) -> tuple[list[Face], np.ndarray | None]:
    """Faces found and aligned at the decoded size, moved to the upscaled photo's coordinates.

    An affine maps photo pixels to crop pixels; a pixel of the upscaled photo is ``factor`` times
    its decoded coordinates, so the linear part divides by ``factor`` (the crop stays the same).
    The boxes move too, so restore.smooth_below judges a face at the size it is pasted at, as
    upstream GPEN does (it detects on the upscaled photo).
    """
    moved = [Face(face.box * factor, face.score, face.landmarks * factor) for face in faces]
    if affines is None:
        return moved, None
    scaled = np.array(affines, dtype=np.float64, copy=True)
    scaled[:, :, :2] /= factor
    return moved, scaled


def _pad_to_grid(pixels: np.ndarray, grid: int) -> np.ndarray:
    """Odd sizes mirrored out to the unshuffle grid, as upstream GPEN does (cut off afterwards)."""
    h, w = pixels.shape[:2]
    ph, pw = (-h) % grid, (-w) % grid
    if not (ph or pw):
        return pixels
    return np.pad(pixels, ((0, ph), (0, pw), (0, 0)), mode="reflect" if min(h, w) > 1 else "edge")


def _round_up(n: int, grid: int) -> int:
    return -(-max(n, grid) // grid) * grid


def _gpu_batch(net: RRDBNet, tile: int, overlap: int, place: Placement) -> int:
    """Windows per pass on a GPU: as many as a quarter of the free memory holds (at most 16)."""
    free, _total = torch.cuda.mem_get_info(place.device)
    per_window = working_mb(net, tile, overlap) * (1 << 20) // (2 if place.half else 1)
    return int(max(1, min(16, (free // 4) // max(1, per_window))))
