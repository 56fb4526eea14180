"""GPU listing and sampling through NVML, for the worker slots, the tray, the ``status`` and
``cluster`` commands and a cluster node's heartbeats (``nvml``). Torch-free: the parent process
reads its GPUs here without a CUDA context."""
