"""The batching policy, in one place: how many photos a worker is handed at once, how many a
restorer takes ahead of its device loop (by count and by memory), and when the device loop waits
for more faces before a generator pass.

The face batch (faces per generator pass) is here too: its size from the device's free memory
(``auto_face_batch``, which the loader asks unless restore.face_batch is set) and the smaller one
to retry with after the device ran out of memory (``after_out_of_memory``, which the enhancer asks).

Torch-free: the pool (in the service's parent process) asks ``in_flight``; the restorer
(``restore.engines.restorer``) drives its stages through ``Admission`` and ``BatchPolicy``. Only
``auto_face_batch`` reads the device (through ``device.free_memory``), in a restorer.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from gpen_watch.restore.api import FileJob
from gpen_watch.restore.runtime import memory

if TYPE_CHECKING:
    from gpen_watch.restore.runtime.device import Placement

# Photos handed to one worker at once when neither the settings nor its restorer say (a CPU's).
DEFAULT_IN_FLIGHT = 4
# Photos in hand on a GPU are capped at this many even when a face batch would take more.
MAX_GPU_READ_AHEAD = 32
# The photo the budget is sized by: 12 MP.
_SIZING_PHOTO = (4000, 3000)
# Rough activation memory of one face through the generator, fp32, measured as the growth of peak
# allocated memory per extra face in a batch; half precision needs about half.
_BYTES_PER_FACE_FP32 = {256: 80 << 20, 512: 330 << 20, 1024: 1320 << 20}
# Faces per generator pass, at most, however much memory is free.
MAX_FACE_BATCH = 64

T = TypeVar("T")


class HasPendingFaces(Protocol):
    @property
    def pending(self) -> int:
        """Faces of this photo still waiting for the generator."""
        ...


def in_flight(configured: int, asked: int) -> int:
    """Photos to hand one worker at once: the configured number (workers.images_in_flight), else
    what its restorer asked for (``BatchPolicy.read_ahead``), else ``DEFAULT_IN_FLIGHT``."""
    return configured or asked or DEFAULT_IN_FLIGHT


@dataclass(frozen=True)
class BatchPolicy:
    """A restorer's batching decisions, from what does not change while it runs."""

    io_threads: int
    on_gpu: bool
    max_side: int
    upscale: int

    def read_ahead(self, face_batch: int, allowance: int) -> int:
        """Photos worth having in hand at once: every decode thread busy twice over, and on a GPU
        enough one-face portraits to fill a face batch (capped), but no more 12 MP photos than
        ``allowance`` (bytes) holds (at least 1). ``Admission`` also admits photos by their actual
        size, so larger ones lower this further as they come."""
        n = max(4, 2 * self.io_threads)
        if self.on_gpu:
            n = max(n, min(face_batch, MAX_GPU_READ_AHEAD))
        fits = allowance // (memory.photo_bytes(*_SIZING_PHOTO, self.max_side) * self.upscale**2)
        return max(1, min(n, fits))

    @staticmethod
    def fill_batch(decoding: deque[Future[T]], ready: Sequence[HasPendingFaces], face_batch: int) -> bool:
        """Whether the device loop takes the next decoded photo before a generator pass: it is
        done already, or the faces waiting do not yet fill a batch (then it waits for it)."""
        return bool(decoding) and (decoding[0].done() or queued_faces(ready) < face_batch)


def auto_face_batch(size: int, place: Placement, parse: bool = False) -> int:
    """Faces per forward: a few on CPU (more only adds latency), as many as half the free memory holds on GPU.

    On Apple's GPU "free" is Metal's recommended working set less what the process holds (shared
    with the CPU, so half of it is the same margin as on CUDA); 4 where torch cannot tell.

    On a CPU with ParseNet, one: ParseNet's pass costs ~15x the generator's there, so batching the
    generator gains ~1 % in time, while with the allocator tuned for inference the two networks'
    activations at batch 4 held ~1 GB more at the peak than at batch 1 (docs/benchmarks.md, "Memory").
    """
    if place.device.type not in ("cuda", "mps"):
        return 1 if parse else 4
    # torch, so only here: a restorer sizing its batch, never the service's parent process.
    from gpen_watch.restore.runtime.device import free_memory

    free = free_memory(place.device)
    if free is None:
        return 4
    per_face = _BYTES_PER_FACE_FP32.get(size, _BYTES_PER_FACE_FP32[512] * (size / 512) ** 2)
    if place.half:
        per_face //= 2
    return int(max(1, min(MAX_FACE_BATCH, (free // 2) // per_face)))


def after_out_of_memory(face_batch: int) -> int | None:
    """The face batch to retry with after a pass of ``face_batch`` faces ran out of device memory:
    half of it; None when even one face did not fit. The enhancer keeps the smaller batch for the
    rest of the worker's life: memory rarely comes back."""
    if face_batch <= 1:
        return None
    return max(1, face_batch // 2)


def queued_faces(ready: Sequence[HasPendingFaces]) -> int:
    """Faces of ``ready`` photos still waiting for the generator."""
    return sum(w.pending for w in ready)


class Admission(Generic[T]):
    """Photos taken from a job source and handed to decoding, ``prefetch`` at most at once and, past
    the first, only while their memory (``cost``, from the file's header) fits in ``allowance()``
    beside the photos already held. A photo that does not fit waits, taken but not yet admitted,
    until one finishes (``release``)."""

    def __init__(
        self,
        jobs: Iterable[FileJob | None],
        prefetch: int,
        cost: Callable[[FileJob], int],
        allowance: Callable[[], int],
        decode: Callable[[FileJob, int], Future[T]],
    ) -> None:
        self._todo: Iterator[FileJob | None] = iter(jobs)
        self._prefetch = prefetch
        self._cost = cost
        self._allowance = allowance
        self._decode = decode
        self.decoding: deque[Future[T]] = deque()
        self.exhausted = False  # the source has no more jobs
        self.held = 0  # bytes of the photos in any stage
        self._waiting: tuple[FileJob, int] | None = None  # taken from the source, not yet admitted

    def refill(self) -> None:
        """Take jobs from the source and start decoding them while the policy admits them; return
        at once when a live source has nothing waiting (it yields None)."""
        while not self.exhausted and len(self.decoding) < self._prefetch:
            if self._waiting is None:
                job = next(self._todo, _END)
                if job is _END:
                    self.exhausted = True
                    return
                if job is None:  # nothing waiting at the source now
                    return
                assert isinstance(job, FileJob)
                self._waiting = (job, self._cost(job))
            job, cost = self._waiting
            if self.held and self.held + cost > self._allowance():
                return  # over budget: wait for a photo to finish
            self._waiting = None
            self.held += cost
            self.decoding.append(self._decode(job, cost))

    def release(self, cost: int) -> None:
        """A photo of ``cost`` bytes is done: its memory is free for the next."""
        self.held -= cost


_END = object()  # the job source is exhausted
