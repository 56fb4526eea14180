"""Resident memory of a restorer process and the budget it keeps to (no torch, no OpenCV here).

A restorer holds three kinds of memory: the models (fixed once loaded), the activations of one
generator and parser pass (fixed per face batch), and the photos it has in hand, decoded (these
grow with the read-ahead). The budget bounds the last kind: photos are admitted while the memory
they are expected to need fits in what the budget leaves after the models and activations.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from pathlib import Path

from gpen_watch import platform as platforms

# Bytes a decoded 8-bit BGR photo takes per pixel, and how many such frames one photo holds at its
# busiest moment: the decoded frame, the decoder's or encoder's own copy while it works, and the
# pasted result (paste_faces returns a new frame).
_BYTES_PER_PIXEL = 3
_FRAMES_PER_PHOTO = 3
# Without a setting: a quarter of the machine's memory, but never less than this.
_AUTO_FLOOR_MB = 2048
# Host memory of one face through GPEN on a CPU, by crop size (growth of peak RSS per face of a
# batch, malloc tuned), and of ParseNet's one-face pass at 512 px; on a GPU the activations live in
# device memory and the host keeps only transfer buffers.
_CPU_GPEN_MB_PER_FACE = {256: 140, 512: 560, 1024: 2240}
_CPU_PARSE_MB = 600
_CPU_DETECT_MB = 250
_GPU_HOST_MB = 512


@dataclass(frozen=True)
class Rss:
    """Resident memory of this process in MB: now, and its high-water mark."""

    now_mb: float
    peak_mb: float


def rss() -> Rss | None:
    """This process's VmRSS and VmHWM from /proc; None where there is no /proc (macOS, Windows)."""
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    try:
        now = int(fields["VmRSS"].split()[0]) / 1024
        peak = int(fields["VmHWM"].split()[0]) / 1024
    except (KeyError, ValueError, IndexError):
        return None
    return Rss(round(now, 1), round(peak, 1))


def physical_memory_mb() -> int | None:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 20))
    except (AttributeError, ValueError, OSError):  # Windows has no sysconf
        return None


def resolve_budget_mb(setting: int) -> int:
    """restore.memory_mb, with 0 (auto) resolved: a quarter of physical memory, at least 2 GB."""
    if setting > 0:
        return setting
    total = physical_memory_mb()
    return max(_AUTO_FLOOR_MB, total // 4) if total else _AUTO_FLOOR_MB


def photo_bytes(width: int, height: int, max_side: int = 0) -> int:
    """Memory one photo of ``width`` x ``height`` needs while the restorer holds it, pre-scale applied."""
    long_side = max(width, height, 1)
    scale = min(1.0, max_side / long_side) if max_side else 1.0
    pixels = int(width * scale) * int(height * scale)
    return pixels * _BYTES_PER_PIXEL * _FRAMES_PER_PHOTO


def activation_mb(size: int, face_batch: int, on_cpu: bool, parse: bool) -> int:
    """Host memory the device loop's passes (detector, generator, parser) take at their peak."""
    if not on_cpu:
        return _GPU_HOST_MB
    per_face = _CPU_GPEN_MB_PER_FACE.get(size, int(_CPU_GPEN_MB_PER_FACE[512] * (size / 512) ** 2))
    # The passes run one after the other on the same heap, so the largest one sets the peak.
    return max(per_face * face_batch, _CPU_PARSE_MB if parse else 0, _CPU_DETECT_MB)


def give_back_free_memory() -> bool:
    """Return the allocator's free pages to the system (glibc ``malloc_trim``); False elsewhere.

    With the allocator tuned for inference (no trimming), memory freed by a photo stays resident;
    a restorer over its budget calls this between photos.
    """
    name = platforms.current().libc
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        return bool(libc.malloc_trim(0))
    except (OSError, AttributeError):
        return False
