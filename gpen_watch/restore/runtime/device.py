"""Choosing the torch device, precision and thread count for one worker, and what its memory holds
(the face batch is sized from it by ``batching.auto_face_batch``)."""

from __future__ import annotations

import ctypes
import logging
import os
from dataclasses import dataclass

import torch

from gpen_watch import platform as platforms
from gpen_watch.base.errors import ConfigError, GpenWatchError
from gpen_watch.config import Precision, ResolvedPrecision
from gpen_watch.restore.nets.gpen_model import resolve_precision
from gpen_watch.restore.runtime.formats import NativeFormats, generator_format, native_formats

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Placement:
    device: torch.device
    # The autocast dtype for the networks, resolved from the config's "auto" and checked against
    # what the device computes natively (``formats.generator_format``).
    precision: ResolvedPrecision
    channels_last: bool
    # Why ``precision`` is not the restore.precision asked for, one sentence; "" when it is.
    note: str = ""

    @property
    def half(self) -> bool:
        return self.precision != "fp32"


def mps_available() -> bool:
    """Apple's GPU through torch's Metal backend (macOS on Apple silicon or an AMD GPU)."""
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def resolve_device(name: str) -> torch.device:
    """ "auto" is the first CUDA device when there is one (workers are pinned with
    CUDA_VISIBLE_DEVICES), else Apple's GPU when torch can use it, else the CPU."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        return torch.device("mps" if mps_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise GpenWatchError(f"device {name!r} was asked for but CUDA is not available here")
    if dev.type == "mps" and not mps_available():
        raise GpenWatchError(
            f"device {name!r} was asked for but Apple's GPU (torch's mps backend) is not available "
            "here; it needs macOS 12.3 or later and a torch built with it"
        )
    return dev


def device_label(device: torch.device) -> str:
    """The device as status and the tray name it: "Apple GPU (mps)", "cuda:0", "cpu"."""
    if device.type == "mps":
        return "Apple GPU (mps)"
    return str(device)


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is the device running out of memory: CUDA raises its own error, the mps
    backend a plain RuntimeError ("MPS backend out of memory ...")."""
    if isinstance(exc, torch.cuda.OutOfMemoryError):
        return True
    return isinstance(exc, RuntimeError) and "MPS backend out of memory" in str(exc)


def free_cached_memory(device: torch.device) -> None:
    """Hand the allocator's cached blocks back after an out-of-memory, so a smaller retry fits."""
    if device.type == "cuda":
        torch.cuda.empty_cache()
    elif device.type == "mps":
        torch.mps.empty_cache()


def placement(
    device_name: str, precision: Precision, channels_last: bool, native: NativeFormats | None = None
) -> Placement:
    """Where and in what format a worker's networks run. ``native``: what the device computes
    natively (``formats.native_formats``, read from the device when None); a format it would
    emulate runs as fp32, with the placement's note saying so."""
    device = resolve_device(device_name)
    try:
        resolved = resolve_precision(device, precision)
    except ValueError as exc:
        raise ConfigError(f"restore.precision: {exc}") from None
    note = ""
    if resolved == "bf16":  # the reduced format a device may emulate (fp16 is taken as set)
        resolved, note = generator_format(precision, resolved, native or native_formats(device))
    # channels_last only pays off with tensor cores; on CPU it measured no faster.
    return Placement(device, resolved, channels_last and device.type == "cuda", note)


def set_threads(threads: int | None) -> int:
    """Torch intra-op threads; default all cores this process may use."""
    if not threads:
        try:
            threads = len(os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover - macOS, Windows
            threads = os.cpu_count() or 1
    torch.set_num_threads(max(1, threads))
    return torch.get_num_threads()


def free_memory(device: torch.device) -> int | None:
    """Bytes the device has free for this process's work, for sizing the face batch
    (``batching.auto_face_batch``); None on a CPU, or where torch cannot tell.

    On Apple's GPU "free" is Metal's recommended working set less what the process holds (its
    memory is shared with the CPU)."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    if device.type == "mps":
        return _mps_free_bytes()
    return None


def _mps_free_bytes() -> int | None:
    """What Metal recommends this process may use, less what it holds: Apple GPUs share the
    machine's memory, so there is no free-memory reading like CUDA's. None where torch cannot tell
    (before torch 2.5)."""
    recommended = getattr(torch.mps, "recommended_max_memory", None)
    allocated = getattr(torch.mps, "driver_allocated_memory", None)
    if recommended is None or allocated is None:
        return None
    return max(0, int(recommended()) - int(allocated()))


# glibc <malloc.h> parameter numbers for mallopt().
_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
# Environment settings that mean the user tunes malloc themselves.
_USER_MALLOC_ENV = ("GLIBC_TUNABLES", "MALLOC_MMAP_MAX_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")
_malloc_tuned: bool | None = None


def tune_malloc_for_inference() -> bool:
    """Make glibc keep and reuse freed activation memory; True when applied (once per process).

    A CPU forward pass allocates and frees tensors of tens to hundreds of MB. glibc serves blocks
    over its mmap threshold with fresh mmaps and returns them at free, so every pass faults every
    page in again: GPEN-256 at batch 4 took ~90k page faults per face and 0.19 s a face (2 threads).
    With mmap off for large blocks (they come from the heap) and no trimming of the heap's top,
    the same pages are reused: 0 faults and 0.11 s a face at batch 1-16 (measured; see
    docs/benchmarks.md). The heap then stays at its peak size, which a worker that restores photo
    after photo reaches again anyway. Skipped off glibc and when the user set malloc variables.
    Equivalent environment for a process started fresh: MALLOC_MMAP_MAX_=0
    MALLOC_TRIM_THRESHOLD_=2147483647.
    """
    global _malloc_tuned
    if _malloc_tuned is not None:
        return _malloc_tuned
    _malloc_tuned = False
    name = platforms.current().libc
    if name is None or any(v in os.environ for v in _USER_MALLOC_ENV):
        return False
    try:
        libc = ctypes.CDLL(name)
        if not hasattr(libc, "gnu_get_libc_version"):  # musl and others: different allocator
            return False
        ok = libc.mallopt(_M_MMAP_MAX, 0) == 1 and libc.mallopt(_M_TRIM_THRESHOLD, 2**31 - 1) == 1
    except (OSError, AttributeError):
        return False
    _malloc_tuned = ok
    if ok:
        log.debug("glibc malloc tuned for inference (no mmap for large blocks, no heap trimming)")
    result: bool = ok
    return result
