"""Choosing the torch device, precision, thread count and face batch size for one worker."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from gpen_watch.errors import ConfigError, GpenWatchError
from gpen_watch.restore.gpen_model import resolve_precision

# Rough activation memory of one face through the generator, fp32, measured as the growth of peak
# allocated memory per extra face in a batch; half precision needs about half.
_BYTES_PER_FACE_FP32 = {256: 80 << 20, 512: 330 << 20, 1024: 1320 << 20}


@dataclass(frozen=True)
class Placement:
    device: torch.device
    # "fp32", "fp16" or "bf16" (autocast dtype for the networks), resolved from the config's "auto".
    precision: str
    channels_last: bool

    @property
    def half(self) -> bool:
        return self.precision != "fp32"


def resolve_device(name: str) -> torch.device:
    """"auto" is the first CUDA device when there is one (workers are pinned with CUDA_VISIBLE_DEVICES)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise GpenWatchError(f"device {name!r} was asked for but CUDA is not available here")
    return dev


def placement(device_name: str, precision: str, channels_last: bool) -> Placement:
    device = resolve_device(device_name)
    try:
        resolved = resolve_precision(device, precision)  # type: ignore[arg-type]
    except ValueError as exc:
        raise ConfigError(f"restore.precision: {exc}") from None
    # channels_last only pays off with tensor cores; on CPU it measured no faster.
    return Placement(device, resolved, channels_last and device.type == "cuda")


def set_threads(threads: int | None) -> int:
    """Torch intra-op threads; default all cores this process may use."""
    if not threads:
        try:
            threads = len(os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover - macOS, Windows
            threads = os.cpu_count() or 1
    torch.set_num_threads(max(1, threads))
    return torch.get_num_threads()


def auto_face_batch(size: int, place: Placement) -> int:
    """Faces per forward: a few on CPU (more only adds latency), as many as half the free memory holds on GPU."""
    if place.device.type != "cuda":
        return 4
    free, _total = torch.cuda.mem_get_info(place.device)
    per_face = _BYTES_PER_FACE_FP32.get(size, _BYTES_PER_FACE_FP32[512] * (size / 512) ** 2)
    if place.half:
        per_face //= 2
    return int(max(1, min(64, (free // 2) // per_face)))
