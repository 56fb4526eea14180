"""The batching policy (restore.runtime.batching): photos admitted by count and by memory, photos handed to
a worker, when the device loop waits for a fuller face batch."""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

from gpen_watch.restore.api import FileJob
from gpen_watch.restore.runtime.batching import DEFAULT_IN_FLIGHT, Admission, BatchPolicy, in_flight


def _job(name: str) -> FileJob:
    return FileJob(Path(name), Path(name + ".out"))


def _admission(
    jobs: list[FileJob | None], prefetch: int, costs: dict[str, int], allowance: int
) -> Admission[str]:
    def decode(job: FileJob, cost: int) -> Future[str]:
        done: Future[str] = Future()
        done.set_result(job.src.name)
        return done

    return Admission(jobs, prefetch, lambda job: costs[job.src.name], lambda: allowance, decode)


def test_a_photo_over_the_memory_allowance_waits_until_one_finishes() -> None:
    a = _admission([_job("a"), _job("b"), _job("c")], 3, {"a": 60, "b": 50, "c": 10}, allowance=100)
    a.refill()
    # The first is always admitted; the second would take the photos held past the allowance.
    assert [f.result() for f in a.decoding] == ["a"] and a.held == 60
    a.refill()
    assert len(a.decoding) == 1  # still waiting, taken from the source but not admitted
    a.release(60)
    a.refill()
    assert [f.result() for f in a.decoding] == ["a", "b", "c"] and a.held == 60
    a.decoding.clear()  # the device loop took them
    a.refill()
    assert a.exhausted


def test_a_live_source_with_nothing_waiting_is_asked_again_later() -> None:
    a = _admission([None, _job("a")], 4, {"a": 1}, allowance=100)
    a.refill()
    assert not a.decoding and not a.exhausted  # None: nothing now, not the end
    a.refill()
    assert [f.result() for f in a.decoding] == ["a"]


def test_photos_in_flight_and_read_ahead() -> None:
    assert in_flight(0, 7) == 7 and in_flight(3, 7) == 3 and in_flight(0, 0) == DEFAULT_IN_FLIGHT
    cpu = BatchPolicy(io_threads=2, on_gpu=False, max_side=4096, upscale=1)
    gpu = BatchPolicy(io_threads=2, on_gpu=True, max_side=4096, upscale=1)
    plenty = 1 << 40
    assert cpu.read_ahead(face_batch=64, allowance=plenty) == 4  # twice the decode threads, at least 4
    assert gpu.read_ahead(face_batch=64, allowance=plenty) == 32  # a face batch of portraits, capped
    assert gpu.read_ahead(face_batch=64, allowance=0) == 1  # always one


@dataclass
class _Photo:
    pending: int


def test_the_device_loop_waits_for_a_fuller_batch_only_while_photos_decode() -> None:
    decoding: deque[Future[str]] = deque([Future()])
    assert BatchPolicy.fill_batch(decoding, [_Photo(3)], face_batch=8)  # 3 < 8 faces: wait for more
    assert not BatchPolicy.fill_batch(decoding, [_Photo(8)], face_batch=8)  # full: run the batch
    decoding[0].set_result("x")
    assert BatchPolicy.fill_batch(decoding, [_Photo(8)], face_batch=8)  # decoded already: take it
    assert not BatchPolicy.fill_batch(deque(), [_Photo(1)], face_batch=8)  # nothing decoding
