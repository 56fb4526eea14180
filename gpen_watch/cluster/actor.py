"""The restorer on a remote node: a Ray actor that loads the models once and keeps them warm.

Ray starts it in a worker process on the node it was placed on (one per GPU, ``num_gpus=1``, Ray
sets CUDA_VISIBLE_DEVICES; or one for the node's CPU when the node offers it). Its restorer runs
the same live loop as a local worker (``worker_main.serve``), so faces are batched across the
photos it holds. The actor is threaded: each ``restore`` call hands its photo to that loop and
waits for its own result, so many calls are in flight at once and the service decides how many.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import socket
import sys
import tempfile
import threading
import traceback
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path

from gpen_watch.base.errors import ModelError
from gpen_watch.config import RestoreConfig
from gpen_watch.dispatch import protocol as P
from gpen_watch.dispatch import worker_main
from gpen_watch.dispatch.devices import THREAD_ENV_VARS, WorkerSlot, usable_cores
from gpen_watch.dispatch.payload import PhotoJob, PhotoResult, Scratch
from gpen_watch.gpu.nvml import GpuSample, NvmlMonitor, ThrottledSampler
from gpen_watch.restore.api import Engine, FileResult, ModelKey

log = logging.getLogger(__name__)

# NVML is read at most this often, however often the service pings (every heartbeat).
GPU_SAMPLE_S = 5.0
# Under the node's temp folder: one folder per actor process, named by its pid.
SCRATCH_FOLDER = "gpen-watch-actors"
# How long ``ready`` waits for the restorer's thread to say how many threads torch runs.
_THREADS_WAIT_S = 10.0


def scratch_root(tmp: Path, pid: int) -> Path:
    """This actor's scratch folder, ``<tmp>/gpen-watch-actors/<pid>``; the folders of actors that
    are gone (killed with photos in hand: Ray gives them no time to clean up) are removed first."""
    parent = tmp / SCRATCH_FOLDER
    parent.mkdir(mode=0o700, exist_ok=True)
    sweep_scratch(parent)
    return parent / str(pid)


def sweep_scratch(parent: Path) -> None:
    for entry in parent.iterdir():
        if entry.name.isdigit() and not _running(int(entry.name)):
            shutil.rmtree(entry, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


class RestorerActor:
    """Created through ``ray.remote(RestorerActor).options(...)`` by ``remote.RayWorker``."""

    def __init__(self, restore: RestoreConfig, factory: str, threads: int, env: dict[str, str]) -> None:
        from gpen_watch.cluster.raylib import ray

        # Ray counts the machine's cores; this process may be confined to fewer (taskset, a
        # cgroup), and more threads than cores only slow the restorer down.
        threads = max(1, min(threads, usable_cores()))
        # Before the restorer imports torch, numpy or OpenCV: cap the thread pools as locally.
        os.environ.update({k: v for k, v in env.items() if k != "CUDA_VISIBLE_DEVICES"})
        os.environ.update({var: str(threads) for var in THREAD_ENV_VARS if var in env})
        device = "cuda" if ray().get_gpu_ids() else "cpu"
        self._slot = WorkerSlot("actor", device, device, None, threads)
        self._node = f"{socket.gethostname()} ({ray().util.get_node_ip_address()})"
        self._scratch = Scratch(scratch_root(Path(tempfile.gettempdir()), os.getpid()))
        atexit.register(self._scratch.close)
        self._waiting: dict[int, Future[PhotoResult]] = {}
        self._lock = threading.Lock()
        self._fatal: P.Fatal | None = None
        self._restorer: Engine | None = None
        # Every GPU of this machine, not only the one Ray gave this actor: status shows the node.
        self._gpus = ThrottledSampler(NvmlMonitor(environ={}), every_s=GPU_SAMPLE_S)
        try:
            restorer = worker_main.load_factory(factory)(restore, device, threads=threads)
        except ModelError as exc:
            self._fatal = P.Fatal(P.FatalKind.MODEL, str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - reported to the service, which decides
            kind = worker_main.start_failure_kind(exc, device)
            self._fatal = P.Fatal(kind, f"could not start the restorer: {type(exc).__name__}: {exc}")
            return
        # The model sets the restorer holds, as it last said (ModelSets); the service reads them
        # with each ping, since an actor only answers calls.
        self._restorer = restorer
        self._model_sets: tuple[ModelKey, ...] = ()
        worker_main.report_model_sets(restorer, self)
        self._jobs = worker_main.JobQueue()
        self._threads_read = threading.Event()
        threading.Thread(target=self._run, daemon=True, name="restorer").start()

    @property
    def _engine(self) -> Engine:
        """The restorer, once it loaded (calls other than ``ready`` come only after a Ready)."""
        assert self._restorer is not None, "the restorer did not start"
        return self._restorer

    def ready(self) -> P.Ready | P.Fatal:
        if self._fatal is not None:
            return self._fatal
        # The threads torch runs where the photos are computed (the restorer's thread), not
        # the number asked for: status shows what the node really does.
        self._threads_read.wait(_THREADS_WAIT_S)
        return worker_main.ready_message(self._engine, self._slot, os.getpid(), node=self._node)

    def ping(self) -> tuple[tuple[GpuSample, ...], tuple[ModelKey, ...], tuple[P.PhotoAt, ...]]:
        """Alive; with this machine's GPUs as NVML reads them (none without NVML), the model
        sets the restorer holds now, and where each photo it holds is."""
        return (
            self._gpus.sample(),
            self._model_sets,
            worker_main.photos_at(self._engine.progress, self._jobs),
        )

    def restore(self, key: int, photo: PhotoJob) -> PhotoResult:
        """Restore one photo; returns when it is done (other calls run meanwhile)."""
        done: Future[PhotoResult] = Future()
        with self._lock:
            self._waiting[key] = done
        self._jobs.waiting.put(P.JobItem(key, self._scratch.job(key, photo)))
        return done.result()

    def close(self) -> None:
        """The service is done with this actor (a clean stop): its scratch folder goes now.
        An actor killed instead leaves it to the next one on this node (``scratch_root``)."""
        self._scratch.close()
        sweep_scratch(self._scratch.root.parent)

    # --- worker_main.Sender: what the restorer loop says ----------------------------------------

    def send(self, msg: P.FromWorker) -> None:
        if isinstance(msg, P.ModelSets):
            self._model_sets = msg.loaded
            return
        if isinstance(msg, P.Result):
            with self._lock:
                done = self._waiting.pop(msg.key, None)
            if done is None:
                self._scratch.discard(Path(msg.result.src))
                return
            try:
                done.set_result(self._scratch.result(msg.result))
            except OSError as exc:
                failed = FileResult(msg.result.src, False, error=f"cannot read the result back: {exc}")
                done.set_result(PhotoResult(failed))

    def _run(self) -> None:
        self._slot = replace(self._slot, threads=torch_threads(self._slot.threads))
        self._threads_read.set()
        try:
            worker_main.serve(self, self._jobs, self._engine)
        except BaseException as exc:  # noqa: BLE001
            # As a local worker does: the process may be in a bad state (CUDA errors are sticky).
            # Exiting fails every call in flight; the service requeues them and starts a new actor.
            log.error("restorer failed: %s\n%s", exc, traceback.format_exc())
            kind = P.FatalKind.DEVICE if worker_main.is_device_error(exc) else P.FatalKind.CRASH
            with contextlib.suppress(Exception):
                self._engine.close()
            os._exit(P.EXIT_CODES[kind])


def torch_threads(threads: int) -> int:
    """Give torch ``threads`` threads on this thread, the one the photos are computed on (Ray
    starts an actor's process with OMP_NUM_THREADS=1, and the restorer was made on another
    thread), and say how many it runs now (a stand-in restorer without torch: the number asked
    for)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return threads
    torch.set_num_threads(threads)
    return int(torch.get_num_threads())
