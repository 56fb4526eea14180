"""Worker slots and the restorer pool: real spawned processes running a fake restorer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpen_watch.base.errors import ConfigError
from gpen_watch.config import RestoreConfig, WorkerConfig
from gpen_watch.dispatch import devices, pool
from gpen_watch.dispatch.devices import WorkerSlot
from gpen_watch.gpu import nvml
from gpen_watch.gpu.nvml import GpuInfo
from gpen_watch.restore.api import FileJob

FAKE = "fake_restorer:FakeRestorer"
TESTS_DIR = str(Path(__file__).parent)


# --- device slots --------------------------------------------------------------------------------

GPUS = [GpuInfo(0, "GPU A", "GPU-aaaa", 80 << 30), GpuInfo(1, "GPU B", "GPU-bbbb", 80 << 30)]


def test_no_gpu_gives_cpu_workers_sharing_the_cores() -> None:
    slots = devices.resolve_slots(WorkerConfig(cpu_workers=2), gpus=[], cores=8, environ={})
    assert [s.name for s in slots] == ["cpu#0", "cpu#1"]
    # "auto" without an NVIDIA GPU: each worker picks (Apple's GPU on a Mac, else the CPU).
    assert all(s.device == "auto" and s.label == "cpu" and s.threads == 4 for s in slots)
    assert slots[0].env["OMP_NUM_THREADS"] == "4"
    assert slots[0].env["MKL_NUM_THREADS"] == "4"
    assert slots[0].env["CUDA_VISIBLE_DEVICES"] == ""


def test_explicit_cpu_workers_stay_on_the_cpu() -> None:
    for wanted in (["cpu"], ["auto", "cpu"]):
        slots = devices.resolve_slots(WorkerConfig(devices=wanted), gpus=[], cores=4, environ={})
        assert [s.device for s in slots] == ["cpu"], wanted


def test_more_cpu_workers_than_cores_still_one_thread_each() -> None:
    slots = devices.resolve_slots(WorkerConfig(cpu_workers=3), gpus=[], cores=2, environ={})
    assert [s.threads for s in slots] == [1, 1, 1]


def test_auto_pins_one_worker_per_gpu() -> None:
    slots = devices.resolve_slots(WorkerConfig(workers_per_device=2), gpus=GPUS, cores=16, environ={})
    assert [s.name for s in slots] == ["cuda:0#0", "cuda:0#1", "cuda:1#0", "cuda:1#1"]
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in slots] == ["0", "0", "1", "1"]
    assert all(s.device == "cuda" and s.threads == 4 for s in slots)
    assert slots[0].env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


def test_explicit_devices_and_user_visibility() -> None:
    slots = devices.resolve_slots(WorkerConfig(devices=["cuda:1"]), gpus=GPUS, cores=4, environ={})
    assert [(s.name, s.gpu_index) for s in slots] == [("cuda:1", 1)]
    slots = devices.resolve_slots(WorkerConfig(), gpus=GPUS, cores=4, environ={"CUDA_VISIBLE_DEVICES": "1"})
    assert [s.name for s in slots] == ["cuda:1"]
    slots = devices.resolve_slots(WorkerConfig(), gpus=GPUS, cores=4, environ={"CUDA_VISIBLE_DEVICES": ""})
    assert [s.name for s in slots] == ["cpu#0"]
    with pytest.raises(ConfigError, match="cuda:3 not found"):
        devices.resolve_slots(WorkerConfig(devices=["cuda:3"]), gpus=GPUS, cores=4, environ={})
    with pytest.raises(ConfigError, match="no NVIDIA GPU"):
        devices.resolve_slots(WorkerConfig(devices=["cuda"]), gpus=[], cores=4, environ={})


def test_list_gpus_never_raises() -> None:
    gpus = nvml.list_gpus()  # no driver here: [], on a GPU machine: the GPUs
    assert isinstance(gpus, list)


# --- the pool ------------------------------------------------------------------------------------


def cpu_slot(name: str = "cpu#0", device: str = "cpu") -> WorkerSlot:
    return WorkerSlot(name, device, device, None, 1, {"OMP_NUM_THREADS": "1"})


def make_pool(tmp_path: Path, n: int = 1, env: dict[str, str] | None = None, **wk: object) -> pool.Pool:
    cfg = WorkerConfig(**{"image_timeout": 30.0, "images_in_flight": 2, **wk})  # type: ignore[arg-type]
    child_env = {"PYTHONPATH": TESTS_DIR, **(env or {})}
    p = pool.Pool(
        [cpu_slot(f"cpu#{i}") for i in range(n)],
        RestoreConfig(),
        cfg,
        factory=FAKE,
        child_env=child_env,
        heartbeat_s=0.5,
    )
    p.start()
    return p


def make_tasks(tmp_path: Path, names: list[str], start: int = 1) -> list[pool.Task]:
    (tmp_path / "in").mkdir(exist_ok=True)
    (tmp_path / "out").mkdir(exist_ok=True)
    tasks = []
    for i, name in enumerate(names, start):
        src = tmp_path / "in" / name
        src.write_bytes(b"image " + name.encode())
        tasks.append(pool.Task(i, FileJob(src, tmp_path / "out" / f"{i}.tmp")))
    return tasks


def run_until(p: pool.Pool, done: callable, limit: float = 30.0) -> list[pool.PoolEvent]:  # type: ignore[valid-type]
    events: list[pool.PoolEvent] = []
    deadline = time.monotonic() + limit
    while not done(events):
        assert time.monotonic() < deadline, f"timed out; events so far: {events}"
        events += p.poll(0.2)
    return events


def finished(n: int):  # type: ignore[no-untyped-def]
    return lambda ev: sum(e.kind in (pool.DONE, pool.GAVE_UP) for e in ev) >= n


@pytest.fixture
def pools():  # type: ignore[no-untyped-def]
    made: list[pool.Pool] = []
    yield made
    for p in made:
        p.begin_stop()
        p.kill_all()


def test_pool_restores_every_image_once(tmp_path: Path, pools: list[pool.Pool]) -> None:
    p = make_pool(tmp_path, n=2)
    pools.append(p)
    tasks = make_tasks(tmp_path, [f"img{i}.jpg" for i in range(10)])
    p.submit(tasks)
    events = run_until(p, finished(10))
    done = [e for e in events if e.kind == pool.DONE]
    assert sorted(e.task.key for e in done) == list(range(1, 11))
    assert all(e.result is not None and e.result.ok for e in done)
    assert all(Path(e.result.dst).read_bytes().startswith(b"image") for e in done if e.result)
    # Worker environment: pinned threads reach the restorer; torch never loaded by this parent.
    assert "threads=1" in done[0].result.notes  # type: ignore[union-attr]
    run_until(p, lambda ev: all(s["state"] == "idle" for s in p.snapshot()))
    assert sum(s["done"] for s in p.snapshot()) == 10


@pytest.mark.parametrize(
    ("configured", "asked", "cap"), [(0, 7, 7), (0, 0, pool.DEFAULT_IN_FLIGHT), (3, 7, 3)]
)
def test_photos_in_flight_follow_the_workers_read_ahead_unless_configured(
    tmp_path: Path, pools: list[pool.Pool], configured: int, asked: int, cap: int
) -> None:
    p = make_pool(
        tmp_path, n=2, env={"FAKE_READ_AHEAD": str(asked), "FAKE_SLOW": "2"}, images_in_flight=configured
    )
    pools.append(p)
    run_until(p, lambda ev: all(s["state"] == "idle" for s in p.snapshot()))
    assert [s["in_flight_cap"] for s in p.snapshot()] == [cap, cap]
    assert p.capacity() == 2 * cap
    p.submit(make_tasks(tmp_path, [f"slow{i}.jpg" for i in range(2 * cap + 3)]))
    run_until(p, lambda ev: sum(s["in_flight"] for s in p.snapshot()) == 2 * cap)
    assert [s["in_flight"] for s in p.snapshot()] == [cap, cap]  # the rest wait in the parent
    assert p.capacity() == 0


def test_sigkilled_worker_is_restarted_and_the_job_completes_once(
    tmp_path: Path, pools: list[pool.Pool]
) -> None:
    started = tmp_path / "started"
    started.mkdir()
    p = make_pool(tmp_path, env={"FAKE_SLOW": "3", "FAKE_SLOW_STARTED": str(started)})
    pools.append(p)
    tasks = make_tasks(tmp_path, ["slow.jpg"])
    p.submit(tasks)
    run_until(p, lambda ev: (started / "slow.jpg").exists())  # the restorer is on it
    os.kill(p.snapshot()[0]["pid"], signal.SIGKILL)
    events = run_until(p, finished(1))
    events += p.poll(0.5)
    done = [e for e in events if e.kind == pool.DONE]
    assert len(done) == 1
    assert done[0].result is not None
    assert done[0].result.ok
    assert done[0].task.attempts == 1
    assert p.snapshot()[0]["restarts"] == 1
    retry = [e for e in events if e.kind == pool.RETRY]
    assert retry
    assert "exit signal 9" in retry[0].message


def test_poison_image_gives_up_after_max_attempts_and_companions_survive(
    tmp_path: Path, pools: list[pool.Pool]
) -> None:
    p = make_pool(tmp_path, images_in_flight=3, max_attempts=2)
    pools.append(p)
    tasks = make_tasks(tmp_path, ["a.jpg", "crash.jpg", "b.jpg", "crash1.jpg"])
    p.submit(tasks)
    events = run_until(p, finished(4), limit=60)
    by_name = {e.task.job.src.name: e for e in events if e.kind in (pool.DONE, pool.GAVE_UP)}
    assert by_name["a.jpg"].kind == pool.DONE
    assert by_name["b.jpg"].kind == pool.DONE
    assert by_name["crash1.jpg"].kind == pool.DONE  # crashed once, then went through
    gave_up = by_name["crash.jpg"]
    assert gave_up.kind == pool.GAVE_UP
    assert gave_up.message == "worker crashed 2 times while restoring this image (exit signal 9, SIGKILL)"


def test_output_half_written_by_a_killed_worker_is_removed_before_the_retry(
    tmp_path: Path, pools: list[pool.Pool]
) -> None:
    """A worker killed mid-write leaves a partial temp output; the retry must not find it there (the
    engine never overwrites, so the photo would fail on a worker crash that was not its fault)."""
    p = make_pool(tmp_path, images_in_flight=1, max_attempts=3)
    pools.append(p)
    (task,) = make_tasks(tmp_path, ["halfwrite1.jpg"])
    p.submit([task])
    events = run_until(p, finished(1), limit=60)
    done = [e for e in events if e.kind == pool.DONE]
    assert done, events
    assert done[0].result is not None, events
    assert done[0].result.ok, events
    assert task.job.dst.read_bytes() == task.job.src.read_bytes()
    assert [e.kind for e in events].count(pool.RETRY) == 1
    assert sorted(q.name for q in task.job.dst.parent.iterdir()) == [task.job.dst.name]  # no writer temp


def test_hung_worker_is_killed_after_the_timeout(tmp_path: Path, pools: list[pool.Pool]) -> None:
    p = make_pool(tmp_path, image_timeout=1.0, max_attempts=1, images_in_flight=1)
    pools.append(p)
    tasks = make_tasks(tmp_path, ["hang.jpg", "ok.jpg"])
    t0 = time.monotonic()
    p.submit(tasks)
    events = run_until(p, finished(2), limit=40)
    by_name = {e.task.job.src.name: e for e in events if e.kind in (pool.DONE, pool.GAVE_UP)}
    assert by_name["hang.jpg"].kind == pool.GAVE_UP
    assert "hung once" in by_name["hang.jpg"].message
    assert "no result within 1 s" in by_name["hang.jpg"].message
    assert by_name["ok.jpg"].kind == pool.DONE
    assert time.monotonic() - t0 < 30


def test_exception_in_restorer_counts_as_a_crash_with_its_message(
    tmp_path: Path, pools: list[pool.Pool]
) -> None:
    p = make_pool(tmp_path, max_attempts=2)
    pools.append(p)
    p.submit(make_tasks(tmp_path, ["raise.jpg"]))
    events = run_until(p, finished(1))
    assert events[-1].kind == pool.GAVE_UP
    assert (
        events[-1].message
        == "worker failed 2 times while restoring this image (ValueError: restorer blew up)"
    )


def test_out_of_memory_retries_smaller_then_fails_clearly(tmp_path: Path, pools: list[pool.Pool]) -> None:
    p = make_pool(tmp_path)
    pools.append(p)
    p.submit(make_tasks(tmp_path, ["oom1.jpg", "oom.jpg"]))
    events = run_until(p, finished(2))
    by_name = {e.task.job.src.name: e for e in events if e.kind == pool.DONE}
    ok = by_name["oom1.jpg"].result
    assert ok is not None
    assert ok.ok
    assert "scale=0.5" in ok.notes
    bad = by_name["oom.jpg"].result
    assert bad is not None
    assert not bad.ok
    assert bad.error is not None
    assert bad.error.startswith("out of GPU memory even at 25% scale")
    assert sum(e.kind == pool.RETRY for e in events) == 3  # oom1: 1.0->0.5; oom: 1.0->0.5->0.25


def test_model_error_stops_the_worker_instead_of_crash_looping(
    tmp_path: Path, pools: list[pool.Pool]
) -> None:
    p = make_pool(tmp_path, env={"FAKE_LOAD": "model_error"})
    pools.append(p)
    p.submit(make_tasks(tmp_path, ["a.jpg"]))
    run_until(p, lambda ev: p.snapshot()[0]["state"] == "error")
    events = p.poll(1.0)
    assert not events  # the task waits (nothing lost); the worker is not restarted
    snap = p.snapshot()[0]
    assert snap["restarts"] == 0
    assert "weights not found" in snap["error"]
    assert p.problem() is not None
    assert "gpen-watch models fetch" in p.problem()  # type: ignore[operator]
    assert p.capacity() == 0
    assert p.pending() == 1


@pytest.mark.slow
def test_device_that_keeps_failing_is_retired_and_others_carry_on(
    tmp_path: Path, pools: list[pool.Pool]
) -> None:
    cfg = WorkerConfig(image_timeout=30.0)
    gpu = WorkerSlot("cuda:0", "cuda", "cuda:0 (gone)", 0, 1, {"FAKE_LOAD": "cuda_error"})
    cpu = WorkerSlot("cpu#0", "cpu", "cpu", None, 1, {"FAKE_LOAD": ""})
    p = pool.Pool(
        [gpu, cpu], RestoreConfig(), cfg, factory=FAKE, child_env={"PYTHONPATH": TESTS_DIR}, heartbeat_s=0.5
    )
    pools.append(p)
    p.start()
    p.submit(make_tasks(tmp_path, ["a.jpg", "b.jpg"]))
    events = run_until(p, lambda ev: finished(2)(ev) and p.snapshot()[0]["state"] == "retired", limit=60)
    assert all(e.worker == "cpu#0" for e in events if e.kind == pool.DONE)
    snap = p.snapshot()[0]
    assert "failed to start 3 times" in snap["error"]
    assert "CUDA error" in snap["error"]
    assert p.problem() is None  # the CPU worker still works


@pytest.mark.slow
def test_exception_while_loading_stops_the_worker_after_three_tries(
    tmp_path: Path, pools: list[pool.Pool]
) -> None:
    p = make_pool(tmp_path, env={"FAKE_LOAD": "bug"})
    pools.append(p)
    run_until(p, lambda ev: p.snapshot()[0]["state"] == "error", limit=30)
    assert "failed to start 3 times in a row" in p.snapshot()[0]["error"]
    assert "AttributeError" in p.snapshot()[0]["error"]


def test_worker_killed_while_loading_is_restarted_not_retired(tmp_path: Path, pools: list[pool.Pool]) -> None:
    p = make_pool(tmp_path, env={"FAKE_LOAD": "sleep:30"})
    pools.append(p)
    pids = set()
    for _ in range(3):
        run_until(p, lambda ev: p.snapshot()[0]["state"] == "starting" and p.snapshot()[0]["pid"] not in pids)
        pid = p.snapshot()[0]["pid"]
        pids.add(pid)
        time.sleep(0.3)
        os.kill(pid, signal.SIGKILL)
        run_until(p, lambda ev: p.snapshot()[0]["state"] != "starting")
    snap = p.snapshot()[0]
    assert snap["state"] == "restarting", snap
    assert "exit signal 9" in snap["error"]


# A service whose one worker loads its models for {load} seconds; it prints the worker's pid once
# the worker is loading.
_ORPHANING_PARENT = """
import os, sys, time
sys.path.insert(0, {tests!r})
from test_dispatch import make_pool
p = make_pool(None, env={{"FAKE_LOAD": "sleep:{load}", "FAKE_LOAD_STARTED": {started!r}}})
while not os.path.exists({started!r}):
    p.poll(0.1)
print(p.snapshot()[0]["pid"], flush=True)
time.sleep(600)
"""


def test_a_worker_whose_parent_is_killed_while_it_loads_leaves_at_once_and_quietly(tmp_path: Path) -> None:
    """It used to load its models for nobody, then print a BrokenPipeError traceback."""
    load_s = 30
    script = _ORPHANING_PARENT.format(tests=TESTS_DIR, load=load_s, started=str(tmp_path / "loading"))
    parent = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert parent.stdout is not None
        worker_pid = int(parent.stdout.readline())
        os.kill(parent.pid, signal.SIGKILL)
        killed = time.monotonic()
        # The worker holds the parent's stdout and stderr: they end when it does.
        _out, err = parent.communicate(timeout=load_s * 2)
        gone_after = time.monotonic() - killed
    finally:
        parent.kill()
    assert gone_after < load_s / 2, f"worker {worker_pid} lingered {gone_after:.1f} s"
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_pause_hands_out_nothing_and_resume_continues(tmp_path: Path, pools: list[pool.Pool]) -> None:
    p = make_pool(tmp_path)
    pools.append(p)
    run_until(p, lambda ev: p.snapshot()[0]["state"] == "idle")
    p.pause()
    assert p.capacity() == 0
    p.submit(make_tasks(tmp_path, ["a.jpg"]))
    assert not [e for e in p.poll(1.0) if e.kind == pool.DONE]
    assert p.in_flight() == 0
    assert p.pending() == 1
    p.resume()
    run_until(p, finished(1))


def test_graceful_stop_finishes_started_work_and_returns_the_rest(
    tmp_path: Path, pools: list[pool.Pool]
) -> None:
    started = tmp_path / "started"
    started.mkdir()
    p = make_pool(tmp_path, env={"FAKE_SLOW": "1", "FAKE_SLOW_STARTED": str(started)}, images_in_flight=1)
    tasks = make_tasks(tmp_path, ["slow1.jpg", "slow2.jpg", "slow3.jpg"])
    p.submit(tasks)
    run_until(p, lambda ev: (started / "slow1.jpg").exists())  # the restorer is on the first
    t0 = time.monotonic()
    p.begin_stop()
    events: list[pool.PoolEvent] = []
    while p.alive() and time.monotonic() - t0 < 10:
        events += p.poll(0.5)
    leftover = p.kill_all()
    assert time.monotonic() - t0 < 5
    done = {e.task.key for e in events if e.kind == pool.DONE}
    assert done == {1}
    assert sorted(t.key for t in leftover) == [2, 3]


def test_stop_kills_workers_that_do_not_finish_in_time(tmp_path: Path) -> None:
    p = make_pool(tmp_path, images_in_flight=1)
    p.submit(make_tasks(tmp_path, ["hang.jpg"]))
    run_until(p, lambda ev: p.snapshot()[0]["state"] == "busy")
    pid = p.snapshot()[0]["pid"]
    p.begin_stop()
    p.poll(0.5)
    leftover = p.kill_all()
    assert [t.key for t in leftover] == [1]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_pool_module_does_not_import_torch() -> None:
    # The pool runs in the service process; the check is repeated end to end in test_daemon.
    import subprocess

    code = "import gpen_watch.dispatch.pool, gpen_watch.dispatch.devices, sys; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.slow
def test_status_shows_a_real_workers_memory_per_stage_and_budget(
    tmp_path: Path,
    pools: list[pool.Pool],
    tiny_models,
    astronaut_bgr,  # type: ignore[no-untyped-def]
) -> None:
    """A worker running the real engine (tiny random-weight models) reports its memory budget when
    ready and its resident memory per stage with each result; the pool's snapshot (what `gpen-watch
    status` prints) carries both."""
    import cv2
    from conftest import tiny_restore_config

    from gpen_watch.cli.control import format_status
    from gpen_watch.service.status import Status

    cfg = tiny_restore_config(tiny_models, memory_mb=3000)
    p = pool.Pool(
        [cpu_slot()],
        cfg,
        WorkerConfig(image_timeout=120.0),
        child_env={"PYTHONPATH": TESTS_DIR},
        heartbeat_s=0.5,
    )
    p.start()
    pools.append(p)
    (tmp_path / "in").mkdir()
    (tmp_path / "out").mkdir()
    src = tmp_path / "in" / "a.png"
    cv2.imwrite(str(src), astronaut_bgr)
    p.submit([pool.Task(1, FileJob(src, tmp_path / "out" / "1.tmp"))])
    run_until(p, finished(1), limit=120.0)
    (w,) = p.snapshot()
    assert w["memory_budget_mb"] == 3000
    assert {"decode", "align", "restore", "paste", "encode", "peak"} <= set(w["rss_mb"])
    assert 50 < w["rss_mb"]["decode"] <= w["rss_mb"]["peak"]
    text = format_status(Status.from_json({"workers": [w]}))
    assert "memory MB at stage end: decode " in text
    assert "of 3000 budget" in text
