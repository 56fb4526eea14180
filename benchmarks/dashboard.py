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
import re
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
from gpen_watch.dashboard.crops import IDLE_S
from gpen_watch.journal import Journal, schema

COOKIE = "gpen_watch_session"
# Results views timed on the full journal (the dates of today's are added where it runs).
REVIEW_URLS = [
    "/results",
    "/results?page=1000",
    "/results?q=IMG_0123",
    "/results?q=img_09&sort=name",
    "/results?state=restored",
    "/results?state=noface",
    "/results?state=redone",
    "/results?state=failed",
    "/results?review=unreviewed",
    "/results?review=accepted",
    "/results?review=rejected",
    "/results?review=look",
    "/results?stars=3",
    "/results?state=copy",
    "/results?faces_min=3&faces_max=5",
    "/results?sort=oldest",
    "/results?sort=name",
    "/results?sort=name&page=1500",
    "/results?sort=faces",
    "/results?sort=faces&page=1500",
    "/results?q=IMG_05&state=restored&faces_min=1&review=unreviewed&sort=faces",
    "/api/results?state=failed&sort=name",
    # The identity check's filter and order (the person views are added where it runs).
    "/results?identity=flagged",
    "/results?identity=flagged&page=40",
    "/results?sort=identity",
    "/results?sort=identity&page=1500",
    "/results?identity=flagged&review=unreviewed&sort=identity",
    "/people",
]
# The newest photos: one batch (dropped together) whose faces are described, of this many people.
BATCH_PHOTOS = 2_000
BATCH_PEOPLE = 300


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
                    # Review: one in eight rated, one in three reviewed.
                    None if failed else _flag(i),
                    None if failed or i % 3 else finished + 60,
                    None if failed or i % 8 != 5 else rng.randint(1, 5),
                )
            )
            events += [
                (i, finished - 60, "added", None),
                (i, finished - 5, "claimed", "cpu#0"),
                (i, finished, "failed" if failed else "finished", "cpu#0"),
            ]
        conn.executemany(
            "INSERT INTO jobs (id, source, inbox, rel, size, mtime, sha256, state, attempts, created,"
            " started, finished, output, faces, timings, error, notes, original, original_path, mark, reviewed,"
            " stars) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            jobs,
        )
        # One photo in a hundred dropped again into another folder: a copy of its result, listed.
        conn.execute(
            "INSERT INTO jobs (source, inbox, rel, size, mtime, sha256, state, attempts, created, started,"
            " finished, output, faces, timings, notes, original, original_path, duplicate_of)"
            " SELECT inbox || '/copies/' || rel, inbox, 'copies/' || rel, size, mtime, sha256, 'duplicate', 0,"
            " finished + 1, finished + 1, finished + 2, replace(output, rel, 'copies/' || rel), faces, '{}',"
            " '[]', 'archived', original_path, id FROM jobs WHERE state = 'done' AND id % 100 = 50"
        )
        # One photo in forty redone (the redo is a run of its own and replaces the first's result).
        conn.execute(
            "INSERT INTO jobs (source, inbox, rel, size, mtime, sha256, state, attempts, created, started,"
            " finished, output, faces, timings, notes, original, original_path, redo_of, photo, settings)"
            " SELECT original_path, inbox, rel, size, mtime, sha256, 'done', 1, finished + 5, finished + 6,"
            " finished + 7, output, faces, '{}', '[]', 'archived', original_path, id, id,"
            " '{\"restore.strength\": 0.5}' FROM jobs WHERE state = 'done' AND id % 40 = 3"
        )
        conn.executescript(schema.RELIST)  # what the service's own writes keep by triggers
        conn.execute("UPDATE jobs SET listed = 1 WHERE state = 'duplicate' AND output IS NOT NULL")
        conn.executemany("INSERT INTO events (job_id, time, kind, worker) VALUES (?, ?, ?, ?)", events)
        fill_faces(conn, rows, now, rng)
    conn.close()


def fill_faces(conn: sqlite3.Connection, rows: int, now: float, rng: random.Random) -> None:
    """The identity check's measures: every run with faces its largest distance, one in fifty with
    a face flagged; the newest BATCH_PHOTOS photos dropped together (one batch) with each face
    described, as one of BATCH_PEOPLE people (a wedding of 2,000 photos: about 6,000 faces)."""
    import numpy as np

    done = conn.execute(
        "SELECT id, faces FROM jobs WHERE state IN ('done', 'duplicate') AND faces > 0"
    ).fetchall()
    conn.executemany(
        "UPDATE jobs SET flagged = ?, identity = ? WHERE id = ?",
        [
            (1, 0.33 + 0.3 * rng.random(), i) if rng.random() < 0.02 else (0, 0.3 * rng.random(), i)
            for i, _ in done
        ],
    )
    first = rows - BATCH_PHOTOS + 1
    dropped = now - (BATCH_PHOTOS * 30.0) + 10
    conn.execute("UPDATE jobs SET created = ? WHERE id BETWEEN ? AND ?", (dropped, first, rows))
    gen = np.random.default_rng(3)
    centres = gen.normal(size=(BATCH_PEOPLE, 128))
    centres *= 0.6 / np.linalg.norm(centres, axis=1, keepdims=True)
    faces = []
    for job_id, n, flagged in conn.execute(
        "SELECT id, faces, flagged FROM jobs WHERE id >= ? AND listed = 1 AND faces > 0", (first,)
    ).fetchall():
        for idx in range(n):
            person = centres[gen.integers(BATCH_PEOPLE)]
            descriptor = (person + gen.normal(size=128) * 0.01).astype("<f4").tobytes()
            bad = idx == 0 and flagged
            faces.append((job_id, idx, 1, gen.random() * 0.3, 0.4 if bad else 0.1, int(bad), descriptor))
    conn.executemany(
        "INSERT INTO faces (job_id, idx, restored, detail, distance, flagged, descriptor) VALUES (?, ?, ?, ?, ?, ?, ?)",
        faces,
    )


def _flag(i: int) -> str | None:
    """One photo in ten picked, one in thirty rejected, one in fifty marked for another look."""
    return "accepted" if i % 10 == 1 else "rejected" if i % 30 == 12 else "look" if i % 50 == 7 else None


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


def journal_of(env: dict[str, str]) -> Path:
    return Path(env["XDG_STATE_HOME"]) / "gpen-watch" / "journal.sqlite3"


def _bulk_redo(s: _Served, journal: Path, n: int) -> dict[str, Any]:
    """A bulk redo of ``n`` photos from Results, as the page posts it: the time until the service
    has queued them all (their originals are sparse files of the recorded sizes, as a redo needs
    them where their runs left them)."""
    conn = sqlite3.connect(journal)
    rows = conn.execute(
        "SELECT id, original_path, size FROM jobs WHERE listed = 1 AND state = 'done' ORDER BY id DESC LIMIT ?",
        (n,),
    ).fetchall()
    conn.close()
    for _, path, size in rows:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            f.truncate(size)
    body = json.dumps({"action": "redo", "ids": [r[0] for r in rows], "settings": {"restore.strength": 0.5}})
    http_conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
    headers = {
        "Host": s.host,
        "Cookie": s.cookie,
        "Origin": f"http://{s.host}",
        "X-GPEN-Watch": "1",
        "Content-Type": "application/json",
    }
    t = time.perf_counter()
    http_conn.request("POST", "/api/bulk", body=body, headers=headers)
    r = http_conn.getresponse()
    reply = json.loads(r.read())
    took = time.perf_counter() - t
    http_conn.close()
    if r.status != 200:
        raise RuntimeError(f"bulk redo: HTTP {r.status}: {reply}")
    return {"photos": len(rows), "queued": reply["queued"], "seconds": round(took, 3)}


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
    some_photo = results["photos"][17]["id"]
    today = time.strftime("%Y-%m-%d")
    urls = [
        "/",
        "/activity",
        "/activity?before=150000",
        "/failed",
        f"/photo/{some_photo}",
        "/api/status",
        "/api/results",
        f"/api/photo/{some_photo}",
        # Results as a review queue: every filter and order, a deep page, a photo's steps.
        *REVIEW_URLS,
        f"/results?from={today}&to={today}",
        f"/photo/{some_photo}?q=IMG_0&sort=faces&review=unreviewed",
        f"/photo/{some_photo}?state=restored&sort=name",
    ]
    # One person of the batch: their photos, by the identity change, and a photo's steps in them.
    t = time.perf_counter()
    people = get("/people").decode()  # the first grouping of the batch's faces
    people_first_ms = round(1000 * (time.perf_counter() - t), 1)
    person = re.search(r'data-person="([0-9]+\.[0-9]+)"', people)
    if person:
        theirs = json.loads(get(f"/api/results?person={person[1]}"))["photos"]
        urls += [
            f"/results?person={person[1]}",
            f"/results?person={person[1]}&sort=identity",
            f"/photo/{theirs[len(theirs) // 2]['id']}?person={person[1]}",
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
    rss_with_live_page = rss_mb(s.pid)
    real = _real_pixels(get, journal_of(env), some_photo, repeat)
    real["rss_mb"] = round(rss_mb(s.pid), 1)  # the two decoded images held for a minute
    time.sleep(IDLE_S + 2)
    real["rss_released_mb"] = round(rss_mb(s.pid), 1)  # and let go
    conn.close()
    # Last: the 500 redos it queues keep the service busy afterwards.
    bulk = _bulk_redo(s, journal_of(env), 500)
    return {
        "pages": timings,
        "people_first_ms": people_first_ms,
        "people": people.split('class="people-scope">', 1)[-1].split(":", 1)[0],
        "slowest_median_ms": max(t["median_ms"] for t in timings.values()),
        "slowest_max_ms": max(t["max_ms"] for t in timings.values()),
        "bulk_redo": bulk,
        "real_pixels": real,
        "rss_after_requests_mb": round(rss_after_requests, 1),
        "one_live_page_cpu_percent_of_one_core": round(100 * live_cpu, 3),
        "rss_with_live_page_mb": round(rss_with_live_page, 1),
    }


def _real_pixels(get: Any, journal: Path, photo: int, repeat: int) -> dict[str, Any]:
    """The loupe's 1:1 on a 12 MP photo: its result and original written where the journal says
    (the benchmark's other rows have no files), then the first answer (both decoded), and a
    screen's worth of crop of each side once they are (1800 x 900 px, as at 1920 x 1080)."""
    from PIL import Image

    conn = sqlite3.connect(journal)
    output, original = conn.execute(
        "SELECT output, original_path FROM jobs WHERE id = ?", (photo,)
    ).fetchone()
    conn.close()
    im = Image.effect_noise((4000, 3000), 60).convert("RGB")
    for path in (output, original):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        im.save(path, "JPEG", quality=92)
    t = time.perf_counter()
    get(f"/photo/{photo}/real.json")
    first = time.perf_counter() - t
    out: dict[str, Any] = {"pixels": "4000 x 3000", "first_ms": round(1000 * first, 1)}
    for side in ("after", "before"):
        samples = []
        for k in range(repeat):
            t = time.perf_counter()
            get(f"/photo/{photo}/crop/{side}.jpg?x={100 * k}&y={50 * k}&w=1800&h=900")
            samples.append(time.perf_counter() - t)
        out[f"crop_{side}_median_ms"] = round(1000 * statistics.median(samples), 1)
        out[f"crop_{side}_max_ms"] = round(1000 * max(samples), 1)
    return out


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
    b = on["bulk_redo"]
    print(f"  bulk redo of {b['photos']} photos from Results: {b['queued']} queued in {b['seconds']} s")
    real = on["real_pixels"]
    print(
        f"  1:1 of a {real['pixels']} photo: first answer (both decoded) {real['first_ms']} ms; a crop of"
        f" 1800 x 900: after {real['crop_after_median_ms']} / {real['crop_after_max_ms']} ms,"
        f" before {real['crop_before_median_ms']} / {real['crop_before_max_ms']} ms (median / max);"
        f" {real['rss_mb']} MB resident with both held, {real['rss_released_mb']} MB once let go"
    )
    print(f"  People, the first time (the batch grouped): {on['people_first_ms']} ms ({on['people']})")
    print("  page and API times (median / max ms):")
    for url, t in on["pages"].items():
        print(f"    {url:<72} {t['median_ms']:>7} / {t['max_ms']}")


if __name__ == "__main__":
    sys.exit(main())
