"""GPU readings for the tray through NVML: fake NVML for the rules, the real one for 'never crash'."""

from __future__ import annotations

from types import SimpleNamespace

from conftest import heavy_modules_after

from gpen_watch.gpu.nvml import GpuSample, NvmlMonitor


class NotSupported(Exception):
    pass


class FakeNvml:
    NVML_TEMPERATURE_GPU = 0

    def __init__(
        self, names: list[str], init_error: str | None = None, unsupported: tuple[str, ...] = ()
    ) -> None:
        self.names = names
        self.init_error = init_error
        self.unsupported = unsupported
        self.inits = self.shutdowns = 0

    def nvmlInit(self) -> None:
        self.inits += 1
        if self.init_error:
            raise RuntimeError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self.names)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetName(self, h: int) -> bytes:
        return self.names[h].encode()  # older nvidia-ml-py returns bytes

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return f"GPU-{h:08d}-aaaa"

    def _check(self, what: str) -> None:
        if what in self.unsupported:
            raise NotSupported(what)

    def nvmlDeviceGetUtilizationRates(self, h: int) -> SimpleNamespace:
        self._check("util")
        return SimpleNamespace(gpu=40 + h, memory=10)

    def nvmlDeviceGetMemoryInfo(self, h: int) -> SimpleNamespace:
        self._check("mem")
        return SimpleNamespace(used=(h + 1) * 2**30, total=80 * 2**30, free=0)

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        self._check("temp")
        return 50 + h


def test_samples_every_gpu_and_opens_nvml_once() -> None:
    nv = FakeNvml(["NVIDIA A100", "NVIDIA A100"])
    mon = NvmlMonitor(nv, environ={})
    for _ in range(3):
        samples = mon.sample()
    assert samples == [
        GpuSample(0, "NVIDIA A100", 40, 2**30, 80 * 2**30, 50),
        GpuSample(1, "NVIDIA A100", 41, 2 * 2**30, 80 * 2**30, 51),
    ]
    assert nv.inits == 1
    mon.close()
    assert nv.shutdowns == 1


def test_no_driver_is_cpu_mode_not_an_error() -> None:
    mon = NvmlMonitor(FakeNvml([], init_error="Driver Not Loaded"), environ={})
    assert mon.sample() == []
    assert mon.sample() == []
    assert mon.reason is not None
    assert "Driver Not Loaded" in mon.reason
    mon.close()


def test_readings_a_gpu_does_not_support_are_none() -> None:
    mon = NvmlMonitor(FakeNvml(["GeForce GTX 1080"], unsupported=("util", "temp")), environ={})
    assert mon.sample() == [GpuSample(0, "GeForce GTX 1080", None, 2**30, 80 * 2**30, None)]


def test_only_the_gpus_the_service_can_see() -> None:
    mon = NvmlMonitor(FakeNvml(["A", "B", "C"]), environ={"CUDA_VISIBLE_DEVICES": "2,0"})
    assert [g.index for g in mon.sample()] == [0, 2]
    mon = NvmlMonitor(FakeNvml(["A", "B"]), environ={"CUDA_VISIBLE_DEVICES": ""})
    assert mon.sample() == []
    assert mon.reason == "no NVIDIA GPU found"


def test_real_nvml_never_raises() -> None:
    """With the real nvidia-ml-py: GPU readings on a GPU machine, an empty list (CPU mode) elsewhere."""
    mon = NvmlMonitor()
    samples = mon.sample()
    mon.close()
    if not samples:
        assert mon.reason
        return
    for s in samples:
        assert s.name
        assert s.mem_total
        assert s.mem_total > 2**30
        assert s.util_percent is None or 0 <= s.util_percent <= 100
        assert s.temp_c is None or 0 < s.temp_c < 120


def test_tray_modules_do_not_import_torch_numpy_or_cv2() -> None:
    code = (
        "import gpen_watch.tray.app, gpen_watch.gpu.nvml, gpen_watch.cli.service, gpen_watch.platform; "
        "from gpen_watch.gpu.nvml import NvmlMonitor; m = NvmlMonitor(); m.sample(); m.close()"
    )
    assert heavy_modules_after(code, ("torch", "numpy", "cv2")) == []


def test_a_cluster_actor_reads_nvml_at_most_every_few_seconds_through_the_same_monitor() -> None:
    from gpen_watch.gpu.nvml import ThrottledSampler

    now = [0.0]
    nv = FakeNvml(["NVIDIA RTX 4090"])
    sampler = ThrottledSampler(NvmlMonitor(nv, environ={}), every_s=5.0, clock=lambda: now[0])
    reads: list[int] = []
    nv.nvmlDeviceGetUtilizationRates = lambda h: reads.append(h) or SimpleNamespace(gpu=40, memory=1)  # type: ignore[method-assign]
    first = sampler.sample()
    assert first == (GpuSample(0, "NVIDIA RTX 4090", 40, 2**30, 80 * 2**30, 50),)
    now[0] = 4.9
    assert sampler.sample() == first
    assert len(reads) == 1  # a heartbeat ping every 2 s: cached
    now[0] = 5.0
    sampler.sample()
    assert len(reads) == 2
    assert (
        ThrottledSampler(NvmlMonitor(FakeNvml([], init_error="NVML Shared Library Not Found"))).sample() == ()
    )
