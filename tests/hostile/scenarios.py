"""Fault scenarios as plain functions, so pytest runs them small and ``stress`` runs them long.

Each takes a root folder, a random generator and sizes and drives a real service. The kill scenarios
return what happened (``KillRun``: the kills that landed, the invariant's problems, the journal's
counts) for the test to assert; ``load`` asserts its own limits. ``figures()`` is what the stress
report prints.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import inputs
from .harness import COPY, Service, finished, write_atomic
from .invariants import Ledger, Report, check, survey


def drop_photos(
    svc: Service, ledger: Ledger, n: int, start: int = 0, folders: int = 3, prefix: str = "p"
) -> None:
    """n distinct small JPEGs, spread over a few subfolders."""
    for i in range(start, start + n):
        rel = f"{'' if i % folders == 0 else f'd{i % folders}/'}{prefix}{i}.jpg"
        data = inputs.jpeg(64, 64, seed=i)
        write_atomic(svc.inbox / rel, data)
        ledger.add(rel, data, {"done"})


@dataclass
class KillRun:
    """What a kill scenario saw: the facts its test asserts."""

    # Kills that landed, by the victim's state (starting = loading; busy or idle = between, mid-image
    # or mid-write); the service scenario counts its kills under "service".
    kills: dict[str, int]
    # Jobs the drops must end in (done, failed, unsupported or duplicate), and the journal's count of
    # jobs in each state once the service stopped.
    expected: int
    counts: dict[str, int]
    # The invariant's findings (each names its file); empty when every drop ended exactly once.
    problems: list[str]
    # `gpen-watch stop`'s exit status at the end, and the pool's worker restarts.
    stop_code: int
    restarts: int = 0
    killed_after_s: list[float] = field(default_factory=list)
    outputs: int = 0
    logs: str = ""

    def figures(self) -> dict[str, Any]:
        return {
            "kills": self.kills,
            "restarts": self.restarts,
            "killed_after_s": self.killed_after_s,
            "counts": self.counts,
            "images": self.outputs,
        }

    def failures(self, kills: int) -> list[str]:
        """What stress reports as a failed round: the same facts the tests assert."""
        out = [f"invariant violated: {p}" for p in self.problems]
        if self.stop_code != 0:
            out.append(f"stop exited {self.stop_code}")
        if sum(self.kills.values()) < kills:
            out.append(f"only {self.kills} kills landed of {kills}")
        return out


def _finish(svc: Service, ledger: Ledger) -> tuple[int, Report, list[str], str]:
    """Stop the service and survey the folders and the journal."""
    code = svc.stop()
    report, problems = survey(svc, ledger)
    return code, report, problems, svc.logs() if problems or code else ""


def workers_killed_at_random(
    root: Path, rng: random.Random, images: int = 60, kills: int = 12, timeout: float = 240.0
) -> KillRun:
    """SIGKILL a random worker at random moments (loading, between images, mid-image, mid-write)
    until ``kills`` kills landed, then let the service finish and stop it."""
    svc = Service(
        root,
        "--set",
        "workers.cpu_workers=2",
        "--set",
        "workers.images_in_flight=3",
        "--set",
        "workers.max_attempts=1000",
        restorer=COPY,
        env={"FAKE_LOAD": "sleep:0.3", "HOSTILE_DELAY": "0.02,0.15", "HOSTILE_SLOW_WRITE": "4,0.02"},
    )
    ledger = Ledger(svc.inbox)
    where: Counter[str] = Counter()
    more = 0
    try:
        svc.start()
        drop_photos(svc, ledger, images)
        deadline = time.monotonic() + timeout
        while sum(where.values()) < kills and time.monotonic() < deadline:
            time.sleep(rng.uniform(0.05, 0.6))
            s = svc.status()
            if finished(s) >= len(ledger.drops):
                # Everything done before enough kills landed: keep the workers busy.
                drop_photos(svc, ledger, 10, start=images + 10 * more, prefix="more")
                more += 1
                continue
            # Mostly working workers; a loading one now and then. (A worker killed again and again
            # while loading is restarted more and more slowly, up to 30 s apart, by design: killing
            # every new worker as it loads measures that back-off, not the service.)
            busy = [w for w in s["workers"] if w["pid"] and w["state"] in ("busy", "idle")]
            loading = [w for w in s["workers"] if w["pid"] and w["state"] == "starting"]
            alive = busy if rng.random() < 0.8 else loading
            if not alive:
                continue
            victim = rng.choice(alive)
            try:
                os.kill(victim["pid"], signal.SIGKILL)
            except ProcessLookupError:
                continue
            where[victim["state"]] += 1  # starting (loading), busy (mid-image or mid-write), idle
        s = svc.wait_idle(ledger.jobs_expected(), timeout=timeout)
        code, report, problems, logs = _finish(svc, ledger)
    finally:
        svc.close()
    return KillRun(
        kills=dict(where),
        expected=ledger.jobs_expected(),
        counts=report.counts,
        problems=problems,
        stop_code=code,
        restarts=sum(w["restarts"] for w in s["workers"]),
        outputs=report.outputs,
        logs=logs,
    )


def service_killed_at_random(
    root: Path, rng: random.Random, restarts: int = 4, images: int = 30, timeout: float = 240.0
) -> KillRun:
    """SIGKILL the whole service at random moments (starting, recovering, committing...) and start it
    again, dropping more files while it is down; the queue must resume with nothing lost or doubled."""
    svc = Service(
        root,
        "--set",
        "workers.images_in_flight=3",
        restorer=COPY,
        env={"HOSTILE_DELAY": "0.01,0.1", "HOSTILE_SLOW_WRITE": "3,0.02"},
    )
    ledger = Ledger(svc.inbox)
    killed_after: list[float] = []
    try:
        drop_photos(svc, ledger, images)
        # Not every file is a photo: failures and set-asides must survive the kills too.
        for i in range(3):
            write_atomic(svc.inbox / f"bad{i}.jpg", f"bad {i}".encode())  # the stand-in fails these
            ledger.add(f"bad{i}.jpg", f"bad {i}".encode(), {"unsupported"}, "not an image")
            write_atomic(svc.inbox / f"notes{i}.txt", f"notes {i}".encode())
            ledger.add(f"notes{i}.txt", f"notes {i}".encode(), {"unsupported"}, "unsupported file type")
        for r in range(restarts):
            svc.start(wait=False)
            delay = rng.uniform(0.3, 3.0)
            time.sleep(delay)
            svc.kill()
            killed_after.append(round(delay, 2))
            # Dropped while it is down: some new, some copies of photos that may be done already.
            drop_photos(svc, ledger, 3, start=1000 + 3 * r, prefix="late")
            if r % 2:
                src = rng.randrange(images)
                data = inputs.jpeg(64, 64, seed=src)
                rel = f"copy-of-{src}-{r}.jpg"
                write_atomic(svc.inbox / rel, data)
                ledger.add_copy(rel, data)
        svc.start()
        svc.wait_idle(ledger.jobs_expected(), timeout=timeout)
        code, report, problems, logs = _finish(svc, ledger)
    finally:
        svc.close()
    return KillRun(
        kills={"service": len(killed_after)},
        expected=ledger.jobs_expected(),
        counts=report.counts,
        problems=problems,
        stop_code=code,
        killed_after_s=killed_after,
        outputs=report.outputs,
        logs=logs,
    )


def status_cli(env: dict[str, str], timeout: float = 30.0) -> tuple[float, str]:
    """`gpen-watch status` in a subprocess: (seconds it took, its output)."""
    t0 = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "gpen_watch", "status"],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    took = time.monotonic() - t0
    assert out.returncode == 0, out.stderr
    return took, out.stdout


def load(
    root: Path,
    images: int = 1000,
    workers: int = 2,
    timeout: float = 600.0,
    restorer: str | None = COPY,
    extra: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Drop ``images`` small photos at once; all must be done exactly once while status stays quick.

    A side thread asks for status every 0.1 s from the first file written to the last one done
    (the drop itself is the watcher's hardest moment); the main thread runs `gpen-watch status`
    every 3 s meanwhile.
    """
    svc = Service(
        root,
        "--set",
        f"workers.cpu_workers={workers}",
        "--set",
        "workers.images_in_flight=8",
        *extra,
        restorer=restorer,
    )
    ledger = Ledger(svc.inbox)
    latencies: list[float] = []
    cli: list[float] = []
    seen: dict[str, float] = {"rss": 0.0, "settling": 0, "done": 0}
    finished_all = threading.Event()
    errors: list[BaseException] = []

    def poll() -> None:
        while not finished_all.is_set():
            q0 = time.monotonic()
            try:
                s = svc.status()
            except BaseException as exc:  # noqa: BLE001 - reported by the main thread
                errors.append(exc)
                return
            latencies.append(time.monotonic() - q0)
            seen["rss"] = max(seen["rss"], s.get("rss_peak_mb") or 0.0)
            seen["settling"] = max(seen["settling"], s["settling"])
            q = s["queue"]
            if finished(s) >= images and q["queued"] == q["running"] == q["in_flight"] == 0:
                seen["done"] = time.monotonic()
                finished_all.set()
            time.sleep(0.1)

    try:
        svc.start()
        poller = threading.Thread(target=poll, name="status poller", daemon=True)
        t0 = time.monotonic()
        poller.start()
        for i in range(images):
            rel = f"batch{i % 10}/img{i:05d}.jpg"
            data = inputs.jpeg(48, 48, seed=100000 + i)
            path = svc.inbox / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)  # in place, as a bulk copy does
            ledger.add(rel, data, {"done"})
        dropped = time.monotonic() - t0
        while not finished_all.wait(3.0):
            if errors:
                raise AssertionError(f"status failed during the load: {errors[0]!r}\n{svc.logs()}")
            if time.monotonic() - t0 > timeout:
                raise AssertionError(f"load not done in {timeout} s\n{svc.logs()}")
            took, text = status_cli(svc.env)
            cli.append(took)
            assert "queue" in text
        poller.join(5)
        elapsed = seen["done"] - t0
        s = svc.status()
        assert s["torch_loaded"] is False
        assert svc.stop() == 0
        report = check(svc, ledger)
    finally:
        finished_all.set()
        svc.close()
    assert report.counts.get("done", 0) == images
    return {
        "images": images,
        "dropped_in_s": round(dropped, 1),
        "all_done_in_s": round(elapsed, 1),
        "images_per_s": round(images / elapsed, 1),
        "parent_rss_peak_mb": seen["rss"],
        "status_max_s": round(max(latencies), 3),
        "status_median_s": round(sorted(latencies)[len(latencies) // 2], 3),
        "status_cli_max_s": round(max(cli), 2) if cli else None,
        "status_calls": len(latencies),
        "max_settling": int(seen["settling"]),
    }
