"""The restoration engine used by `gpen-watch restore` and by every daemon worker.

Models are loaded once. Files flow through three overlapping stages so the device never waits for
the CPU when there are cores to spare:

    decode pool (threads)  ->  device loop (this thread)            ->  finish pool (threads)
    read, orient, pre-scale    detect, align, GPEN on face batches      paste back, encode, write

Faces of several photos share one generator batch; a photo is handed to the finish pool as soon
as all of its faces are back.

This module holds the restorer's warm state and the device loop, which decides what each stage may
hold (the memory budget, read-ahead, face batch). The stages themselves live beside it: decode_stage.py,
device_stages.py (detect and align, upscale, face batches) and finish.py; a photo in flight in
staged.py, face choice in faces.py, model loading in loader.py and modelsets.py.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING

from gpen_watch.catalog.registry import face_family, model_label
from gpen_watch.config import GLOBAL_ONLY, RestoreConfig
from gpen_watch.restore.api import EngineFactory, FileJob, FileResult, PhotoProgress, Stage
from gpen_watch.restore.engines.device_stages import detect_and_align, run_batch, upscale_photo
from gpen_watch.restore.engines.face_checks import IdentityCheck
from gpen_watch.restore.engines.loader import Loader
from gpen_watch.restore.engines.modelsets import ModelKey, ModelSets, release_memory
from gpen_watch.restore.engines.networks import Networks, open_networks
from gpen_watch.restore.runtime import memory
from gpen_watch.restore.runtime.batching import Admission, BatchPolicy
from gpen_watch.restore.runtime.device import (
    Placement,
    device_label,
    free_cached_memory,
    set_threads,
    tune_malloc_for_inference,
)
from gpen_watch.restore.stages import decode_stage, upscale
from gpen_watch.restore.stages.detect import Detector
from gpen_watch.restore.stages.enhance import FaceEnhancer
from gpen_watch.restore.stages.finish import finish
from gpen_watch.restore.stages.staged import StagedPhoto

log = logging.getLogger(__name__)


class Restorer:
    """Warm models plus the staged pipeline. Not thread-safe: one caller at a time."""

    def __init__(
        self,
        cfg: RestoreConfig,
        device: str | None = None,
        threads: int | None = None,
        io_threads: int | None = None,
        download: bool = True,
        detector: Detector | None = None,
    ) -> None:
        self.cfg = cfg
        self.threads = set_threads(threads)
        # restore.engine: what runs the networks (torch, or ONNX Runtime when it is installed).
        self.networks: Networks = open_networks(cfg, download, self.threads)
        self.place: Placement = self.networks.placement(device or cfg.device)
        dev = self.place.device
        if dev.type == "cpu":
            # Before the models load: CPU inference is page-fault bound under glibc's defaults.
            tune_malloc_for_inference()
        t0 = time.perf_counter()
        # The settings of the restorer's own that a job's profile cannot change (config.GLOBAL_ONLY).
        self._global_only = {
            name.split(".", 1)[1]: getattr(cfg, name.split(".", 1)[1])
            for name in GLOBAL_ONLY
            if name.startswith("restore.")
        }
        self._loader = Loader(cfg, self.place, download, detector, self.networks)
        self.models = ModelSets(self._loader.model_set, release_memory(lambda: free_cached_memory(dev)))
        # restore.identity_check: dlib's files, read at the first photo that asks for the check.
        self._identity = IdentityCheck(cfg.model_dir, dev)
        # The restorer's own model set (the global settings'), loaded now; others on first use.
        self._own_key = ModelKey.of(cfg)
        own = self.models.get(self._own_key)
        self.size = own.size
        self.detector = self._loader.detector(cfg)
        batch = own.enhancer.face_batch
        self.load_seconds = time.perf_counter() - t0
        self.memory_budget_mb = memory.resolve_budget_mb(cfg.memory_mb)
        loaded = memory.rss()
        loaded_mb = loaded.now_mb if loaded else 0.0
        # What the budget leaves for photos once the models are in and a pass's activations are
        # counted; at least one photo is always admitted, so a small budget slows, never stalls.
        activations = own.working_mb
        self.models.reserved_mb = activations  # a hungrier set costs the sets its difference
        self._photo_mb = self.memory_budget_mb - loaded_mb - activations
        # Model sets of other inboxes' profiles share what is left once one 12 MP photo fits; past
        # that the least recently used set is unloaded (modelsets). The own set always stays in.
        one_photo_mb = memory.photo_bytes(4000, 3000, cfg.max_side) / (1 << 20)
        self.models.cap_mb = max(own.mb, self._photo_mb + own.mb - one_photo_mb)
        # Highest resident memory seen when each stage of a photo ended (MB), over this restorer's life.
        self.stage_rss_mb: dict[str, float] = {}
        # CPU stages mostly run in OpenCV/Pillow code that releases the GIL.
        n_io = io_threads or max(2, min(8, (os.cpu_count() or 2)))
        self.io_threads = n_io
        self._decode_pool = ThreadPoolExecutor(n_io, thread_name_prefix="gpen-decode")
        self._finish_pool = ThreadPoolExecutor(n_io, thread_name_prefix="gpen-finish")
        self._batching = BatchPolicy(n_io, dev.type != "cpu", cfg.max_side, cfg.upscale)
        model = model_label(cfg.model)
        mask = "face-parsing mask" if cfg.use_parse else face_family(cfg.model).frame.mask.plain_label
        # Said once at start (logged here, sent to the parent by workers): what really runs, with
        # every "auto" resolved.
        # What status and the tray show for this worker's device ("Apple GPU (mps)").
        self.device_label = device_label(dev)
        self.loaded = (
            f"{model} ({self.size} px), {cfg.detector}, {mask}, on {self.device_label} in "
            f"{self.place.precision}{self.networks.through}"
        )
        if own.upscaler is not None:
            self.loaded += f", background upscaled x{cfg.upscale}"
        self._stopping = threading.Event()
        # Units of device work finished (a detection, a face batch, a tile batch), read by the
        # worker's heartbeat so that a slow photo is told from a hung one (dispatch.protocol).
        self.steps = 0
        # Photos past decoding and not yet handed back (read by the worker's heartbeat: "being
        # restored", apart from those taken ahead and still decoding).
        self.restoring = 0
        # Where each photo in hand is (``progress``), by id(job): written by the loop and the
        # decode and finish threads, read by the heartbeat's; single dict operations, no lock.
        self._photos: dict[int, PhotoProgress] = {}
        # ``engine_note`` is said by what drives the restorer, once: a worker's Ready carries it to
        # the parent, which logs it once per worker across restarts (dispatch.policy); the restore
        # command logs it itself (cli.engine_thread). Logged here too, it would be said twice.
        log.info(
            "restorer ready: %s (face batch %d, %d threads) in %.1f s",
            self.loaded,
            batch,
            self.threads,
            self.load_seconds,
        )

    # --- models ---------------------------------------------------------------------------------

    @property
    def engine_label(self) -> str:
        """What runs the networks and in what format: "PyTorch 2.14.1, fp32", "ONNX Runtime 1.24.1,
        OpenVINO provider, fp32"."""
        return self.networks.label

    @property
    def engine_note(self) -> str:
        """Why that is not what restore.engine, .provider, .precision and .parse_precision asked
        for; "" when it is."""
        return self.networks.note

    @property
    def enhancer(self) -> FaceEnhancer:
        """The enhancer of the restorer's own model set (loaded again if it was unloaded)."""
        return self.models.get(self._own_key).enhancer

    @property
    def upscaler(self) -> upscale.Upscaler | None:
        return self.models.get(self._own_key).upscaler

    @property
    def face_batch(self) -> int:
        """Faces per generator pass: the own set's, or while it is unloaded the last one used's
        (asking must not load a set: that could unload one a photo in hand needs)."""
        own = self.models.peek(self._own_key)
        if own is None:
            own = self.models.peek(self.models.loaded[-1])
        assert own is not None, "a restorer always holds at least one model set"
        return own.enhancer.face_batch

    @property
    def photo_allowance(self) -> int:
        """Bytes of photos the budget admits beside the models loaded now."""
        own = self.models.peek(self._own_key)
        extra = self.models.total_mb - (own.mb if own is not None else 0.0)
        return max(0, int((self._photo_mb - extra) * (1 << 20)))

    def settings(self, job: FileJob) -> RestoreConfig:
        """What ``job`` is restored with: its profile, with this restorer's global-only settings."""
        if job.restore is None:
            return self.cfg
        return dataclasses.replace(job.restore, **self._global_only)

    @property
    def read_ahead(self) -> int:
        """Photos worth having in hand at once: every decode thread busy twice over, and on a GPU
        enough one-face portraits to fill a face batch (capped at 32), but no more 12 MP photos
        than the memory budget holds (at least 1). ``restore_files`` also admits photos by their
        actual size, so larger ones lower this further as they come."""
        return self._batching.read_ahead(self.face_batch, self.photo_allowance)

    @property
    def progress(self) -> tuple[PhotoProgress, ...]:
        """The photos in hand and the stage each is in (restore.api.Engine)."""
        return tuple(self._photos.copy().values())

    def _tell(self, job: FileJob, stage: Stage, done: int = 0, total: int = 0) -> None:
        self._photos[id(job)] = PhotoProgress(str(job.src), stage, done, total)

    def stop(self) -> None:
        """Ask a running ``restore_files`` (on another thread) to end: it starts nothing new, writes
        no further result, and returns at its next step. Thread-safe; cannot be undone."""
        self._stopping.set()

    def close(self) -> None:
        self._decode_pool.shutdown(wait=True, cancel_futures=True)
        self._finish_pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> Restorer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- pipeline -------------------------------------------------------------------------------

    def restore_files(
        self, jobs: Iterable[FileJob | None], prefetch: int | None = None
    ) -> Iterator[FileResult]:
        """Restore each job's file; results are yielded as photos finish (not in job order).

        ``jobs`` may be a live source (a daemon worker's): it yields None for "nothing to hand out
        right now", and the pipeline asks again while it works on what it has, so photos that
        arrive meanwhile join the running batches instead of waiting for them to drain. Such a
        source must block (not yield None) when the restorer holds nothing: every result it was
        given has been yielded and consumed.

        ``prefetch``: photos decoded ahead of the device loop; default ``read_ahead``. Photos are
        also admitted only while the memory they need (decoded size, from the file's header) fits
        in ``photo_allowance`` beside the photos already held; one is always admitted.
        """
        admission: Admission[StagedPhoto] = Admission(
            jobs,
            prefetch or self.read_ahead,
            lambda job: decode_stage.photo_cost(job, self.settings(job)),
            lambda: self.photo_allowance,
            self._admit,
        )
        ready: list[StagedPhoto] = []  # detected and aligned, faces waiting for the generator
        finishing: dict[Future[FileResult], StagedPhoto] = {}
        try:
            yield from self._loop(admission, ready, finishing)
        finally:
            self._photos.clear()

    def _loop(
        self,
        admission: Admission[StagedPhoto],
        ready: list[StagedPhoto],
        finishing: dict[Future[FileResult], StagedPhoto],
    ) -> Iterator[FileResult]:
        decoding = admission.decoding
        while not self._stopping.is_set():
            admission.refill()
            if not (decoding or ready or finishing):
                if admission.exhausted:
                    return
                # A source that broke its contract (None with nothing held): do not spin hot.
                time.sleep(0.01)
                continue
            # Absorb decoded photos; wait for the next one only while a batch is not yet full.
            while self._batching.fill_batch(decoding, ready, self.face_batch):
                work = decoding.popleft().result()
                self.restoring += 1
                admission.refill()
                if work.image is not None:
                    busy = {w.models for w in ready}
                    self._tell(work.job, Stage.DETECTING)
                    detect_and_align(work, self.models, self._loader, self.place.device, busy, self._step)
                    upscale_photo(work, self.models, self._step_unless_stopping, self._tiles(work.job))
                if work.pending:
                    self._tell(work.job, Stage.RESTORING, 0, len(work.faces))
                    ready.append(work)
                else:
                    self._identity.check([work])  # faces left as they were are described too
                    finishing[self._finish_later(work)] = work
            if ready and not self._stopping.is_set():
                finished = run_batch(ready, self.models, self._step)
                self._identity.check(finished)
                for work in finished:
                    finishing[self._finish_later(work)] = work
                ready = [w for w in ready if w.pending]
                for work in ready:
                    self._tell(work.job, Stage.RESTORING, len(work.faces) - work.pending, len(work.faces))
            if finishing:
                if decoding or ready:
                    timeout: float | None = 0
                else:
                    # Only photos being finished: sleep until one is, but look at a live source
                    # now and then, so a photo that arrives meanwhile starts decoding at once.
                    timeout = None if admission.exhausted else 0.05
                done, _ = wait(finishing, timeout=timeout, return_when=FIRST_COMPLETED)
                for fut in done:
                    work = finishing.pop(fut)
                    admission.release(work.cost)
                    self._photos.pop(id(work.job), None)
                    result = fut.result()
                    self.restoring -= 1
                    self._keep_budget(result)
                    yield result

    # --- stages ---------------------------------------------------------------------------------

    def _finish_later(self, work: StagedPhoto) -> Future[FileResult]:
        """Hand ``work`` to the finish pool: paste back, encode, write."""
        self._tell(work.job, Stage.WRITING)
        return self._finish_pool.submit(finish, work, work.cfg.smooth_below, self._stopping)

    def _keep_budget(self, result: FileResult) -> None:
        """Record the photo's memory readings; over budget, hand freed memory back to the OS."""
        for stage, mb in result.rss_mb.items():
            self.stage_rss_mb[stage] = max(mb, self.stage_rss_mb.get(stage, 0.0))
        now = memory.rss()
        if now is not None and now.now_mb > self.memory_budget_mb:
            memory.give_back_free_memory()

    def _admit(self, job: FileJob, cost: int) -> Future[StagedPhoto]:
        """Queue ``job`` for the decode pool."""
        self._tell(job, Stage.WAITING)
        return self._decode_pool.submit(self._decode, job, cost)

    def _decode(self, job: FileJob, cost: int = 0) -> StagedPhoto:
        """The decode stage (decode_stage.py), run on the decode pool; decoded, the photo waits
        for the device loop."""
        self._tell(job, Stage.DECODING)
        work = decode_stage.decode(job, self.settings(job), self.cfg.max_megapixels, self._loader, cost)
        self._tell(job, Stage.WAITING)
        return work

    def _tiles(self, job: FileJob) -> Callable[[int, int], None]:
        """What the upscaler calls as its tiles get done."""
        return lambda done, total: self._tell(job, Stage.UPSCALING, done, total)

    def _step(self) -> None:
        """One more unit of device work done (read by the worker's heartbeat)."""
        self.steps += 1

    def _step_unless_stopping(self) -> bool:
        """Called between tile batches: one more step done; True when the restorer is stopping."""
        self.steps += 1
        return self._stopping.is_set()


if TYPE_CHECKING:
    # What a worker drives (dispatch.worker_main): mypy holds the engine to that contract here.
    _as_factory: EngineFactory = Restorer
