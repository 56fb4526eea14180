"""The dashboard's costs, measured side by side on one machine in one run.

    python -m benchmarks.dashboard [--rows 100000] [--idle 20] [--out results/dashboard-<date>]

Three real ``gpen-watch run --no-tray`` services on the same journal of ``--rows`` finished photos
(tiny random-weight models; the figures are about the service, not the model):

* dashboard off: the parent's idle CPU and resident memory, as before the dashboard existed;
* dashboard on, no browser: the same figures (target: idle CPU unchanged, memory within 25 MB);
* dashboard on, one live page open (a Server-Sent Events stream), then after a few hundred requests.

Then, on the dashboard with ``--rows`` journal rows, each page and API answer is timed over
``--repeat`` requests on one kept-alive connection (target: under 0.2 s each), including a page
deep in the results and the activity.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.daemon_mode import _folders, _status, _stop, _user_dirs, _wait_ready, run_command
from benchmarks.models import write_models
from benchmarks.runner import child_env
from benchmarks.service import cpu_seconds, rss_mb
from gpen_watch.journal import Journal

COOKIE = "gpen_watch_session"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.dashboard", description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000, help="finished photos in the journal")
    ap.add_argument("--idle", type=float, default=20.0, help="seconds of each idle sample")
    ap.add_argument("--repeat", type=int, default=20, help="requests per URL")
    ap.add_argument("--out", type=Path, default=Path("results") / f"dashboard-{time.strftime('%Y%m%d-%H%M')}")
    args = ap.parse_args(argv)
    if not Path("/proc/self/stat").exists():
        print("this benchmark reads /proc: Linux only", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gpen-bench-dashboard-") as tmp:
        result = _run(Path(tmp), args)
    (args.out / "dashboard.json").write_text(json.dumps(result, indent=2))
    _print(result)
    print(f"\nwrote {args.out / 'dashboard.json'}")
    return 0


def _run(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    models = write_models(root / "models", tiny=True)
    folders = _folders(root)
    env = child_env(_user_dirs(folders["home"]))
    journal = Path(env["XDG_STATE_HOME"]) / "gpen-watch" / "journal.sqlite3"
    t0 = time.perf_counter()
    fill_journal(journal, args.rows, folders["inbox"], folders["outbox"])
    fill_s = time.perf_counter() - t0
    base = [
        *run_command(folders, models.gpen, models.model_dir),
        "--device",
        "cpu",
        "--set",
        f"restore.detector={models.detector}",
        "--set",
        "restore.use_parse=false",
        "--set",
        "dashboard.port=0",
    ]
    off = _idle(root, [*base, "--set", "dashboard.enabled=false"], env, args.idle)
    on = _idle(root, base, env, args.idle, measure=lambda s: _pages(s, env, args.repeat, args.idle))
    return {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "cores": os.cpu_count(),
        "cpu": _cpu_name(),
        "rows": args.rows,
        "fill_journal_s": round(fill_s, 1),
        "dashboard_off": off,
        "dashboard_on": on,
        "rss_added_mb": round(on["rss_idle_mb"] - off["rss_idle_mb"], 1),
    }


def fill_journal(path: Path, rows: int, inbox: Path, outbox: Path) -> None:
    """``rows`` finished jobs (one in twenty set aside) with three events each, as the service
    would have written them over months: the journal's own schema, filled in bulk."""
    Journal.open(path).close()
    rng = random.Random(1)
    now = time.time()
    conn = sqlite3.connect(path)
    with conn:
        jobs = []
        events = []
        for i in range(1, rows + 1):
            finished = now - (rows - i) * 30.0
            failed = i % 20 == 0
            name = f"IMG_{i:06d}.jpg"
            jobs.append(
                (
                    i,
                    str(inbox / name),
                    str(inbox),
                    name,
                    rng.randint(1 << 20, 8 << 20),
                    finished - 60,
                    f"{i:064x}",
                    "failed" if failed else "done",
                    1,
                    finished - 60,
                    finished - 5,
                    finished,
                    None if failed else str(outbox / name),
                    None if failed else rng.randint(0, 6),
                    "{}",
                    "not an image (the file ends before its first frame)" if failed else None,
                    "[]",
                    "set-aside" if failed else "archived",
                    str(outbox.parent / ("failed" if failed else "originals") / name),
                )
            )
            events += [
                (i, finished - 60, "added", None),
                (i, finished - 5, "claimed", "cpu#0"),
                (i, finished, "failed" if failed else "finished", "cpu#0"),
            ]
        conn.executemany(
            "INSERT INTO jobs (id, source, inbox, rel, size, mtime, sha256, state, attempts, created,"
            " started, finished, output, faces, timings, error, notes, original, original_path) VALUES"
            " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            jobs,
        )
        conn.executemany("INSERT INTO events (job_id, time, kind, worker) VALUES (?, ?, ?, ?)", events)
    conn.close()


def _idle(
    root: Path, cmd: list[str], env: dict[str, str], idle_s: float, measure: Any = None
) -> dict[str, Any]:
    log = (root / "daemon.log").open("a")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_ready(proc, env, root)
        time.sleep(2.0)  # start-up work (first scan, imports) done before sampling
        c0, w0 = cpu_seconds(proc.pid), time.perf_counter()
        time.sleep(idle_s)
        out: dict[str, Any] = {
            "idle_cpu_percent_of_one_core": round(
                100 * (cpu_seconds(proc.pid) - c0) / (time.perf_counter() - w0), 3
            ),
            "rss_idle_mb": round(rss_mb(proc.pid), 1),
        }
        if measure is not None:
            out.update(measure(_Served(proc.pid, env)))
        return out
    finally:
        _stop(proc)
        log.close()


class _Served:
    def __init__(self, pid: int, env: dict[str, str]) -> None:
        self.pid = pid
        status = _status(env) or {}
        self.url = status["dashboard"]
        token = (Path(env["XDG_STATE_HOME"]) / "gpen-watch" / "dashboard.token").read_text().strip()
        self.port = int(self.url.rsplit(":", 1)[1].strip("/"))
        self.host = f"127.0.0.1:{self.port}"
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        conn.request("GET", f"/?token={token}", headers={"Host": self.host})
        r = conn.getresponse()
        r.read()
        self.cookie = r.headers["Set-Cookie"].split(";", 1)[0]
        conn.close()


def _pages(s: _Served, env: dict[str, str], repeat: int, idle_s: float) -> dict[str, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
    headers = {"Host": s.host, "Cookie": s.cookie}

    def get(path: str) -> bytes:
        conn.request("GET", path, headers=headers)
        r = conn.getresponse()
        body = r.read()
        if r.status != 200:
            raise RuntimeError(f"{path}: HTTP {r.status}: {body[:200]!r}")
        return body

    results = json.loads(get("/api/results?limit=200"))
    deep = results["next"]
    some_photo = results["photos"][17]["id"]
    urls = [
        "/",
        "/activity",
        "/activity?before=150000",
        "/results",
        f"/results?before={deep}",
        "/results?before=1.0:50000",
        "/failed",
        f"/photo/{some_photo}",
        "/api/status",
        "/api/results",
        f"/api/photo/{some_photo}",
    ]
    timings: dict[str, dict[str, float]] = {}
    for url in urls:
        get(url)  # warm: first request of a page compiles its template
        samples = []
        for _ in range(repeat):
            t = time.perf_counter()
            get(url)
            samples.append(time.perf_counter() - t)
        timings[url] = {
            "median_ms": round(1000 * statistics.median(samples), 1),
            "max_ms": round(1000 * max(samples), 1),
        }
    rss_after_requests = rss_mb(s.pid)
    # One live page open: its stream renders once a second and sends when the page changed.
    stop = threading.Event()
    stream = threading.Thread(target=_hold_stream, args=(s, stop), daemon=True)
    stream.start()
    time.sleep(2.0)
    c0, w0 = cpu_seconds(s.pid), time.perf_counter()
    time.sleep(idle_s)
    live_cpu = (cpu_seconds(s.pid) - c0) / (time.perf_counter() - w0)
    stop.set()
    conn.close()
    return {
        "pages": timings,
        "slowest_median_ms": max(t["median_ms"] for t in timings.values()),
        "slowest_max_ms": max(t["max_ms"] for t in timings.values()),
        "rss_after_requests_mb": round(rss_after_requests, 1),
        "one_live_page_cpu_percent_of_one_core": round(100 * live_cpu, 3),
        "rss_with_live_page_mb": round(rss_mb(s.pid), 1),
    }


def _hold_stream(s: _Served, stop: threading.Event) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
    conn.request("GET", "/live/overview", headers={"Host": s.host, "Cookie": s.cookie})
    r = conn.getresponse()
    while not stop.is_set():
        if not r.readline():
            break
    conn.close()


def _cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "?"


def _print(r: dict[str, Any]) -> None:
    off, on = r["dashboard_off"], r["dashboard_on"]
    print(f"{r['date']}, {r['cores']} cores ({r['cpu']}), journal of {r['rows']:,} photos")
    print(
        f"  parent idle CPU, % of one core: off {off['idle_cpu_percent_of_one_core']}, on {on['idle_cpu_percent_of_one_core']}"
    )
    print(
        f"  parent resident memory, MB:     off {off['rss_idle_mb']}, on {on['rss_idle_mb']} (+{r['rss_added_mb']})"
    )
    print(
        f"  after {len(on['pages'])} URLs x requests: {on['rss_after_requests_mb']} MB; with a live page open: {on['rss_with_live_page_mb']} MB"
    )
    print(f"  one live page open: {on['one_live_page_cpu_percent_of_one_core']} % of one core")
    print("  page and API times (median / max ms):")
    for url, t in on["pages"].items():
        print(f"    {url:<36} {t['median_ms']:>7} / {t['max_ms']}")


if __name__ == "__main__":
    sys.exit(main())
