"""Which restorer workers to start, and on which device, without importing torch.

The parent process must stay small and never import torch, so GPUs are listed through NVML
(nvidia-ml-py, gpen_watch.gpu.nvml), which only needs the driver. No driver, no NVML, no GPU: an empty list, never an
exception. Each worker is then pinned to its GPU through CUDA_VISIBLE_DEVICES in its environment, so
inside the worker the GPU is always "cuda:0".
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from gpen_watch.base.errors import ConfigError
from gpen_watch.config import WorkerConfig
from gpen_watch.gpu.nvml import GpuInfo, list_gpus, visible_gpus

# Thread-count variables of the BLAS/OpenMP runtimes torch, numpy and OpenCV may use. Set in the
# child's environment before it imports them, so N workers on C cores never run N*C threads.
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")


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


def usable_cores() -> int:
    """Cores this process may run on (affinity and cgroup-limited containers included where visible)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return max(1, os.cpu_count() or 1)


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
