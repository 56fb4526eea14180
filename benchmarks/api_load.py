"""Photos sent through the API against the same photos dropped into the inbox, under load.

    python -m benchmarks.api_load [--photos 500] [--clients 8] [--kb 512] [--rounds 2] [--out DIR]

Each round starts two fresh `gpen-watch run --no-tray` services on folders of their own, with the
stand-in restorer (tests/fake_restorer.py through GPEN_WATCH_RESTORER: the figures are of the
service's own path, not of a model) and a dashboard page open on each (a live Overview stream):

* **drop**: the photos are written beside the inbox and renamed into it at once, as a copy from a
  file manager lands;
* **api**: ``--clients`` threads, each with a token of its own, send them through /api/v1/photos
  (Idempotency-Key each), as many photos each as they share.

Measured: each submit's time (median, 95th percentile), and the drain, from the first photo in to
the last result out. Checked: every photo's result is in the outbox once, under its own name, and
the journal holds one done job per photo (0 lost, 0 duplicated). The rounds alternate the two
modes; the slowdown is the median drain of api over drop's.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import secrets
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.daemon_mode import _folders, _status, _stop, _user_dirs, _wait_ready
from benchmarks.runner import child_env
from gpen_watch.dashboard.api.client import ApiClient
from gpen_watch.dashboard.api.tokens import TokenStore

TESTS = Path(__file__).resolve().parents[1] / "tests"
STAND_IN = "fake_restorer:FakeRestorer"


@dataclass
class Service:
    proc: subprocess.Popen[bytes]
    env: dict[str, str]
    folders: dict[str, Path]
    url: str
    token: str

    @property
    def state(self) -> Path:
        return Path(self.env["XDG_STATE_HOME"]) / "gpen-watch"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.api_load", description=__doc__.splitlines()[0])
    ap.add_argument("--photos", type=int, default=500)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--kb", type=int, default=512, help="each photo's size")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("results") / f"api-load-{time.strftime('%Y%m%d-%H%M')}")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    runs: list[dict[str, Any]] = []
    for r in range(args.rounds):
        for mode in ("drop", "api"):
            with tempfile.TemporaryDirectory(prefix=f"gpen-bench-api-{mode}-") as tmp:
                run = measure(Path(tmp), mode, args)
            run["round"] = r
            runs.append(run)
            print(
                f"round {r} {mode}: drain {run['drain_s']:.1f} s, lost {run['lost']}, duplicated {run['duplicated']}"
            )
    result = summary(runs, args)
    (args.out / "api_load.json").write_text(json.dumps({"summary": result, "runs": runs}, indent=1))
    print(json.dumps(result, indent=1))
    return 0 if result["lost"] == 0 and result["duplicated"] == 0 else 1


def start(root: Path) -> Service:
    folders = _folders(root)
    env = child_env(_user_dirs(folders["home"]))
    env["PYTHONPATH"] = f"{TESTS}{os.pathsep}{env['PYTHONPATH']}"
    env["GPEN_WATCH_RESTORER"] = STAND_IN
    cmd = [
        sys.executable, "-m", "gpen_watch", "run", "--no-tray",
        "--config", str(folders["home"] / "defaults.toml"),
        "--inbox", str(folders["inbox"]), "--outbox", str(folders["outbox"]),
        "--set", "watch.settle_seconds=0.2", "--set", "dashboard.port=0",
    ]  # fmt: skip
    log = (root / "daemon.log").open("w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()
    _wait_ready(proc, env, root)
    deadline = time.monotonic() + 30
    url = ""
    while not url and time.monotonic() < deadline:
        url = str((_status(env) or {}).get("dashboard") or "")
        time.sleep(0.2)
    token = (Path(env["XDG_STATE_HOME"]) / "gpen-watch" / "dashboard.token").read_text().strip()
    return Service(proc, env, folders, url, token)


def page_open(s: Service, stop: threading.Event) -> None:
    """A dashboard page left open: the Overview's live stream, read until the run ends."""
    port = int(s.url.rsplit(":", 1)[1].strip("/"))
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request(
        "GET", "/live/overview", headers={"Host": f"127.0.0.1:{port}", "Authorization": f"Bearer {s.token}"}
    )
    r = conn.getresponse()
    while not stop.is_set() and r.readline():
        pass
    conn.close()


def photos(folder: Path, n: int, kb: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    made = []
    for i in range(n):
        p = folder / f"IMG_{i:05d}.jpg"
        p.write_bytes(b"\xff\xd8" + secrets.token_bytes(kb * 1024 - 2))  # each its own content
        made.append(p)
    return made


def measure(root: Path, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    s = start(root)
    stop = threading.Event()
    page = threading.Thread(target=page_open, args=(s, stop), daemon=True)
    page.start()
    try:
        staged = photos(s.folders["staging"], args.photos, args.kb)
        submit_s: list[float] = []
        t0 = time.perf_counter()
        if mode == "drop":
            for p in staged:
                os.rename(p, s.folders["inbox"] / p.name)
        else:
            submit_s = send_all(s, staged, args.clients)
        sent_s = time.perf_counter() - t0
        drained = wait_drained(s, staged, t0)
        settled(s)
        lost, duplicated = check(s, staged)
    finally:
        stop.set()
        _stop(s.proc)
    run: dict[str, Any] = {"mode": mode, "photos": args.photos, "kb": args.kb, "in_s": round(sent_s, 2)}
    run.update(drain_s=round(drained, 2), lost=lost, duplicated=duplicated)
    if submit_s:
        run.update(
            submit_median_s=round(statistics.median(submit_s), 4),
            submit_p95_s=round(statistics.quantiles(submit_s, n=20)[18], 4),
        )
    return run


def send_all(s: Service, staged: list[Path], clients: int) -> list[float]:
    store = TokenStore(s.state / "api-tokens.json")
    tokens = [
        store.create(f"client-{i}-{secrets.token_hex(2)}", ("submit", "read"))[1] for i in range(clients)
    ]
    times: list[float] = []
    lock = threading.Lock()

    def client(i: int) -> None:
        api = ApiClient(s.url, tokens[i])
        for p in staged[i::clients]:
            t = time.perf_counter()
            api.submit(p, key=f"load-{p.name}", batch=f"load-{i}")
            with lock:
                times.append(time.perf_counter() - t)

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(client, range(clients)))
    return times


def wait_drained(s: Service, staged: list[Path], t0: float, timeout: float = 1800.0) -> float:
    wanted = {p.name for p in staged}
    while time.perf_counter() - t0 < timeout:
        if wanted <= {p.name for p in s.folders["outbox"].iterdir()}:
            return time.perf_counter() - t0
        if s.proc.poll() is not None:
            raise RuntimeError(f"the service exited ({s.proc.returncode}) during the run")
        time.sleep(0.05)
    raise RuntimeError(f"not drained after {timeout:g} s")


def settled(s: Service, timeout: float = 120.0) -> None:
    """Until nothing is queued or running (the last result's commit has ended: its temp name gone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        q = (_status(s.env) or {}).get("queue", {})
        if q and q.get("queued") == 0 and q.get("running") == 0:
            return
        time.sleep(0.2)
    raise RuntimeError(f"the queue did not empty within {timeout:g} s")


def check(s: Service, staged: list[Path]) -> tuple[int, int]:
    """(photos lost, photos duplicated): results missing or differing, extra results or jobs."""
    out = {p.name for p in s.folders["outbox"].iterdir() if not p.name.startswith(".")}
    originals = s.folders["outbox"].parent / "originals"
    lost = sum(
        1
        for p in staged
        if p.name not in out
        or (s.folders["outbox"] / p.name).read_bytes() != (originals / p.name).read_bytes()
    )
    with sqlite3.connect(f"file:{s.state / 'journal.sqlite3'}?mode=ro", uri=True) as conn:
        jobs = conn.execute("SELECT COUNT(*), SUM(state = 'done') FROM jobs").fetchone()
    duplicated = (len(out) - len(staged)) + (int(jobs[0]) - len(staged))
    return lost, duplicated


def summary(runs: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    drop = [r["drain_s"] for r in runs if r["mode"] == "drop"]
    api = [r["drain_s"] for r in runs if r["mode"] == "api"]
    submits = [r["submit_median_s"] for r in runs if r["mode"] == "api"]
    return {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "cores": os.cpu_count(),
        "cpu": _cpu_name(),
        "photos": args.photos,
        "clients": args.clients,
        "kb": args.kb,
        "drain_drop_s": drop,
        "drain_api_s": api,
        "slowdown_percent": round(100 * (statistics.median(api) / statistics.median(drop) - 1), 1),
        "submit_median_s": submits,
        "submit_p95_s": [r["submit_p95_s"] for r in runs if r["mode"] == "api"],
        "lost": sum(r["lost"] for r in runs),
        "duplicated": sum(r["duplicated"] for r in runs),
    }


def _cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "?"


if __name__ == "__main__":
    sys.exit(main())
