"""GPU status for the tray menu, read through NVML (nvidia-ml-py) in the parent process.

NVML needs only the driver: no torch, no CUDA context, no GPU memory. It is opened once and kept
open while the tray polls (about once a second); opening it per sample costs tens of
milliseconds. No driver, no library, no GPU: an empty list, and the menu says CPU mode.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpen_watch.dispatch.devices import GpuInfo, visible_gpus

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GpuSample:
    index: int
    name: str
    util_percent: int | None = None  # None: the GPU does not report it (or the call failed)
    mem_used: int | None = None  # bytes
    mem_total: int | None = None
    temp_c: int | None = None


class NvmlMonitor:
    """Samples every GPU the service may use. Thread-confined: one poller thread owns it."""

    def __init__(self, nvml: Any = None, environ: Mapping[str, str] | None = None) -> None:
        self._nvml = nvml  # the pynvml module; tests pass a fake
        self._environ = os.environ if environ is None else environ
        self._handles: list[tuple[GpuInfo, Any]] | None = None
        self.reason: str | None = None  # why there is no GPU, for the log

    def open(self) -> bool:
        """Start NVML and list the GPUs; False (and ``reason``) when there are none to show."""
        if self._handles is not None:
            return bool(self._handles)
        self._handles = []
        try:
            if self._nvml is None:
                import pynvml

                self._nvml = pynvml
            self._nvml.nvmlInit()
        except Exception as exc:  # noqa: BLE001 - ImportError, NVMLError_LibraryNotFound, DriverNotLoaded, ...
            self.reason = f"NVML unavailable: {exc}"
            self._nvml = None
            return False
        try:
            found = []
            for i in range(self._nvml.nvmlDeviceGetCount()):
                h = self._nvml.nvmlDeviceGetHandleByIndex(i)
                found.append(
                    (
                        GpuInfo(
                            i,
                            _text(self._nvml.nvmlDeviceGetName(h)),
                            _text(self._nvml.nvmlDeviceGetUUID(h)),
                            0,
                        ),
                        h,
                    )
                )
        except Exception as exc:  # noqa: BLE001
            log.debug("listing GPUs through NVML stopped: %s", exc)
        # Only the GPUs the service's workers can see (CUDA_VISIBLE_DEVICES set for the service).
        keep = {g.index for g in visible_gpus([g for g, _ in found], self._environ)}
        self._handles = [(g, h) for g, h in found if g.index in keep]
        if not self._handles:
            self.reason = "no NVIDIA GPU found"
        return bool(self._handles)

    def sample(self) -> list[GpuSample]:
        if not self.open():
            return []
        return [self._sample(g, h) for g, h in self._handles or []]

    def close(self) -> None:
        if self._nvml is not None and self._handles:
            with contextlib.suppress(Exception):
                self._nvml.nvmlShutdown()
        self._handles = None

    def _sample(self, gpu: GpuInfo, handle: Any) -> GpuSample:
        nv = self._nvml
        util = _try(lambda: int(nv.nvmlDeviceGetUtilizationRates(handle).gpu))
        mem = _try(lambda: nv.nvmlDeviceGetMemoryInfo(handle))
        temp = _try(lambda: int(nv.nvmlDeviceGetTemperature(handle, getattr(nv, "NVML_TEMPERATURE_GPU", 0))))
        return GpuSample(
            gpu.index,
            gpu.name,
            util,
            int(mem.used) if mem is not None else None,
            int(mem.total) if mem is not None else None,
            temp,
        )


def _try(read: Any) -> Any:
    # Each reading on its own: consumer GPUs and vGPUs answer NotSupported for some of them, and a
    # GPU that fell off the bus fails them all; the menu shows what could be read.
    try:
        return read()
    except Exception:  # noqa: BLE001
        return None


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
