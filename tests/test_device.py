"""Choosing the device, precision and face batch: Apple's GPU (torch's mps backend) through the
same seams as CUDA. No Mac here, so torch's availability checks are the edge replaced."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import TINY_GPEN

from gpen_watch.base.errors import ConfigError, GpenWatchError
from gpen_watch.restore.engines.gpen_family import runner
from gpen_watch.restore.nets.gpen_model import GPENConfig, build_gpen, resolve_precision
from gpen_watch.restore.runtime import batching, device
from gpen_watch.restore.stages.enhance import FaceEnhancer, OutOfMemory

MPS_OOM = (
    "MPS backend out of memory (MPS allocated: 17.2 GB, other allocations: 1.1 GB, max allowed: 18.1 GB)"
)


@pytest.fixture
def mac(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Mac with Apple's GPU: no CUDA, mps available."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)


def test_auto_picks_apples_gpu_when_there_is_no_cuda(mac: None) -> None:
    assert device.resolve_device("auto") == torch.device("mps")
    # cpu stays the CPU, and mps can be named.
    assert device.resolve_device("cpu") == torch.device("cpu")
    assert device.resolve_device("mps") == torch.device("mps")
    place = device.placement("auto", "auto", channels_last=True)
    # fp32 until measured on one; channels_last is for tensor cores (CUDA) only.
    assert (place.device.type, place.precision, place.channels_last) == ("mps", "fp32", False)
    assert device.placement("auto", "fp16", True).precision == "fp16"
    assert device.placement("auto", "bf16", True).precision == "bf16"
    assert device.device_label(place.device) == "Apple GPU (mps)"


def test_cuda_still_comes_first_and_cpu_without_either(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert device.resolve_device("auto") == torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert device.resolve_device("auto") == torch.device("cpu")
    assert device.device_label(torch.device("cpu")) == "cpu"


def test_mps_asked_for_where_there_is_none_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(GpenWatchError, match="device 'mps' was asked for but Apple's GPU"):
        device.resolve_device("mps")


def test_fp16_needs_a_gpu() -> None:
    assert resolve_precision("mps", "fp16") == "fp16"
    assert resolve_precision("mps", "auto") == "fp32"
    with pytest.raises(ValueError, match="CUDA or Apple's mps"):
        resolve_precision("cpu", "fp16")
    with pytest.raises(ConfigError, match=r"restore\.precision"):
        device.placement("cpu", "fp16", False)


def test_face_batch_on_apples_gpu_follows_metals_working_set(
    mac: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    place = device.placement("auto", "auto", True)
    monkeypatch.setattr(torch.mps, "recommended_max_memory", lambda: 20 << 30, raising=False)
    monkeypatch.setattr(torch.mps, "driver_allocated_memory", lambda: 4 << 30, raising=False)
    # Half of the 16 GB left, at 330 MB a 512 px face in fp32, as on CUDA.
    assert batching.auto_face_batch(512, place) == (8 << 30) // (330 << 20)
    assert batching.auto_face_batch(512, place, parse=True) == (8 << 30) // (330 << 20)
    monkeypatch.delattr(torch.mps, "recommended_max_memory")
    assert batching.auto_face_batch(512, place) == 4  # a torch that cannot tell


def test_face_batch_on_cuda_fills_half_the_free_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    # No CUDA here: the free-memory reading (device.free_memory) is the edge replaced.
    monkeypatch.setattr(device, "free_memory", lambda dev: 16 << 30)
    fp32 = device.Placement(torch.device("cuda"), "fp32", channels_last=True)
    fp16 = device.Placement(torch.device("cuda"), "fp16", channels_last=True)
    # Half of 16 GB at 330 MB a 512 px face in fp32, half that in fp16; a 2048 px face takes 16x.
    assert batching.auto_face_batch(512, fp32) == (8 << 30) // (330 << 20) == 24
    assert batching.auto_face_batch(512, fp16) == (8 << 30) // (165 << 20) == 49
    assert batching.auto_face_batch(2048, fp32) == 1
    monkeypatch.setattr(device, "free_memory", lambda dev: 1 << 40)
    assert batching.auto_face_batch(256, fp16) == batching.MAX_FACE_BATCH
    cpu = device.placement("cpu", "fp32", False)
    assert (batching.auto_face_batch(512, cpu), batching.auto_face_batch(512, cpu, parse=True)) == (4, 1)
    # After an out-of-memory: half, down to one face; then nothing smaller is left to try.
    assert [batching.after_out_of_memory(n) for n in (64, 5, 2, 1)] == [32, 2, 1, None]


def test_mps_out_of_memory_halves_the_face_batch_like_cuda() -> None:
    assert device.is_out_of_memory(RuntimeError(MPS_OOM))
    assert device.is_out_of_memory(torch.cuda.OutOfMemoryError("CUDA out of memory"))
    assert not device.is_out_of_memory(RuntimeError("shape mismatch"))
    torch.manual_seed(0)
    size = TINY_GPEN["size"]
    place = device.placement("cpu", "fp32", False)
    enhancer = FaceEnhancer(runner(build_gpen(GPENConfig(**TINY_GPEN)), place), place, 4)
    assert enhancer.size == size
    real = enhancer._run
    seen: list[int] = []

    def run(chunk: np.ndarray):
        seen.append(len(chunk))
        if len(chunk) > 1:
            raise RuntimeError(MPS_OOM)
        return real(chunk)

    enhancer._run = run  # type: ignore[method-assign]
    crops = np.zeros((3, size, size, 3), np.uint8)
    restored, _ = enhancer.enhance(crops)
    assert restored.shape == crops.shape
    assert seen == [3, 2, 1, 1, 1]
    assert enhancer.face_batch == 1
    enhancer._run = lambda chunk: (_ for _ in ()).throw(RuntimeError(MPS_OOM))  # type: ignore[method-assign]
    with pytest.raises(OutOfMemory):
        enhancer.enhance(crops[:1])
    # Any other error is not taken for memory.
    enhancer._run = lambda chunk: (_ for _ in ()).throw(RuntimeError("shape mismatch"))  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="shape mismatch"):
        enhancer.enhance(crops[:1])
