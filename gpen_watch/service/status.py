"""The service's status as one typed tree: built by the daemon, sent over the control channel,
printed by `gpen-watch status` and read by the tray's view model.

``to_json`` and ``from_json`` are the only translation to and from the wire (and `status --json`):
the JSON keys are the field names. ``from_json`` fills a missing field with its default and
ignores a key it does not know, so a client and a service one release apart still understand
each other.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, TypeVar

from gpen_watch.gpu.nvml import GpuSample
from gpen_watch.platform import program
from gpen_watch.service.inbox_status import InboxStatus

T = TypeVar("T")


@dataclass(frozen=True)
class QueueStatus:
    """Jobs per journal state, ever, plus those being restored right now."""

    queued: int = 0
    running: int = 0
    done: int = 0
    failed: int = 0
    # Of ``failed``: because of a bug in gpen-watch or a library, not the photo's fault.
    failed_by_bug: int = 0
    unsupported: int = 0
    duplicate: int = 0
    gone: int = 0
    in_flight: int = 0  # sent to the workers (the pool's count)
    restoring: int = 0  # of those, the ones a restorer has started on
    # Of ``done``: redos (a done photo restored again), which are no photo more.
    redos: int = 0

    @property
    def depth(self) -> int:
        """Waiting + being restored: the tray's badge."""
        return self.queued + self.running


@dataclass(frozen=True)
class Throughput:
    """This run (since the service started): photos done (first runs: restored, or without a
    face), redos apart, failures; and the rate now (service.throughput): runs ended a minute over
    the last ``window_s`` of time the workers held work, 0 while they hold none."""

    images: int = 0
    faces: int = 0
    failed: int = 0
    # Faces whose identity distance was over restore.identity_threshold (docs/identity.md).
    flagged: int = 0
    images_per_min: float = 0.0
    images_per_s: float = 0.0  # the same rate, a second
    redos: int = 0
    window_s: float = 0.0


@dataclass(frozen=True)
class ModelSetStatus:
    """One model set a worker holds (restore.engines.modelsets): its networks, and the inboxes whose own
    settings need it (none: the global settings' set)."""

    networks: str = ""  # "GPEN-BFR-512 + ParseNet"
    inboxes: tuple[str, ...] = ()  # as the user writes them: "~/Phone"

    @property
    def text(self) -> str:
        """ "GPEN-BFR-256 (inbox ~/Phone)"."""
        if not self.inboxes:
            return self.networks
        word = "inbox" if len(self.inboxes) == 1 else "inboxes"
        return f"{self.networks} ({word} {', '.join(self.inboxes)})"


@dataclass(frozen=True)
class PhotoStatus:
    """One photo a worker's restorer holds, and how far it is."""

    job_id: int = 0
    name: str = ""  # the file name the user dropped
    # restore.api.Stage: waiting, decoding, detecting, upscaling (tiles), restoring (faces), writing.
    stage: str = ""
    done: int = 0  # faces restored or tiles upscaled so far, of ``total``
    total: int = 0

    @property
    def doing(self) -> str:
        """ "restoring faces 3 of 12"."""
        return stage_words(self.stage, self.done, self.total)

    @property
    def text(self) -> str:
        """ "IMG_0001.jpg: restoring faces 3 of 12"."""
        return f"{self.name}: {self.doing}"

    @property
    def short(self) -> str:
        """``doing`` for a tooltip's few characters: "faces 3 of 12", "tile 2 of 6"."""
        return count_words(self.stage, self.done, self.total) or self.doing


def stage_words(stage: str, done: int, total: int) -> str:
    """A photo's stage in words: "restoring faces 3 of 12", "upscaling, tile 2 of 6"."""
    count = count_words(stage, done, total)
    if count:
        return f"restoring {count}" if stage == "restoring" else f"upscaling, {count}"
    return _STAGE_WORDS.get(stage, stage)


def count_words(stage: str, done: int, total: int) -> str:
    """How far a stage that counts is: "faces 3 of 12", "tile 2 of 6"; "" for one that does not."""
    if stage == "restoring" and total:
        return f"faces {done} of {total}"
    if stage == "upscaling" and total:
        return f"tile {min(done + 1, total)} of {total}"
    return ""


_STAGE_WORDS = {
    "waiting": "waiting its turn",
    "decoding": "reading the file",
    "detecting": "detecting faces",
    "upscaling": "upscaling",
    "restoring": "restoring faces",
    "writing": "writing the result",
}


@dataclass(frozen=True)
class BatchStatus:
    """The batch under way (service.batch, journal.batch): every photo added since the queue was
    last empty, ``ended`` of ``total`` through, and what became of them."""

    total: int = 0
    ended: int = 0
    done: int = 0  # restored or without a face (first runs)
    failed: int = 0
    other: int = 0  # copies of an earlier result, files that went away
    redos: int = 0
    since: float = 0.0  # when its first photo arrived (epoch seconds)


@dataclass(frozen=True)
class WorkerStatus:
    """One restorer subprocess, as the pool sees it."""

    name: str = ""
    device: str = ""
    state: str = ""
    pid: int | None = None
    threads: int | None = None
    in_flight: int = 0
    in_flight_cap: int = 0
    done: int = 0  # every photo it finished this run, failures included
    faces: int = 0
    loaded: str = ""
    # What runs its networks ("PyTorch 2.14.1", "ONNX Runtime 1.32.0, CPU provider"; "": not
    # said), and why that is not what the settings asked for, in one sentence ("" when it is).
    engine: str = ""
    engine_note: str = ""
    # The model sets its restorer holds now, least recently used first.
    model_sets: tuple[ModelSetStatus, ...] = ()
    restarts: int = 0
    memory_budget_mb: int | None = None
    # Resident memory in MB at the end of each stage (highest so far) and "peak".
    rss_mb: dict[str, float] = field(default_factory=dict)
    last_seen_s: float | None = None
    error: str | None = None
    # Where a cluster worker runs ("host (address)"); "" for this machine's.
    node: str = ""
    # Its machine's GPUs as NVML read them there (cluster workers only).
    gpus: tuple[GpuSample, ...] = ()
    # The photos its restorer holds now, as its last heartbeat said.
    photos: tuple[PhotoStatus, ...] = ()


@dataclass(frozen=True)
class NodeStatus:
    """One machine whose workers the service drives: this one, or a cluster node."""

    name: str = ""  # a cluster node's "host (address)"; this machine's host name
    local: bool = False
    # Whether any of its workers runs (or is starting): a node that left has none.
    up: bool = False
    workers: int = 0
    done: int = 0  # photos its workers finished this run, failures included
    in_flight: int = 0
    # A cluster node's GPUs, from its heartbeats; () for this machine (the tray reads its own).
    gpus: tuple[GpuSample, ...] = ()
    # Every worker of it restores on a CPU (`cluster join --cpu` on a machine without a GPU).
    cpu_only: bool = False


# Worker states (WorkerStatus.state) in which a worker runs or is loading.
RUNNING_STATES = ("starting", "idle", "busy", "stopping")


def nodes_of(workers: tuple[WorkerStatus, ...], local_name: str) -> tuple[NodeStatus, ...]:
    """The workers grouped by the machine they run on, this machine first."""
    by_node: dict[str, list[WorkerStatus]] = {}
    for w in sorted(workers, key=lambda w: w.node != ""):
        by_node.setdefault(w.node, []).append(w)
    return tuple(
        NodeStatus(
            name=node or local_name,
            local=not node,
            up=any(w.state in RUNNING_STATES for w in ws),
            workers=len(ws),
            done=sum(w.done for w in ws),
            in_flight=sum(w.in_flight for w in ws),
            gpus=next((w.gpus for w in ws if w.gpus), ()),
            # Device labels: "cpu" here, "<address> CPU" for a node's (cluster.membership).
            cpu_only=all(w.device == "cpu" or w.device.endswith(" CPU") for w in ws),
        )
        for node, ws in by_node.items()
    )


@dataclass(frozen=True)
class ClusterNodeStatus:
    address: str = ""
    gpus: int = 0
    cpus: int = 0
    cpu_offered: bool = False


@dataclass(frozen=True)
class ClusterStatus:
    """The Ray cluster the service uses (cluster.address)."""

    address: str = ""
    connected: bool = False
    problem: str | None = None
    nodes: tuple[ClusterNodeStatus, ...] = ()


@dataclass(frozen=True)
class ModelFileStatus:
    role: str = ""
    name: str | None = None
    file: str = ""
    state: str = ""
    path: str | None = None
    reason: str | None = None
    url: str | None = None
    size_bytes: int | None = None
    # The name of its terms (catalog.licences) when its download waits for the user's yes.
    terms: str | None = None


@dataclass(frozen=True)
class DownloadStatus:
    name: str = ""
    file: str = ""
    done: int = 0
    total: int | None = None
    percent: int | None = None


@dataclass(frozen=True)
class ModelsStatus:
    """The model files the workers need (service.model_gate)."""

    state: str = ""
    files: tuple[ModelFileStatus, ...] = ()
    folders: tuple[str, ...] = ()
    download: DownloadStatus | None = None

    @property
    def held(self) -> bool:
        """Whether the workers are held for their files (the gate's state is waiting, or
        workers_failed: service.model_gate.GateState)."""
        return self.state in MODELS_HELD


# Gate states (service.model_gate.GateState) in which the workers are held for their files.
MODELS_HELD = ("waiting", "workers_failed")


@dataclass(frozen=True)
class ProblemStatus:
    """One of the problems (or notices) ``Status.problem`` (``notice``) joins, with what it is
    about, so that a page that shows that thing in its own way (the model files, the workers)
    does not say it twice: "outbox" (away), "service", "workers", "models", "originals",
    "cluster" or "engine" (a worker's engine is not the one the settings asked for). ``text``
    may be a block of lines (the model files'); ``short`` says it in one short line where its
    maker has a better one than the first line of ``text`` ("" where it has not)."""

    about: str = ""
    text: str = ""
    short: str = ""

    @property
    def line(self) -> str:
        return self.short or short_line(self.text)


# A problem's short line is its first line, up to its first "; " where that line is longer than
# this: with " (see the dashboard)" after it, the model files' fit a tray menu's line.
SHORT_MAX = 44


def short_line(text: str) -> str:
    """``text`` in one line: its first line, up to its first "; " when longer than SHORT_MAX (a
    menu clips what is still too long; a notice shows it whole)."""
    line = text.strip().split("\n", 1)[0]
    if len(line) > SHORT_MAX and "; " in line:
        line = line.split("; ", 1)[0]
    return line


@dataclass(frozen=True)
class ErrorEntry:
    when: str = ""
    file: str = ""
    error: str = ""
    node: str = ""  # where it was last tried (the journal's record of it); "" if nowhere


@dataclass(frozen=True)
class Status:
    version: str = "?"
    pid: int | None = None
    uptime_s: float = 0.0
    # When the service started (seconds since the epoch), taken once: a start time worked out
    # from uptime_s and the clock moves by a second between two readings.
    started_at: float | None = None
    paused: bool = False  # by the user (pause)
    # Why no new photo is taken though the user did not pause (service.standby): "schedule"
    # (outside workers.schedule) or "battery" (workers.pause_on_battery); "" when neither.
    standby: str = ""
    # That in words: "waiting: outside workers.schedule (next start Mon 19:00)", "paused: on
    # battery power"; and the next start alone ("Mon 19:00", only outside the schedule).
    standby_text: str = ""
    standby_until: str = ""
    stopping: bool = False
    problem: str | None = None
    # Not a problem (nothing to fix here, nothing retried): a note for the user.
    notice: str | None = None
    # The same, one by one, each with what it is about.
    problems: tuple[ProblemStatus, ...] = ()
    notices: tuple[ProblemStatus, ...] = ()
    originals_waiting: int = 0
    originals_left: int = 0
    queue: QueueStatus = QueueStatus()
    # queue.done counts every job that ended well, ever; today's photos (finished since local
    # midnight, first runs only) are split into those with restored faces and those without a
    # face (copied through, nothing restored). Redos are counted apart: redos_today.
    done_today: int = 0
    restored_today: int = 0
    no_face_today: int = 0
    faces_today: int = 0
    # Faces that may not look like the same person, in today's results (the photos' newest runs).
    flagged_today: int = 0
    redos_today: int = 0
    settling: int = 0
    # Symlinks, FIFOs, device files and sockets in the inboxes, left alone on purpose (each logged).
    special_files: int = 0
    throughput: Throughput = Throughput()
    # The batch under way; None when nothing waits or runs.
    batch: BatchStatus | None = None
    workers: tuple[WorkerStatus, ...] = ()
    # The workers by machine (``nodes_of``).
    nodes: tuple[NodeStatus, ...] = ()
    # None: cluster mode is off.
    cluster: ClusterStatus | None = None
    # None: the model files are not checked (a substitute restorer brings its own).
    models: ModelsStatus | None = None
    # The newest failures still on the Failed page, one per file, none a later run put right.
    last_errors: tuple[ErrorEntry, ...] = ()
    inboxes: tuple[str, ...] = ()
    # How each inbox is watched now (away, polling, photos waiting for download), in that order.
    inbox_states: tuple[InboxStatus, ...] = ()
    outbox: str = ""
    failed: str = ""
    log_file: str = ""  # where the service logs ("" for one that logs to no file)
    # The dashboard's URL (without its login token), or "" and why not.
    dashboard: str = ""
    dashboard_problem: str | None = None
    # Where the API listens for other machines (api.address; "": nowhere), the SHA-256
    # fingerprint of its certificate for clients to check, or why it does not listen.
    api: str = ""
    api_fingerprint: str = ""
    api_problem: str | None = None
    # The parent must stay free of torch; tests assert on this.
    torch_loaded: bool = False
    # Only cluster mode imports Ray, once it connects (tests/test_cluster.py checks).
    ray_loaded: bool = False
    rss_mb: float | None = None
    rss_peak_mb: float | None = None

    def problem_line(self) -> str | None:
        """The problems in one short line that says where the rest is read, where there is more
        (the tray's menu and tooltip, a desktop notice): "model files missing: no internet
        connection (see the dashboard)"; None when there is none."""
        if not self.problems:
            return short_line(self.problem) if self.problem else None  # a service from before
        first, others = self.problems[0], len(self.problems) - 1
        if not others and first.line == first.text.strip():
            return first.line  # the whole of it: nothing more to read elsewhere
        if self.dashboard:
            where = "the dashboard"
        else:
            where = "the log" if self.log_file else f"`{program.command('status')}`"
        more = f"{others} more problem{'s' if others > 1 else ''}; " if others else ""
        return f"{first.line} ({more}see {where})"

    def to_json(self) -> dict[str, Any]:
        return to_json(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Status:
        return from_json(cls, data)


def to_json(obj: Any) -> dict[str, Any]:
    """A status dataclass as plain JSON types (tuples become lists)."""
    data: dict[str, Any] = dataclasses.asdict(obj)
    return data


def from_json(cls: type[T], data: dict[str, Any]) -> T:
    """Build the dataclass ``cls`` from ``data``, nested dataclasses and tuples of them included."""
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in data:
            kwargs[f.name] = _value(hints[f.name], data[f.name])
    return cls(**kwargs)


def _value(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        # Only "X | None" occurs here: build X.
        (inner,) = [a for a in typing.get_args(hint) if a is not type(None)]
        return _value(inner, value)
    if origin is tuple:
        item = typing.get_args(hint)[0]
        return tuple(_value(item, v) for v in value)
    if origin is dict:
        return dict(value)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return from_json(hint, value)
    if hint is float and isinstance(value, int):
        return float(value)
    return value
