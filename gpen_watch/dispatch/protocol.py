"""Messages between the service (parent) and a restorer worker, as typed dataclasses.

Every message is a small frozen dataclass whose fields are plain picklable objects (FileJob,
FileResult, ints, strings), so the same messages travel over a multiprocessing Pipe to a local
worker and over any other transport a worker implementation uses; neither side needs the other's
code beyond this module.

parent -> worker (``ToWorker``)
    Jobs(items)              more images to restore
    Stop()                   finish the images already started, hand back the rest, exit

worker -> parent (``FromWorker``)
    Ready(...)               models loaded: pid, device, threads, read-ahead, what it loaded,
                             the engine that runs it (and why not the one asked for)
    Took(key)                the restorer started on this image (blame for a crash is laid here)
    Result(key, result)
    ModelSets(loaded)        the model sets it holds, after the first load and each load or unload
    Heartbeat(busy, ...)     every few seconds from a side thread: the process is alive, and
                             where each photo it holds is
    Log(level, logger, message)  the worker's log records, written by the parent's handlers
    Fatal(kind, message)     the worker cannot go on and is about to exit (see FatalKind)
    Bye(keys)                stopping: these images were never started
"""

from __future__ import annotations

from dataclasses import dataclass

from gpen_watch.base.strenum import StrEnum
from gpen_watch.gpu.nvml import GpuSample
from gpen_watch.restore.api import FileJob, FileResult, ModelKey, PhotoProgress


class FatalKind(StrEnum):
    """Why a worker gave up, which decides whether restarting it can help."""

    MODEL = "model"  # weights missing or corrupt: restarting will not help
    DEVICE = "device"  # CUDA failed: the GPU may be gone
    CRASH = "crash"  # anything else


@dataclass(frozen=True)
class JobItem:
    key: int  # the journal's job id
    job: FileJob


@dataclass(frozen=True)
class Jobs:
    items: tuple[JobItem, ...]


@dataclass(frozen=True)
class Stop:
    pass


@dataclass(frozen=True)
class Ready:
    pid: int | None
    device: str
    threads: int
    # What the restorer resolved its device to, for a slot that left it to it ("auto").
    device_label: str = ""
    # Photos the restorer wants in hand at once (0: not said).
    read_ahead: int = 0
    # Which weights, detector, device and precision it really runs (auto settings resolved).
    loaded: str = ""
    # Its memory budget in MB (0: not said).
    memory_budget_mb: int = 0
    # Where it runs, for status ("" for a worker on this machine).
    node: str = ""
    # What runs its networks ("ONNX Runtime 1.32.0, CPU provider"; "": not said), and the one
    # sentence saying why that is not what the settings asked for ("" when it is).
    engine: str = ""
    engine_note: str = ""


@dataclass(frozen=True)
class ModelSets:
    """The model sets the restorer holds now, least recently used first (restore.engines.modelsets): the
    global settings' and those other inboxes' profiles loaded since."""

    loaded: tuple[ModelKey, ...]


@dataclass(frozen=True)
class Took:
    key: int


@dataclass(frozen=True)
class Result:
    key: int
    result: FileResult


@dataclass(frozen=True)
class PhotoAt:
    """One photo the worker's restorer holds (``Heartbeat.photos``): its job's key, and where it is."""

    key: int
    progress: PhotoProgress


@dataclass(frozen=True)
class Heartbeat:
    busy: bool
    # How many units of device work (a detection, a face batch, a tile batch) the restorer has
    # finished so far: while it moves, a photo that takes longer than workers.image_timeout (a
    # large photo upscaled on a CPU) is slow, not hung. 0 from a restorer that does not count.
    progress: int = 0
    # Photos past decoding (on the device, or being pasted back and written): the ones "being
    # restored" of those the worker holds. -1 from a restorer that does not say.
    restoring: int = -1
    # The GPUs of the machine the worker runs on, as NVML read them there: sent by a cluster
    # node's worker (this machine's are read by the tray itself); () where there is no NVML.
    gpus: tuple[GpuSample, ...] = ()
    # The photos the restorer holds and the stage each is in; () from a restorer that does not say.
    photos: tuple[PhotoAt, ...] = ()


@dataclass(frozen=True)
class Log:
    level: int
    logger: str
    message: str


@dataclass(frozen=True)
class Fatal:
    kind: FatalKind
    message: str


@dataclass(frozen=True)
class Bye:
    keys: tuple[int, ...]


ToWorker = Jobs | Stop
FromWorker = Ready | ModelSets | Took | Result | Heartbeat | Log | Fatal | Bye

# Exit codes of a worker that reported Fatal (anything else is a crash seen from outside).
EXIT_CODES = {FatalKind.MODEL: 3, FatalKind.DEVICE: 4, FatalKind.CRASH: 5}

# Default factory for the restorer inside a worker: "module:attribute", called as
# factory(restore_cfg, device, threads=threads). Tests and benchmarks substitute a fake one.
DEFAULT_FACTORY = "gpen_watch.restore.engines.restorer:Restorer"


@dataclass(frozen=True)
class EngineChoice:
    """Which engine the workers load, and what the service may count on it to do.

    The real engine (the default) loads the registry's model files and refuses the files that
    ``imaging.reasons`` refuses from their header. A stand-in (tests, benchmarks: ``stand_in``)
    brings its own models and restores any bytes, so the service checks neither for it unless
    told to.
    """

    factory: str = DEFAULT_FACTORY
    # The engine needs the model files in the model store: the service waits for them (ModelGate).
    model_files: bool = True
    # The engine refuses files from their header alone: the service sets those aside on arrival.
    header_rules: bool = True

    @classmethod
    def stand_in(cls, factory: str, *, header_rules: bool = False) -> EngineChoice:
        return cls(factory, model_files=False, header_rules=header_rules)
