"""The Ray node that `gpen-watch cluster head/join` started on this machine, so that `leave`
stops that node and nothing else (`ray stop` would end every Ray process of the user, a Ray
cluster they run for other work included).

After `ray start` returns, the processes it left running are the new Ray processes (``ray_processes``
before and after) that name its session folder on their command line: the raylet, and for a head
the GCS, monitor and dashboard. Their pids and start times go into ``ray-node.json`` in
gpen-watch's state folder; `leave` stops those that still run with the same start time (a reused
pid is never someone else's process to us) and everything below them (the raylet's workers and
agents). Linux only: elsewhere there is no /proc to tell processes apart, and `leave` says so.

A keeper (`join --stay`, ``stay``) records itself in ``ray-keeper.json``: `leave` stops it first
(it then stops its node), so that it does not start the node again behind `leave`'s back.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from gpen_watch import platform as platforms
from gpen_watch.platform import paths

RECORD_NAME = "ray-node.json"
KEEPER_NAME = "ray-keeper.json"
# How long stopped Ray processes get to exit before they are killed.
STOP_WAIT_S = 10.0
_PROC = Path("/proc")


@dataclass(frozen=True)
class RayProcess:
    pid: int
    started: int  # clock ticks after boot (/proc/PID/stat field 22): tells a reused pid apart
    command: str  # its first words, for the messages
    # What it belongs to: HEAD or NODE, and the cluster's address (the head's host:port); empty
    # in a record written before these were kept.
    role: str = ""
    address: str = ""


HEAD, NODE = "head", "node"


@dataclass(frozen=True)
class Running:
    """The Ray node (or keeper) gpen-watch started on this machine that still runs."""

    role: str  # HEAD or NODE, "" when an older record does not say
    address: str  # the cluster's address, "" when an older record does not say
    kept: bool  # a `--stay` keeper runs it


def supported() -> bool:
    return platforms.current().procfs and _PROC.is_dir()


def record_path() -> Path:
    return paths.state_dir() / RECORD_NAME


def ray_processes() -> dict[int, RayProcess]:
    """This user's processes that belong to Ray, by pid."""
    found: dict[int, RayProcess] = {}
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            if entry.stat().st_uid != os.getuid():
                continue
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            text = " ".join(a.decode(errors="replace") for a in argv if a)
            if "/ray/" in text or text.startswith("ray::"):
                found[int(entry.name)] = RayProcess(int(entry.name), _start_time(entry.name), text[:300])
    return found


def remember(
    before: dict[int, RayProcess], temp_dir: Path | None, role: str = "", address: str = ""
) -> list[RayProcess]:
    """Record the Ray processes that `ray start` left running since ``before`` (a ``role`` node of
    the cluster at ``address``); returns them."""
    session = _session_dir(temp_dir)
    new = [
        RayProcess(p.pid, p.started, p.command, role, address)
        for pid, p in ray_processes().items()
        if pid not in before and (session is None or str(session) in p.command)
    ]
    kept = [p for p in recorded() if _same(p)]  # `head` and `join` both, on one machine
    _write(kept + new)
    return new


def recorded() -> list[RayProcess]:
    try:
        data = json.loads(record_path().read_text(encoding="utf-8"))
        return [_process(d) for d in data]
    except FileNotFoundError:
        return []
    except (OSError, ValueError, KeyError, TypeError):
        return []  # a damaged record: nothing we can trust to stop


def _process(d: dict[str, object]) -> RayProcess:
    return RayProcess(
        int(str(d["pid"])),
        int(str(d["started"])),
        str(d["command"]),
        str(d.get("role", "")),
        str(d.get("address", "")),
    )


def running() -> Running | None:
    """The node gpen-watch started here that still runs (its keeper counts, even while it waits
    for its head); None when there is none or there is no /proc to tell."""
    if not supported():
        return None
    keeper = _keeper()
    if keeper is not None and _runs(keeper):
        return Running(keeper.role, keeper.address, kept=True)
    procs = recorded()
    dead_head = _head_is_dead(procs)
    # A head's node outranks a node joined beside it; a head whose GCS is gone is not running.
    for role in (HEAD, NODE, ""):
        for p in procs:
            if p.role == role and _runs(p) and not (role == HEAD and dead_head):
                return Running(p.role, p.address, kept=False)
    return None


def _head_is_dead(procs: list[RayProcess]) -> bool:
    """Whether the record names a head's GCS and it no longer runs (a record without one cannot
    tell: its head counts as alive while any of its processes is)."""
    gcs = [p for p in procs if p.role == HEAD and GCS in p.command]
    return bool(gcs) and not any(_runs(p) for p in gcs)


# The head's own daemon: without it the head is gone for good (Ray does not start it again).
GCS = "gcs_server"


def stop_dead_head() -> int:
    """Stop what is left of a recorded head whose GCS has died (the monitor, log monitor and
    dashboard outlive it, about 80 MB each, and Ray never starts the GCS again); how many
    processes were still running. A node recorded beside it is left alone."""
    if not supported():
        return 0
    keeper = _keeper()
    if keeper is not None and _runs(keeper):
        return 0  # a kept head: its keeper stops what is left and starts it again
    procs = recorded()
    if not _head_is_dead(procs):
        return 0
    left = [p for p in procs if p.role == HEAD and _runs(p)]
    targets: set[int] = set()
    for p in left:
        targets |= _descendants(p.pid)
    _stop(targets, kill_only=True)  # orphans of a dead node: nothing of theirs to save
    _write([p for p in procs if p.role != HEAD and _same(p)])
    return len(left)


def _write(procs: list[RayProcess]) -> None:
    path = record_path()
    if not procs:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps([asdict(p) for p in procs], indent=1), encoding="utf-8")
    tmp.replace(path)


def stop_recorded() -> int:
    """Stop the recorded node's processes and all below them; how many were still running."""
    tops = [p for p in recorded() if _same(p)]
    targets = set()
    for p in tops:
        targets |= _descendants(p.pid)
    _stop(targets)
    with contextlib.suppress(FileNotFoundError):
        record_path().unlink()
    return len(tops)


def tree(pid: int) -> list[RayProcess]:
    """``pid`` and every process below it now (a keeper follows its node's this way)."""
    found = []
    for p in _descendants(pid):
        with contextlib.suppress(OSError, IndexError, ValueError):
            found.append(RayProcess(p, _start_time(str(p)), ""))
    return found


def kill_leftovers(procs: list[RayProcess]) -> None:
    """SIGKILL those of ``procs`` that still run (the same start time: not a reused pid), once
    their node has stopped: nothing of theirs is left to save."""
    if procs:  # (none but on Linux, the only place SIGKILL is looked up)
        _stop({p.pid for p in procs if _same(p)}, kill_only=True)


def _stop(targets: set[int], kill_only: bool = False) -> None:
    for sig in (signal.SIGKILL,) if kill_only else (signal.SIGTERM, signal.SIGKILL):
        for pid in targets:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + STOP_WAIT_S
        while time.monotonic() < deadline and any(_alive(pid) for pid in targets):
            time.sleep(0.1)
        targets = {pid for pid in targets if _alive(pid)}
        if not targets:
            break


def remember_keeper(role: str = "", address: str = "") -> None:
    """Record this process as the keeper of a ``role`` node of the cluster at ``address`` (Linux
    only, as the rest of the record)."""
    if not supported():
        return
    me = RayProcess(os.getpid(), _start_time(str(os.getpid())), "gpen-watch cluster --stay", role, address)
    path = paths.state_dir() / KEEPER_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(asdict(me)), encoding="utf-8")
    tmp.replace(path)


def forget_keeper() -> None:
    """Remove the keeper's record if it is this process's."""
    found = _keeper()
    if found is not None and found.pid == os.getpid():
        with contextlib.suppress(FileNotFoundError):
            (paths.state_dir() / KEEPER_NAME).unlink()


def stop_keeper(wait_s: float = 4 * STOP_WAIT_S) -> bool:
    """Stop the recorded keeper, if it runs (it stops its node on the way out); whether one did."""
    found = _keeper()
    if found is None or not _same(found):
        with contextlib.suppress(FileNotFoundError):
            (paths.state_dir() / KEEPER_NAME).unlink()
        return False
    for sig, wait in ((signal.SIGTERM, wait_s), (signal.SIGKILL, STOP_WAIT_S)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(found.pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and _alive(found.pid):
            time.sleep(0.1)
        if not _alive(found.pid):
            break
    with contextlib.suppress(FileNotFoundError):
        (paths.state_dir() / KEEPER_NAME).unlink()
    return True


def _keeper() -> RayProcess | None:
    try:
        return _process(json.loads((paths.state_dir() / KEEPER_NAME).read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _session_dir(temp_dir: Path | None) -> Path | None:
    # Ray's own default on Linux (ray._common.utils.get_default_ray_temp_dir).
    system = os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp"
    latest = (temp_dir or Path(system) / "ray") / "session_latest"
    try:
        return latest.resolve(strict=True)
    except OSError:
        return None


def _start_time(pid: str) -> int:
    return int((_PROC / pid / "stat").read_text().rsplit(")", 1)[1].split()[19])


def _same(p: RayProcess) -> bool:
    try:
        return _start_time(str(p.pid)) == p.started
    except (OSError, IndexError, ValueError):
        return False


def _runs(p: RayProcess) -> bool:
    """The recorded process, not a reused pid, and not a zombie: Ray's daemons are children of
    init once `ray start` has exited, and a killed one may wait there unreaped for a while."""
    return _same(p) and _alive(p.pid)


def _alive(pid: int) -> bool:
    try:
        state = (_PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie has exited; its parent (init, for Ray's daemons) reaps it


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in _PROC.iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        p = todo.pop()
        if p not in found:
            found.add(p)
            todo += children.get(p, [])
    return found
