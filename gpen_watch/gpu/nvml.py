"""NVIDIA GPUs read through NVML (nvidia-ml-py), without torch: which GPUs there are (``list_gpus``,
for the worker slots), which of them the service may use (``visible_gpus``), and each one's
readings (``NvmlMonitor``, for the tray menu and ``gpen-watch status``).

NVML needs only the driver: no torch, no CUDA context, no GPU memory. The monitor is opened once and
kept open while the tray polls (about once a second); opening it per sample costs tens of
milliseconds. No driver, no library, no GPU: an empty list, and the menu says CPU mode. A cluster
node's actor reads its own machine's GPUs the same way (``ThrottledSampler``) and sends them with
its heartbeats.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GpuInfo:
    index: int  # NVML index, which is the CUDA index under CUDA_DEVICE_ORDER=PCI_BUS_ID
    name: str
    uuid: str
    memory_total: int  # bytes


@dataclass(frozen=True)
class GpuSample:
    """One GPU's readings through NVML (the tray's GPU lines; a remote node's, in its heartbeats)."""

    index: int
    name: str
    util_percent: int | None = None  # None: the GPU does not report it (or the call failed)
    mem_used: int | None = None  # bytes
    mem_total: int | None = None
    temp_c: int | None = None

    @property
    def readings(self) -> str:
        """ "87%, 12.3/139.8 GiB, 64 °C"; what the GPU does not report is left out."""
        parts = []
        if self.util_percent is not None:
            parts.append(f"{self.util_percent}%")
        if self.mem_used is not None and self.mem_total:
            parts.append(f"{self.mem_used / 2**30:.1f}/{self.mem_total / 2**30:.1f} GiB")
        if self.temp_c is not None:
            parts.append(f"{self.temp_c} °C")
        return ", ".join(parts) or "no readings"


def list_gpus() -> list[GpuInfo]:
    """NVIDIA GPUs through NVML; [] when there is no driver or NVML fails in any way."""
    try:
        import pynvml
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...
        log.debug("no NVIDIA GPU: %s", exc)
        return []
    gpus: list[GpuInfo] = []
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            gpus.append(
                GpuInfo(
                    i,
                    _text(pynvml.nvmlDeviceGetName(h)),
                    _text(pynvml.nvmlDeviceGetUUID(h)),
                    int(pynvml.nvmlDeviceGetMemoryInfo(h).total),
                )
            )
    except Exception as exc:  # noqa: BLE001
        # A GPU that fell off the bus makes NVML calls fail: use what was listed before it.
        log.warning("listing GPUs through NVML failed after %d: %s", len(gpus), exc)
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()
    return gpus


def visible_gpus(gpus: list[GpuInfo], environ: Mapping[str, str]) -> list[GpuInfo]:
    """Honour a CUDA_VISIBLE_DEVICES the user set for the service itself (NVML ignores it)."""
    spec = environ.get("CUDA_VISIBLE_DEVICES")
    if spec is None:
        return gpus
    keep: list[GpuInfo] = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        if item.lstrip("-").isdigit():
            if int(item) < 0:
                break  # CUDA stops at the first invalid index
            keep += [g for g in gpus if g.index == int(item)]
        else:
            keep += [g for g in gpus if g.uuid == item or g.uuid.startswith(item)]
    return keep


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


class ThrottledSampler:
    """An NvmlMonitor read at most every ``every_s``, from any thread: a remote node's actor
    answers each heartbeat ping with its GPUs, and NVML need not be asked that often."""

    def __init__(
        self, monitor: NvmlMonitor, every_s: float = 5.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._monitor = monitor
        self._every_s = every_s
        self._clock = clock
        self._lock = threading.Lock()
        self._last: tuple[GpuSample, ...] = ()
        self._at: float | None = None

    def sample(self) -> tuple[GpuSample, ...]:
        with self._lock:
            now = self._clock()
            if self._at is None or now - self._at >= self._every_s:
                self._last, self._at = tuple(self._monitor.sample()), now
            return self._last


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
