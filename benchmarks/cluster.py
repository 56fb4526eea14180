"""``python -m benchmarks.cluster``: the service with local workers only vs local plus one remote node.

Needs root, iproute2 and Ray: it builds the same two-namespace cluster as tests/test_cluster.py
(tests/netns.py), pins the head's namespace (Ray head and the service) to core 0 and the node's
to core 1, and drops the same photos into the service's inbox for each mode, timing from the drop
until the last photo is done.

The workers run the stand-in restorer (tests/fake_restorer.py): with ``--work S`` each photo
sleeps S seconds in the worker, standing for the GPU's time without taking a core (this machine
has two, shared); with ``--work 0`` it only copies the photo, so the difference between a remote
and a local worker is the Ray path's own cost per photo (bytes there and back, the actor call,
the result's write on the head).

``--engine real`` runs the real engine instead, on both nodes: GPEN-BFR-256, RetinaFace-R50 and
ParseNet with random weights in the released files' layouts (``benchmarks.models``), real photos
(``benchmarks.photos``: the astronaut, Grace Hopper, the Solvay group where ../shared/data has it)
scaled to ``--megapixels``, and the photo set's known faces (``benchmarks.factory``: random
detector weights find none, so the detector runs for its cost and the faces come from the table).
Every worker has one core to itself: the local one on core 0 beside the service, the node's on core 1.

The service is one process and the Ray driver another (the cluster bridge, its child); both
resident sizes are printed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.payload import make_jpeg

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"


def _netns() -> Any:
    sys.path.insert(0, str(TESTS))
    return importlib.import_module("netns")


def pin(c: Any, ns: str, core: int) -> None:
    for pid in c.pids(ns):
        subprocess.run(["taskset", "-a", "-cp", str(core), str(pid)], capture_output=True, check=False)


IDLE_S = 5.0
TIMEOUT_S = 1200.0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def bridge_pids(service: int, workers: set[int]) -> list[int]:
    """The service's children other than its restorer workers and multiprocessing's resource
    tracker: the cluster bridge (none without one)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in workers:
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == service and b"resource_tracker" not in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


@dataclass(frozen=True)
class Mode:
    """What a service run gets beyond the defaults: its restorer and settings."""

    env: dict[str, str]
    sets: tuple[str, ...] = ()
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class Run:
    elapsed: float  # seconds from the drop until the last photo was done
    rss: float  # the service's resident memory afterwards (MB)
    idle: float  # its CPU use while idle (% of a core over IDLE_S)
    bridge_mb: float
    bridge_idle: float
    # CPU seconds between the drop and the last photo done: the restorer workers' processes (the
    # node's actor included), and everything else in both namespaces (the service, the bridge,
    # Ray's processes on the head and the node). CPU time, unlike wall time, hardly depends on
    # what else the machine runs.
    worker_cpu: float
    other_cpu: float
    worker_faults: int  # minor page faults of the workers' processes meanwhile


def _cpu_of(pids: list[int]) -> dict[int, float]:
    found = {}
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError):
            found[pid] = cpu_seconds(pid)
    return found


def minor_faults(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])


def _faults_of(pids: set[int]) -> dict[int, int]:
    found = {}
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError):
            found[pid] = minor_faults(pid)
    return found


def run_mode(c: Any, root: Path, photos: list[Path], *, remote: bool, local: bool, mode: Mode) -> Run:
    """One service run over ``photos``, timed and its CPU counted (``Run``)."""
    from gpen_watch.service import control

    run = root / f"run-{time.monotonic_ns()}"
    inbox, outbox = run / "inbox", run / "outbox"
    inbox.mkdir(parents=True)
    env = dict(c.env)
    for var, sub in (("XDG_CONFIG_HOME", "cfg"), ("XDG_STATE_HOME", "state"), ("XDG_CACHE_HOME", "cache")):
        env[var] = os.environ[var] = str(run / sub)
    runtime = Path(tempfile.mkdtemp(prefix="gwrt-", dir="/tmp"))
    env["XDG_RUNTIME_DIR"] = os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    env.update(mode.env)
    sets = ["watch.settle_seconds=0.2", "workers.images_in_flight=2", *mode.sets]
    if remote:
        sets += [f"cluster.address={c.address}", f"cluster.token_file={c.token}"]
        sets += [f"cluster.local_workers={'true' if local else 'false'}"]
    cmd = ["ip", "netns", "exec", c.head_ns, "taskset", "-c", "0", sys.executable, "-m", "gpen_watch", "run"]
    cmd += ["--no-tray", "--inbox", str(inbox), "--outbox", str(outbox), *mode.args]
    for s in sets:
        cmd += ["--set", s]
    want = (1 if local else 0) + (1 if remote else 0)
    with open(run / "stderr.txt", "wb") as err:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert time.monotonic() < deadline, (
                f"service not ready: {(run / 'stderr.txt').read_text()[-2000:]}"
            )
            try:
                st = control.request("status", timeout=5)
                ready = [w for w in st["workers"] if w["state"] in ("idle", "busy")]
                if len(ready) >= want:
                    break
            except control.ControlError:
                pass
            time.sleep(0.2)
        staged = run / "staged"
        staged.mkdir()
        for p in photos:
            (staged / p.name).write_bytes(p.read_bytes())
        cpu0 = _cpu_of(c.pids(c.head_ns) + c.pids(c.node_ns))
        faults0 = _faults_of({int(w["pid"]) for w in st["workers"] if w.get("pid")})
        t0 = time.monotonic()
        for p in photos:
            os.replace(staged / p.name, inbox / p.name)
        while True:
            st = control.request("status", timeout=5)
            if st["queue"]["done"] >= len(photos):
                elapsed = time.monotonic() - t0
                cpu1 = _cpu_of(c.pids(c.head_ns) + c.pids(c.node_ns))
                # Local workers' pids, and the node's actor's (the namespaces share one pid space).
                workers = {int(w["pid"]) for w in st["workers"] if w.get("pid")}
                used = {pid: t - cpu0.get(pid, 0.0) for pid, t in cpu1.items()}
                worker_cpu = sum(t for pid, t in used.items() if pid in workers)
                other_cpu = sum(t for pid, t in used.items() if pid not in workers)
                faults = sum(n - faults0.get(pid, 0) for pid, n in _faults_of(workers).items())
                bridge = bridge_pids(proc.pid, workers)
                before = cpu_seconds(proc.pid), sum(cpu_seconds(p) for p in bridge)
                time.sleep(IDLE_S)
                idle = (cpu_seconds(proc.pid) - before[0]) / IDLE_S * 100
                bridge_idle = (sum(cpu_seconds(p) for p in bridge) - before[1]) / IDLE_S * 100
                st = control.request("status", timeout=5)
                threads = ", ".join(f"{w['device']}: {w['threads']}" for w in st["workers"])
                print(f"  workers' threads: {threads}", flush=True)
                bridge_mb = sum(rss_mb(p) for p in bridge)
                return Run(
                    elapsed, float(st["rss_mb"]), idle, bridge_mb, bridge_idle, worker_cpu, other_cpu, faults
                )
            assert time.monotonic() - t0 < TIMEOUT_S, f"not done: {st['queue']}"
            time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.cluster", description=__doc__.splitlines()[0])
    p.add_argument("--photos", type=int, default=24)
    p.add_argument("--work", type=float, default=0.5, help="seconds of stand-in GPU work per photo")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--engine", choices=("stand-in", "real"), default="stand-in")
    p.add_argument("--modes", default="local,remote,both", help="which to run, of local,remote,both")
    p.add_argument("--megapixels", type=float, default=1.0, help="photo size with --engine real")
    p.add_argument("--group", action="store_true", help="with --engine real: the Solvay group photo too")
    args = p.parse_args()
    # A timeout's SIGTERM must still take the namespaces and their processes down (finally).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    netns = _netns()
    reason = netns.skip_reason()
    if reason:
        sys.exit(f"benchmarks.cluster: {reason}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cases = _real_cases(root, args) if args.engine == "real" else _stand_in_cases(root, args)
        (root / "cluster").mkdir()
        # The node's actors take their environment from `cluster join`, made from this one.
        for case in cases:
            os.environ.update({k: v for k, v in case[2].env.items() if k != "GPEN_WATCH_RESTORER"})
        with netns.cluster(root / "cluster") as c:
            pin(c, c.head_ns, 0)
            pin(c, c.node_ns, 1)
            for label, photos, mode in cases:
                _measure(c, root, label, photos, mode, args.rounds, args.modes.split(","))


# --modes name: (what the table says, the remote node used, local workers used)
MODES = {
    "local": ("local only", False, True),
    "remote": ("remote only", True, False),
    "both": ("local + remote", True, True),
}


def _measure(
    c: Any, root: Path, label: str, photos: list[Path], mode: Mode, rounds: int, only: list[str]
) -> None:
    for key, (name, remote, local) in MODES.items():
        if key not in only:
            continue
        runs = [run_mode(c, root, photos, remote=remote, local=local, mode=mode) for _ in range(rounds)]
        times = [r.elapsed for r in runs]
        best = min(times)
        last = runs[-1]
        n = len(photos)
        print(
            f"{label:>14} | {name:<14} | {n / best:6.2f} images/s | "
            f"{best / n * 1000:7.1f} ms a photo | rounds {', '.join(f'{t:.2f}' for t in times)} s"
            f" | CPU a photo: workers {min(r.worker_cpu for r in runs) / n * 1000:.0f} ms, the rest"
            f" {min(r.other_cpu for r in runs) / n * 1000:.0f} ms, workers' page faults"
            f" {min(r.worker_faults for r in runs) // n}"
            f" | service {last.rss:.0f} MB, idle CPU {last.idle:.1f} % | bridge {last.bridge_mb:.0f} MB,"
            f" idle CPU {last.bridge_idle:.1f} %",
            flush=True,
        )


def _stand_in_cases(root: Path, args: argparse.Namespace) -> list[tuple[str, list[Path], Mode]]:
    src = root / "photo.jpg"
    make_jpeg(src)
    cases = []
    for work, label in ((0.0, "copy only"), (args.work, f"{args.work:g} s of work")):
        prefix = "slow" if work else "p"
        folder = root / f"photos-{prefix}"
        folder.mkdir()
        photos = []
        for i in range(args.photos):
            dst = folder / f"{prefix}{i:03d}.jpg"
            dst.write_bytes(src.read_bytes() + b"%d" % i)  # unique: the journal drops duplicates
            photos.append(dst)
        env = {"GPEN_WATCH_RESTORER": "fake_restorer:FakeRestorer", "FAKE_SLOW": str(work)}
        cases.append((label, photos, Mode(env)))
    return cases


def _real_cases(root: Path, args: argparse.Namespace) -> list[tuple[str, list[Path], Mode]]:
    from benchmarks.factory import FACTORY, LOG_ENV, PHOTOS_ENV
    from benchmarks.models import write_models
    from benchmarks.photos import build_photo_set

    models = write_models(root / "models", size=256, parse=True)
    # The group photo (29 faces) only when asked: with a handful of photos and two workers, which
    # worker draws it would decide the figure more than the workers' speed does.
    group = None if args.group else root / "no-group-photo"
    photo_set = build_photo_set(root / "photos", args.photos, args.megapixels, solvay=group)
    for note in photo_set.notes if args.group else ():
        print(f"note: {note}", flush=True)
    set_file = root / "photos.json"
    photo_set.save(set_file)
    (root / "measure").mkdir()
    env = {"GPEN_WATCH_RESTORER": FACTORY, PHOTOS_ENV: str(set_file), LOG_ENV: str(root / "measure")}
    engine = (
        "--model", models.gpen, "--model-dir", str(models.model_dir), "--device", "cpu",
    )  # fmt: skip
    sets = (f"restore.detector={models.detector}", "restore.use_parse=true")
    faces = photo_set.total_faces
    label = f"real {args.megapixels:g} MP"
    print(
        f"{label}: {len(photo_set.photos)} photos, {faces} faces, GPEN-BFR-256 + R50 + ParseNet", flush=True
    )
    return [(label, [p.path for p in photo_set.photos], Mode(env, sets, engine))]


if __name__ == "__main__":
    main()
