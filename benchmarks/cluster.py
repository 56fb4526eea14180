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
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import subprocess
import sys
import tempfile
import time
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


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_mode(
    c: Any, root: Path, photos: list[Path], *, remote: bool, local: bool, work: float
) -> tuple[float, float, float]:
    """Seconds from dropping the photos until every one is done; then the service's resident
    memory (MB) and its CPU use while idle (% of a core over IDLE_S)."""
    from gpen_watch.service import control

    run = root / f"run-{time.monotonic_ns()}"
    inbox, outbox = run / "inbox", run / "outbox"
    inbox.mkdir(parents=True)
    env = dict(c.env)
    for var, sub in (("XDG_CONFIG_HOME", "cfg"), ("XDG_STATE_HOME", "state"), ("XDG_CACHE_HOME", "cache")):
        env[var] = os.environ[var] = str(run / sub)
    runtime = Path(tempfile.mkdtemp(prefix="gwrt-", dir="/tmp"))
    env["XDG_RUNTIME_DIR"] = os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    env["GPEN_WATCH_RESTORER"] = "fake_restorer:FakeRestorer"
    env["FAKE_SLOW"] = str(work)
    sets = ["watch.settle_seconds=0.2", "workers.images_in_flight=2"]
    if remote:
        sets += [f"cluster.address={c.address}", f"cluster.token_file={c.token}"]
        sets += [f"cluster.local_workers={'true' if local else 'false'}"]
    cmd = ["ip", "netns", "exec", c.head_ns, "taskset", "-c", "0", sys.executable, "-m", "gpen_watch", "run"]
    cmd += ["--no-tray", "--inbox", str(inbox), "--outbox", str(outbox)]
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
        t0 = time.monotonic()
        for p in photos:
            os.replace(staged / p.name, inbox / p.name)
        while True:
            st = control.request("status", timeout=5)
            if st["queue"]["done"] >= len(photos):
                elapsed = time.monotonic() - t0
                before = cpu_seconds(proc.pid)
                time.sleep(IDLE_S)
                idle = (cpu_seconds(proc.pid) - before) / IDLE_S * 100
                rss = float(control.request("status", timeout=5)["rss_mb"])
                return elapsed, rss, idle
            assert time.monotonic() - t0 < 120, f"not done: {st['queue']}"
            time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.cluster", description=__doc__.splitlines()[0])
    p.add_argument("--photos", type=int, default=24)
    p.add_argument("--work", type=float, default=0.5, help="seconds of stand-in GPU work per photo")
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    # A timeout's SIGTERM must still take the namespaces and their processes down (finally).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    netns = _netns()
    reason = netns.skip_reason()
    if reason:
        sys.exit(f"benchmarks.cluster: {reason}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        src = root / "photo.jpg"
        make_jpeg(src)
        (root / "cluster").mkdir()
        # The node's actors take their environment from `cluster join`, made from this one.
        os.environ["FAKE_SLOW"] = str(args.work)
        with netns.cluster(root / "cluster") as c:
            pin(c, c.head_ns, 0)
            pin(c, c.node_ns, 1)
            for work, label in ((0.0, "copy only"), (args.work, f"{args.work:g} s of work")):
                prefix = "slow" if work else "p"
                photos = []
                for i in range(args.photos):
                    dst = root / f"{prefix}{i:03d}.jpg"
                    dst.write_bytes(src.read_bytes() + b"%d" % i)  # unique: the journal drops duplicates
                    photos.append(dst)
                modes = {
                    "local only": (False, True),
                    "remote only": (True, False),
                    "local + remote": (True, True),
                }
                for name, (remote, local) in modes.items():
                    runs = [
                        run_mode(c, root, photos, remote=remote, local=local, work=work)
                        for _ in range(args.rounds)
                    ]
                    times = [r[0] for r in runs]
                    best = min(times)
                    _, rss, idle = runs[-1]
                    print(
                        f"{label:>14} | {name:<14} | {len(photos) / best:6.2f} images/s | "
                        f"{best / len(photos) * 1000:7.1f} ms a photo | rounds {', '.join(f'{t:.2f}' for t in times)} s"
                        f" | service {rss:.0f} MB, idle CPU {idle:.1f} %",
                        flush=True,
                    )
                for p_ in photos:
                    p_.unlink()


if __name__ == "__main__":
    main()
