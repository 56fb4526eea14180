"""The pool's fault policy on its own: no processes, time from a clock the test moves.

The same rules run against real spawned workers in test_dispatch.py and test_daemon.py; here each
rule is driven to its edge (the third crash, the second past a deadline) without waiting for it.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gpen_watch.config import WorkerConfig
from gpen_watch.dispatch import protocol as P
from gpen_watch.dispatch.devices import WorkerSlot
from gpen_watch.dispatch.policy import FaultPolicy
from gpen_watch.dispatch.records import Kill, Send, Spawn, WorkerState
from gpen_watch.dispatch.tasks import EventKind, PoolEvent, Task
from gpen_watch.gpu.nvml import GpuSample
from gpen_watch.restore.api import FileJob, FileResult


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make(n: int = 1, **wk: object) -> tuple[FaultPolicy, Clock]:
    clock = Clock()
    cfg = WorkerConfig(**{"image_timeout": 60.0, "images_in_flight": 2, "max_attempts": 3, **wk})  # type: ignore[arg-type]
    slots = [WorkerSlot(f"cpu#{i}", "cpu", "cpu", None, 1) for i in range(n)]
    policy = FaultPolicy(slots, cfg, clock=clock, start_timeout=300.0, silence_timeout=60.0)
    return policy, clock


def ready(policy: FaultPolicy, i: int = 0) -> None:
    policy.spawned(i, 100 + i)
    policy.on_message(i, P.Ready(pid=100 + i, device="cpu", threads=1), [])


def task(key: int, name: str = "") -> Task:
    return Task(key, FileJob(Path(f"/in/{name or key}.jpg"), Path(f"/out/{key}.tmp")))


def sent(actions: list[object]) -> dict[int, list[int]]:
    """Which task keys each worker index was sent."""
    out: dict[int, list[int]] = {}
    for a in actions:
        assert isinstance(a, Send)
        assert isinstance(a.msg, P.Jobs)
        out.setdefault(a.index, []).extend(item.key for item in a.msg.items)
    return out


def ok(key: int) -> P.Result:
    return P.Result(key, FileResult(Path(f"/in/{key}.jpg"), True, faces=1))


def test_start_spawns_every_worker_and_ready_makes_it_take_work() -> None:
    policy, _ = make(n=2)
    assert policy.start() == [Spawn(0), Spawn(1)]
    policy.spawned(1, 101)
    ready(policy, 0)
    policy.pending.extend(task(k) for k in (1, 2, 3))
    assert sent(policy.dispatch()) == {0: [1, 2]}  # images_in_flight = 2; worker 1 still loading
    assert policy.capacity() == 1  # worker 1 (starting) has room for two, one is already waiting


def test_crash_charges_only_the_started_images_and_runs_them_alone() -> None:
    policy, _ = make()
    ready(policy)
    policy.pending.extend([task(1), task(2)])
    policy.dispatch()
    policy.on_message(0, P.Took(1), [])
    events: list[PoolEvent] = []
    policy.on_exit(0, "exit signal 9, SIGKILL", events, clean=False)
    assert [(e.kind, e.task.key) for e in events] == [(EventKind.RETRY, 1)]
    assert "exit signal 9" in events[0].message
    queued = {t.key: t for t in policy.pending}
    assert (queued[1].attempts, queued[1].isolate) == (1, True)
    assert (queued[2].attempts, queued[2].isolate) == (0, False)  # not started: requeued free
    assert policy.workers[0].state == WorkerState.BACKOFF
    assert policy.due() == [Spawn(0)]  # the first crash restarts at once


def test_poison_image_is_given_up_after_max_attempts_alone() -> None:
    policy, clock = make()
    poison = task(7, "poison")
    policy.pending.append(poison)
    events: list[PoolEvent] = []
    for _attempt in range(3):
        ready(policy)
        assert sent(policy.dispatch()) == {0: [7]}
        policy.on_message(0, P.Took(7), [])
        policy.on_exit(0, "exit code 1", events, clean=False)
        clock.now += 60.0  # past any back-off
    assert [e.kind for e in events] == [EventKind.RETRY, EventKind.RETRY, EventKind.GAVE_UP]
    assert events[-1].message == "worker crashed 3 times while restoring this image (exit code 1)"
    assert not policy.pending


def test_isolated_image_waits_for_an_idle_worker_and_blocks_the_others() -> None:
    policy, _ = make(n=2)
    ready(policy, 0)
    ready(policy, 1)
    policy.pending.extend(task(k) for k in (1, 2, 3, 4))
    assert sent(policy.dispatch()) == {0: [1, 2], 1: [3, 4]}
    lonely = task(9)
    lonely.isolate = True
    policy.pending.extend([lonely, task(5)])
    policy.on_message(0, ok(1), [])
    assert policy.dispatch() == []  # worker 0 has room, but the isolated image waits for an idle one
    policy.on_message(1, ok(3), [])
    policy.on_message(1, ok(4), [])
    assert sent(policy.dispatch()) == {1: [9], 0: [5]}  # alone on worker 1; the rest go on
    policy.pending.append(task(6))
    policy.on_message(0, ok(2), [])
    assert sent(policy.dispatch()) == {0: [6]}  # worker 1 gets nothing while it runs 9 alone


def test_no_progress_within_the_image_timeout_kills_the_worker_as_hung() -> None:
    policy, clock = make()
    ready(policy)
    policy.pending.append(task(1))
    policy.dispatch()
    policy.on_message(0, P.Took(1), [])
    clock.now += 59.0
    policy.on_message(0, P.Heartbeat(busy=True), [])  # alive, but no result: not progress
    assert policy.due() == []
    clock.now += 2.0
    (kill,) = policy.due()
    assert kill == Kill(0, "no result within 60 s; worker killed")
    events: list[PoolEvent] = []
    policy.on_exit(0, "exit signal 9, SIGKILL", events, clean=False)
    assert events[0].kind == EventKind.RETRY
    assert "no result within 60 s" in events[0].message


def test_a_restorer_that_reports_progress_is_slow_not_hung() -> None:
    """A large photo upscaled on a CPU takes longer than workers.image_timeout; while the worker's
    heartbeats say its restorer keeps finishing steps (tile batches), it is not killed, and once the
    count stops moving it is killed one timeout later."""
    policy, clock = make()
    ready(policy)
    policy.pending.append(task(1))
    policy.dispatch()
    policy.on_message(0, P.Took(1), [])
    for step in range(1, 11):  # 10 minutes, a step every minute
        clock.now += 59.0
        policy.on_message(0, P.Heartbeat(busy=True, progress=step), [])
        assert policy.due() == []
    clock.now += 59.0
    policy.on_message(0, P.Heartbeat(busy=True, progress=10), [])  # no step since
    assert policy.due() == []
    clock.now += 2.0
    assert policy.due() == [Kill(0, "no result within 60 s; worker killed")]


def test_progress_counts_restart_from_zero_with_a_new_worker_process() -> None:
    policy, clock = make()
    ready(policy)
    policy.pending.append(task(1))
    policy.dispatch()
    policy.on_message(0, P.Took(1), [])
    policy.on_message(0, P.Heartbeat(busy=True, progress=7), [])
    policy.on_exit(0, "exit signal 9, SIGKILL", [], clean=False)
    clock.now += 30.0
    for a in policy.due():
        assert isinstance(a, Spawn)
    ready(policy)
    policy.dispatch()
    policy.on_message(0, P.Took(1), [])
    clock.now += 59.0
    # The new process has done nothing yet: its 0 is no step, although it differs from the old 7.
    policy.on_message(0, P.Heartbeat(busy=True, progress=0), [])
    clock.now += 2.0
    assert [type(a) for a in policy.due()] == [Kill]


def test_each_started_image_adds_one_timeout_for_batching_restorers() -> None:
    policy, clock = make()
    ready(policy)
    policy.pending.extend([task(1), task(2)])
    policy.dispatch()
    policy.on_message(0, P.Took(1), [])
    policy.on_message(0, P.Took(2), [])
    clock.now += 100.0
    policy.on_message(0, P.Heartbeat(busy=True), [])
    assert policy.due() == []  # two started images: 120 s before it counts as hung
    clock.now += 21.0
    assert [type(a) for a in policy.due()] == [Kill]


def test_silence_kills_a_frozen_worker() -> None:
    policy, clock = make()
    ready(policy)
    clock.now += 61.0
    assert policy.due() == [Kill(0, "silent for 60 s (frozen)")]


def test_out_of_memory_halves_the_scale_then_fails_with_advice() -> None:
    policy, _ = make()
    ready(policy)
    policy.pending.append(task(1))
    events: list[PoolEvent] = []
    for _ in range(3):
        policy.dispatch()
        oom = FileResult(Path("/in/1.jpg"), False, error="CUDA out of memory", out_of_memory=True)
        policy.on_message(0, P.Result(1, oom), events)
    assert [e.kind for e in events] == [EventKind.RETRY, EventKind.RETRY, EventKind.DONE]
    assert events[0].message == "out of GPU memory; retrying alone at 50% scale"
    assert events[1].message == "out of GPU memory; retrying alone at 25% scale"
    result = events[2].result
    assert result is not None
    assert result.error is not None
    assert result.error.startswith("out of GPU memory even at 25% scale")
    assert "lower restore.max_side or restore.face_batch" in result.error


def test_device_errors_at_start_retire_the_worker_and_resume_tries_again() -> None:
    policy, clock = make(n=2)
    ready(policy, 1)
    for attempt in range(3):
        policy.spawned(0, 100)
        policy.on_message(0, P.Fatal(P.FatalKind.DEVICE, "CUDA error: device lost"), [])
        policy.on_exit(0, "exit code 4", [], clean=False)
        # One failed start may be a fluke: retried, until the third in a row.
        assert policy.workers[0].state == (WorkerState.RETIRED if attempt == 2 else WorkerState.BACKOFF)
        clock.now += 30.0
        policy.on_message(1, P.Heartbeat(busy=False), [])
    assert policy.workers[0].state == WorkerState.RETIRED
    assert policy.problem() is None  # worker 1 carries on
    assert policy.due() == []  # a retired worker is not restarted by itself
    policy.resume()
    assert policy.due() == [Spawn(0)]


def test_model_error_stops_at_once_until_the_files_change() -> None:
    policy, _ = make()
    policy.spawned(0, 100)
    policy.on_message(0, P.Fatal(P.FatalKind.MODEL, "GPEN-BFR-512: weights not found"), [])
    policy.on_exit(0, "exit code 3", [], clean=False)
    assert policy.workers[0].state == WorkerState.ERROR
    assert policy.stopped_for_models()
    assert policy.problem() == "cpu#0: GPEN-BFR-512: weights not found"
    # Held by the model gate until a file changes: it waits, and still says why.
    policy.hold_for_models()
    assert policy.workers[0].state == WorkerState.WAITING_FOR_MODELS
    assert policy.problem() == "cpu#0: GPEN-BFR-512: weights not found"
    policy.pending.append(task(1))
    assert [t.key for t in policy.take_back_stranded()] == [1]
    policy.retry_model_errors()
    assert policy.due() == [Spawn(0)]


def test_worker_killed_while_loading_restarts_more_and_more_slowly() -> None:
    policy, clock = make()
    waits = []
    for _ in range(4):
        policy.spawned(0, 100)
        policy.on_exit(0, "exit signal 9, SIGKILL", [], clean=False)
        waits.append(policy.workers[0].restart_at - clock.now)
        clock.now = policy.workers[0].restart_at
    assert waits == [1.0, 2.0, 4.0, 8.0]
    assert policy.workers[0].state == WorkerState.BACKOFF  # never retired for this


def test_start_timeout_kills_a_worker_stuck_loading() -> None:
    policy, clock = make()
    policy.spawned(0, 100)
    clock.now += 301.0
    assert policy.due() == [Kill(0, "did not load within 300 s")]


@pytest.mark.parametrize("state", [WorkerState.READY, WorkerState.STARTING])
def test_stop_asks_ready_workers_to_finish_and_kills_loading_ones(state: WorkerState) -> None:
    policy, _ = make()
    if state == WorkerState.READY:
        ready(policy)
        policy.pending.append(task(1))
        policy.dispatch()
        assert policy.begin_stop() == [Send(0, P.Stop())]
        policy.on_message(0, P.Bye((1,)), [])
        policy.on_exit(0, "exit code 0", [], clean=True)
        assert [t.key for t in policy.pending] == [1]  # handed back, not charged
        assert policy.pending[0].attempts == 0
    else:
        policy.spawned(0, 100)
        assert policy.begin_stop() == [Kill(0, "stopping")]
        policy.on_exit(0, "exit signal 9, SIGKILL", [], clean=False)
    assert policy.workers[0].state == WorkerState.STOPPED
    assert not policy.alive()


def test_a_result_for_a_task_already_requeued_counts_once() -> None:
    policy, _ = make()
    ready(policy)
    policy.pending.append(task(1))
    policy.dispatch()
    events: list[PoolEvent] = []
    policy.on_message(0, ok(1), events)
    policy.on_message(0, ok(1), events)
    assert [e.kind for e in events] == [EventKind.DONE]
    assert policy.snapshot()[0]["done"] == 1


def test_a_cluster_workers_node_and_gpus_reach_its_results_and_the_snapshot() -> None:
    clock = Clock()
    slot = WorkerSlot("10.0.0.2/gpu0", "cuda", "10.0.0.2 GPU 0", 0, 1, node="studio-b (10.0.0.2)")
    policy = FaultPolicy([slot], WorkerConfig(), clock=clock, start_timeout=300.0, silence_timeout=60.0)
    policy.spawned(0, None)
    # Named under its node before it is ready (or when it cannot start: its node is away).
    assert policy.snapshot()[0]["node"] == "studio-b (10.0.0.2)"
    policy.on_message(0, P.Ready(pid=None, device="cuda", threads=1, node="studio-b (10.0.0.2)"), [])
    gpu = GpuSample(0, "NVIDIA RTX 4090", 87, 3 * 2**30, 24 * 2**30, 66)
    policy.on_message(0, P.Heartbeat(False, gpus=(gpu,)), [])
    assert policy.snapshot()[0]["gpus"] == [
        {"index": 0, "name": "NVIDIA RTX 4090", "util_percent": 87, "mem_used": 3 * 2**30,
         "mem_total": 24 * 2**30, "temp_c": 66}
    ]  # fmt: skip
    policy.pending.append(task(1))
    policy.dispatch()
    events: list[PoolEvent] = []
    policy.on_message(0, ok(1), events)
    (done,) = events
    assert (done.kind, done.node) == (EventKind.DONE, "studio-b (10.0.0.2)")


def test_a_worker_whose_node_is_away_logs_once_when_it_goes_and_once_when_it_is_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    policy, clock = make()
    caplog.set_level(logging.DEBUG, logger="gpen_watch.dispatch.pool")
    away = "node 10.0.0.2 is not in the cluster (left, or not back yet)"
    for _ in range(6):  # a node away for minutes: the pool tries again and again
        policy.spawn_failed(0, away)
        assert policy.workers[0].state == WorkerState.BACKOFF
        clock.now = policy.workers[0].restart_at
        assert policy.due() == [Spawn(0)]
    loud = [r for r in caplog.records if r.levelno >= logging.INFO]
    assert [r.levelno for r in loud] == [logging.ERROR]
    assert away in loud[0].getMessage()
    assert sum(away in r.getMessage() for r in caplog.records) == 6  # the rest at debug
    assert policy.snapshot()[0]["error"] == f"cannot start a worker: {away}"
    caplog.clear()
    ready(policy)
    assert "worker cpu#0 is back after 6 failed start(s)" in [
        r.getMessage() for r in caplog.records if r.levelno >= logging.INFO
    ]
    assert policy.snapshot()[0]["error"] is None


def test_a_node_that_is_back_has_its_waiting_workers_started_at_once() -> None:
    policy, clock = make(2)
    for i in range(2):
        for _ in range(5):
            policy.spawn_failed(i, "node away")
    assert policy.workers[0].restart_at - clock.now == 30.0  # the longest back-off
    assert policy.due() == []
    policy.retry_now({"cpu#0"})  # its node joined again (cluster.membership)
    assert policy.due() == [Spawn(0)]  # the other one still waits out its back-off


def test_photos_in_a_worker_and_being_restored_are_counted_apart() -> None:
    """A worker holds photos ahead of the one its restorer works on: only those it said Took for
    are being restored; a stop gives those the grace period and hands the others back at once."""
    from gpen_watch.service.daemon import stopping_line

    policy, _ = make(images_in_flight=4)
    ready(policy)
    policy.pending.extend(task(k) for k in (1, 2, 3, 4, 5))
    assert sent(policy.dispatch()) == {0: [1, 2, 3, 4]}
    policy.on_message(0, P.Took(1), [])
    assert (policy.in_flight(), policy.restoring(), len(policy.pending)) == (4, 1, 1)
    # The engine takes photos ahead to decode them: its heartbeat says how many are past that.
    for key in (2, 3, 4):
        policy.on_message(0, P.Took(key), [])
    policy.on_message(0, P.Heartbeat(busy=True, progress=3, restoring=1), [])
    assert (policy.in_flight(), policy.restoring()) == (4, 1)
    policy.on_message(0, ok(1), [])
    assert (policy.in_flight(), policy.restoring()) == (3, 1)
    policy.on_message(0, P.Heartbeat(busy=True, progress=5, restoring=0), [])
    assert policy.restoring() == 0
    line = stopping_line(1, 4, 10.0)
    assert (
        line
        == "stopping: 1 image(s) being restored get up to 10 s to finish; 4 not started go back to the queue"
    )
    assert stopping_line(0, 0, 10.0) == "stopping: 0 image(s) being restored get up to 10 s to finish"


def test_workers_held_for_their_model_files_wait_then_start() -> None:
    from gpen_watch.dispatch.records import TransitionError

    policy, _ = make(n=2)
    policy.hold_for_models()
    assert [str(w.state) for w in policy.workers] == ["waiting for model files"] * 2
    assert policy.problem() is None  # the gate says what is missing, not the pool
    assert [s["state"] for s in policy.snapshot()] == ["waiting for model files"] * 2
    # The files are there: the service starts them.
    for i, action in enumerate(policy.start()):
        assert action == Spawn(i)
        policy.spawned(i, 100 + i)
    assert policy.workers[0].state == WorkerState.STARTING
    # One cannot load them: stopped for its files, then held until one changes, then tried again.
    events: list[PoolEvent] = []
    policy.on_message(0, P.Fatal(P.FatalKind.MODEL, "GPEN-BFR-512: weights not found"), events)
    policy.on_exit(0, "exit code 3", events, clean=False)
    assert policy.workers[0].state == WorkerState.ERROR and policy.stopped_for_models()
    policy.hold_for_models()
    assert policy.workers[0].state == WorkerState.WAITING_FOR_MODELS
    assert policy.workers[1].state == WorkerState.STARTING  # the one loading is left alone
    policy.retry_model_errors()
    assert policy.workers[0].state == WorkerState.BACKOFF
    # A move the table does not list is refused: a bug of ours, said at once.
    with pytest.raises(TransitionError, match="no move from restarting to stopping"):
        policy.workers[0].move(WorkerState.STOPPING)
