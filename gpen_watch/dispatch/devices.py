"""Which restorer workers to start, and on which device, without importing torch.

The parent process must stay small and never import torch, so GPUs are listed through NVML
(nvidia-ml-py), which only needs the driver. No driver, no NVML, no GPU: an empty list, never an
exception. Each worker is then pinned to its GPU through CUDA_VISIBLE_DEVICES in its environment, so
inside the worker the GPU is always "cuda:0".
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from gpen_watch.base.errors import ConfigError
from gpen_watch.config import WorkerConfig

log = logging.getLogger(__name__)

# Thread-count variables of the BLAS/OpenMP runtimes torch, numpy and OpenCV may use. Set in the
# child's environment before it imports them, so N workers on C cores never run N*C threads.
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")


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


@dataclass(frozen=True)
class WorkerSlot:
    """One restorer subprocess to keep running."""

    name: str  # unique and readable: "cuda:0", "cuda:0#2", "cpu#1"
    # Device as the worker names it after pinning ("cuda" or "cpu"), or "auto" for a CPU slot
    # whose worker may find Apple's GPU.
    device: str
    # What the user sees in `status`: "cuda:1 (NVIDIA H200)" or "cpu".
    label: str
    gpu_index: int | None
    threads: int
    env: Mapping[str, str] = field(default_factory=dict)
    # The cluster node it runs on, "host (address)" ("" for this machine): known before the
    # worker says so when ready, so that status groups a worker that cannot start under its node.
    node: str = ""


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


def usable_cores() -> int:
    """Cores this process may run on (affinity and cgroup-limited containers included where visible)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return max(1, os.cpu_count() or 1)


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


def resolve_slots(
    wk: WorkerConfig,
    gpus: list[GpuInfo] | None = None,
    cores: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[WorkerSlot]:
    """Turn workers.devices into worker slots: one per GPU (x workers_per_device), else CPU workers."""
    environ = os.environ if environ is None else environ
    if gpus is None:
        gpus = list_gpus()
    gpus = visible_gpus(gpus, environ)
    cores = cores or usable_cores()

    wanted: list[GpuInfo] = []
    cpu = False
    # Without an NVIDIA GPU, "auto" lets each worker pick its device: Apple's GPU on a Mac that
    # has one (the parent cannot tell without torch), else the CPU. "cpu" stays the CPU.
    leave_to_worker = False
    for dev in wk.devices:
        if dev == "auto":
            if gpus:
                wanted += gpus
            else:
                cpu = leave_to_worker = True
        elif dev == "cpu":
            cpu = True
        elif dev == "cuda":
            if not gpus:
                raise ConfigError("workers.devices: 'cuda' asked for, but no NVIDIA GPU was found (NVML)")
            wanted += gpus
        else:  # cuda:N
            index = int(dev.partition(":")[2])
            match = [g for g in gpus if g.index == index]
            if not match:
                found = ", ".join(f"cuda:{g.index}" for g in gpus) or "none"
                raise ConfigError(f"workers.devices: {dev} not found (GPUs found: {found})")
            wanted += match
    # The same GPU named twice ("auto" plus "cuda:0") still gets workers_per_device workers.
    unique = list({g.index: g for g in wanted}.values())

    n_cpu = wk.cpu_workers if cpu else 0
    n_workers = len(unique) * wk.workers_per_device + n_cpu
    # Every worker also runs decode, warps, paste-back and encode on the CPU: share the cores so
    # that N workers never start N x cores threads.
    threads = max(1, cores // max(1, n_workers))
    slots: list[WorkerSlot] = []
    for g in unique:
        for k in range(wk.workers_per_device):
            name = f"cuda:{g.index}" if wk.workers_per_device == 1 else f"cuda:{g.index}#{k}"
            env = {"CUDA_VISIBLE_DEVICES": str(g.index), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
            env.update(_thread_env(threads))
            slots.append(WorkerSlot(name, "cuda", f"cuda:{g.index} ({g.name})", g.index, threads, env))
    for k in range(n_cpu):
        # An empty CUDA_VISIBLE_DEVICES keeps torch from initialising CUDA at all.
        env = {"CUDA_VISIBLE_DEVICES": "", **_thread_env(threads)}
        device = "auto" if leave_to_worker and "cpu" not in wk.devices else "cpu"
        slots.append(WorkerSlot(f"cpu#{k}", device, "cpu", None, threads, env))
    return slots


def _thread_env(threads: int) -> dict[str, str]:
    return {var: str(threads) for var in THREAD_ENV_VARS}


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
