"""Restorer workers on other machines through Ray: a real cluster of network namespaces (tests/netns.py),
real `gpen-watch cluster head/join`, a real `gpen-watch run` and real Ray actors.

The cluster tests skip, saying why, where namespaces cannot be made (not root, no iproute2) or Ray
is not installed. The first test needs neither: a head that cannot be reached.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import netns
import numpy as np
import pytest
from conftest import TinyModels, assert_same_up_to_rounding, tiny_restore_config
from service_harness import ServiceProcess, finished, queue_empty, real_engine_args, write_atomic

from gpen_watch import config
from gpen_watch.base.errors import ClusterError, ConfigError
from gpen_watch.cli import cluster as cluster_cli
from gpen_watch.cli.control import format_status
from gpen_watch.cluster import token
from gpen_watch.config import WorkerConfig
from gpen_watch.dispatch import pool
from gpen_watch.dispatch.devices import WorkerSlot
from gpen_watch.gpu.nvml import GpuSample
from gpen_watch.journal import Journal
from gpen_watch.journal.connection import default_path
from gpen_watch.restore.api import FileJob
from gpen_watch.service.status import Status
from gpen_watch.service.views import views_dir, views_root

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and sockets")

FAKE = "fake_restorer:FakeRestorer"
SKIP = netns.skip_reason()
needs_netns = pytest.mark.skipif(SKIP is not None, reason=f"no namespace cluster: {SKIP}")


class Service(ServiceProcess):
    start_timeout = 120.0
    wait_timeout = 120.0

    def __init__(self, root: Path, *extra: str, ns: str | None = None, fake: bool = True, **kw: Any) -> None:
        super().__init__(root, *extra, restorer=FAKE if fake else None, **kw)
        self.ns = ns

    def command(self) -> list[str]:
        base = super().command()
        return ["ip", "netns", "exec", self.ns, *base] if self.ns else base

    def wait_done(self, n: int, timeout: float = 120.0) -> dict[str, Any]:
        return self.wait(
            lambda s: finished(s) >= n and queue_empty(s),
            timeout,
            f"{n} jobs finished",
        )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_head_that_cannot_be_reached_is_said_once_and_local_workers_carry_on(tmp_path: Path) -> None:
    tok = tmp_path / "token"
    token.ensure_token(tok)
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    svc = Service(tmp_path, "--set", f"cluster.address={address}", "--set", f"cluster.token_file={tok}")
    try:
        svc.start()
        for i in range(3):
            write_atomic(svc.inbox / f"p{i}.jpg", b"image %d" % i)
        svc.wait_done(3, timeout=60.0)
        # The bridge's probe of the head runs in its own process: on a loaded machine the local
        # worker may finish first.
        s = svc.wait(lambda s: s["problem"] is not None, 60.0, "the unreachable head said")
        assert s["queue"]["done"] == 3
        assert [w["name"] for w in s["workers"]] == ["cpu#0"]
        assert s["cluster"]["connected"] is False
        assert s["problem"] is not None
        assert f"cluster.address {address}: cannot reach the Ray head" in s["problem"]
        assert "local workers carry on" in s["problem"]
        assert svc.log_text().count("cannot reach the Ray head") == 1
        assert s["ray_loaded"] is False  # never imported: the head was not even reached
        # Local workers' jobs are recorded under this machine's host name.
        assert [(n["name"], n["local"], n["done"]) for n in s["nodes"]] == [(socket.gethostname(), True, 3)]
        with Journal.open() as journal:
            assert {j.node for j in journal.jobs("done")} == {socket.gethostname()}
    finally:
        svc.close()


def test_the_token_file_is_made_for_the_user_only_and_a_shared_one_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cfg" / "ray-token"
    assert token.ensure_token(path) is True
    assert os.stat(path).st_mode & 0o777 == 0o600
    first = path.read_text()
    assert token.ensure_token(path) is False  # kept: every node holds a copy of it
    assert path.read_text() == first
    path.chmod(0o644)
    with pytest.raises(ClusterError, match=r"readable by other users \(mode 644\); run `chmod 600"):
        token.check_token(path)
    with pytest.raises(ClusterError, match="no cluster token here; copy the file from the head machine"):
        token.check_token(tmp_path / "missing")
    assert token.ray_env(path)["RAY_AUTH_MODE"] == "token"


@pytest.mark.parametrize("address", ["192.168.1.10", "head:port", ":6379", "10.0.0.1:99999"])
def test_a_bad_cluster_address_names_the_setting_and_the_forms_allowed(tmp_path: Path, address: str) -> None:
    with pytest.raises(ConfigError, match=r'cluster.address: must be empty \(off\), "auto" or host:port'):
        config.load(None, {"cluster.address": address})
    assert (
        config.load(None, {"cluster.address": "head.studio.lan:6379"}).cluster.address
        == "head.studio.lan:6379"
    )


# --- a real cluster of namespaces ----------------------------------------------------------------


@pytest.fixture(scope="module")
def ns_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[netns.Cluster]:
    if SKIP is not None:
        pytest.skip(f"no namespace cluster: {SKIP}")
    with netns.cluster(tmp_path_factory.mktemp("cluster")) as c:
        yield c


def cluster_args(c: netns.Cluster) -> list[str]:
    return [
        "--set", f"cluster.address={c.address}",
        "--set", f"cluster.token_file={c.token}",
        "--set", "cluster.local_workers=false",
    ]  # fmt: skip


def remote_workers(s: dict[str, Any], c: netns.Cluster) -> list[dict[str, Any]]:
    return [w for w in s["workers"] if w["name"].startswith(f"{c.node_ip}/")]


@pytest.mark.slow  # a Ray cluster across two network namespaces: tens of seconds each
@needs_netns
def test_the_head_made_a_private_token_and_a_node_without_it_is_refused(ns_cluster: netns.Cluster) -> None:
    c = ns_cluster
    assert os.stat(c.token).st_mode & 0o077 == 0
    bad = c.root / "bad-token"
    bad.write_text("f" * 64)
    bad.chmod(0o600)
    bad_cfg = c.root / "bad.toml"
    bad_cfg.write_text(f'[cluster]\ntoken_file = "{bad}"\n')
    proc = c.gpen_watch(
        c.node_ns,
        "join",
        c.address,
        "--bind",
        c.node_ip,
        "--temp-dir",
        str(c.ray_dir()),
        check=False,
        config=bad_cfg,
        # Not the node's own state folder, which records that it joined: a machine that has not.
        env={"XDG_STATE_HOME": str(c.root / "state-other")},
    )
    assert proc.returncode == 2
    # Said at once, before Ray's ~20 s of retries end in the refusal.
    assert proc.stdout == f"waiting for the head at {c.address} to accept this node...\n"
    assert f"the cluster refused this machine's token ({bad})" in proc.stderr
    assert "Traceback" not in proc.stderr
    # On the head, right after `cluster head`, with no cluster.address set: the head it started.
    no_address = c.root / "no-address.toml"
    no_address.write_text(f'[cluster]\ntoken_file = "{c.token}"\n')
    status = c.gpen_watch(c.head_ns, "status", config=no_address).stdout
    assert status.count("alive") == 2, status  # the head and the node that had the token
    # Each node's GPUs, read by NVML on that node: none on this machine, and the node says its CPU.
    lines = status.splitlines()
    node = next(i for i, line in enumerate(lines) if line.startswith(f"{c.node_ip} "))
    assert lines[node + 1] == "  no GPU (NVML finds none); its CPU restores photos", status
    head = next(i for i, line in enumerate(lines) if line.startswith(f"{c.head_ip} "))
    assert lines[head + 1] == "  no GPU (NVML finds none)", status


@pytest.mark.slow
@needs_netns
def test_photos_are_restored_by_the_remote_node_as_by_a_local_worker(
    ns_cluster: netns.Cluster, tmp_path: Path, tiny_models: TinyModels, astronaut_bgr: np.ndarray
) -> None:
    c = ns_cluster
    photo = tmp_path / "astronaut.jpg"
    cv2.imwrite(str(photo), astronaut_bgr, [cv2.IMWRITE_JPEG_QUALITY, 90])
    (tmp_path / "svc").mkdir()
    # PNG output: the engine re-encodes, so the bytes are the engine's, not a copy of the input.
    svc = Service(
        tmp_path / "svc",
        *real_engine_args(tiny_models),
        "--set",
        "output.format=png",
        *cluster_args(c),
        ns=c.head_ns,
        fake=False,
    )
    try:
        svc.start()
        write_atomic(svc.inbox / "astronaut.jpg", photo.read_bytes())
        s = svc.wait_done(1, timeout=180.0)
        assert s["queue"]["done"] == 1
        (remote,) = remote_workers(s, c)
        assert remote["done"] == 1
        assert s["ray_loaded"] is False  # Ray runs in the cluster bridge, a child process
        assert remote["device"] == f"{c.node_ip} CPU"
        # torch computes on as many threads as the node's cores, read on the actor's restorer
        # thread (Ray starts an actor's process with OMP_NUM_THREADS=1).
        assert remote["threads"] == len(os.sched_getaffinity(0)) > 1, remote
        assert all(w["done"] == 0 for w in s["workers"] if w is not remote)
        # The journal and status say which node restored it: its host name and address, as Ray knows them.
        node = f"{socket.gethostname()} ({c.node_ip})"
        assert remote["node"] == node
        with Journal.open() as journal:
            (job,) = journal.jobs("done")
        assert job.node == node
        # Its views were written there and sent back with the result, into the job's own folder.
        views = views_dir(views_root(default_path()), job.id)
        assert json.loads((views / "faces.json").read_text())["faces"][0]["restored"] is True
        assert {"before.jpg", "after.jpg", "thumb.jpg", "faces/0.after.jpg"} <= {
            p.relative_to(views).as_posix() for p in views.rglob("*")
        }
        (entry,) = [n for n in s["nodes"] if not n["local"]]
        # No NVML there: no GPU readings, and its one worker is its CPU (`cluster join --cpu`).
        assert (entry["name"], entry["up"], entry["done"], entry["gpus"]) == (node, True, 1, [])
        assert entry["cpu_only"] is True
        # The actor's process started with the engine's malloc settings (its restorer's thread
        # would otherwise allocate from an arena that maps fresh pages for every pass).
        environ = Path(f"/proc/{remote['pid']}/environ").read_bytes().split(b"\0")
        assert b"MALLOC_ARENA_MAX=1" in environ
        assert b"MALLOC_MMAP_MAX_=0" in environ
        shown = format_status(Status.from_json(s))
        assert f"  {node} (up): 1 worker, in flight 0, processed 1" in shown, shown
        # The model sets the actor holds reach the status too, with its pings (an actor only
        # answers calls): the global set, needed by no inbox of its own.
        s = svc.wait(
            lambda s: any(w["model_sets"] for w in remote_workers(s, c)), 60.0, "the node's model sets"
        )
        (remote,) = remote_workers(s, c)
        assert remote["model_sets"] == [{"networks": tiny_models.gpen.name, "inboxes": []}], remote
        (out,) = svc.outbox.glob("*.png")
        by_remote = out.read_bytes()
    finally:
        svc.close()

    local = pool.Pool(
        [WorkerSlot("cpu#0", "cpu", "cpu", None, 1, {"OMP_NUM_THREADS": "1"})],
        tiny_restore_config(tiny_models),
        WorkerConfig(image_timeout=120.0),
        child_env={"PYTHONPATH": str(netns.TESTS_DIR)},
        heartbeat_s=0.5,
    )
    local.start()
    try:
        dst = tmp_path / "local.tmp"
        local.submit([pool.Task(1, FileJob(photo, dst, format="png"))])
        events: list[pool.PoolEvent] = []
        for _ in range(300):
            if any(e.kind == pool.DONE for e in events):
                break
            events += local.poll(1.0)
        (done,) = [e for e in events if e.kind == pool.DONE]
        assert done.result is not None, done.result
        assert done.result.ok, done.result
        # The same pixels up to rounding: the node's actor and this worker run their own numbers
        # of threads, so their kernels may sum in other orders (conftest.same_up_to_rounding).
        assert_same_up_to_rounding(
            cv2.imdecode(np.frombuffer(dst.read_bytes(), np.uint8), cv2.IMREAD_UNCHANGED),
            cv2.imdecode(np.frombuffer(by_remote, np.uint8), cv2.IMREAD_UNCHANGED),
        )
    finally:
        local.begin_stop()
        local.kill_all()


@pytest.mark.slow
@needs_netns
def test_a_node_killed_mid_batch_loses_no_photo_and_work_resumes_when_it_rejoins(
    ns_cluster: netns.Cluster, tmp_path: Path
) -> None:
    c = ns_cluster
    svc = Service(
        tmp_path,
        *cluster_args(c),
        "--set",
        "workers.images_in_flight=3",
        ns=c.head_ns,
        env={"FAKE_SLOW": "1"},
    )
    names = [f"slow{i}.jpg" for i in range(8)]
    try:
        svc.start()
        for name in names:
            write_atomic(svc.inbox / name, name.encode())
        svc.wait(
            lambda s: any(w["in_flight"] > 0 for w in remote_workers(s, c)),
            what="photos in flight on the node",
        )
        c.kill_all(c.node_ns)  # its raylet, its actors, everything: the machine lost power
        s = svc.wait(
            lambda s: any(w["state"] == "restarting" for w in remote_workers(s, c)),
            what="the node's worker seen gone",
        )
        c.join_node()
        s = svc.wait_done(len(names), timeout=180.0)
        assert s["queue"]["done"] == len(names)
        assert sorted(p.name for p in svc.outbox.iterdir()) == sorted(names)
        for name in names:
            assert (svc.outbox / name).read_bytes() == name.encode()
        journal = Journal.open()
        try:
            done = journal.jobs("done")
        finally:
            journal.close()
        assert sorted(j.source.name for j in done) == sorted(names)  # each photo once, none twice
        retries = svc.log_text().count("will retry")
        assert retries >= 1, svc.logs()  # the photos in flight were charged an attempt and requeued
        # The journal counts those attempts too: the claim's, and the one the node's death cost.
        assert sum(j.attempts for j in done) >= len(names) + 1, [(j.source.name, j.attempts) for j in done]
        # Said in words, naming the node; Ray's exception text only at debug (not in this log).
        assert f"node {c.node_ip} " in svc.log_text()
        for raw in ("RpcError", "ActorUnavailableError", "ActorDiedError", "RayActorError"):
            assert raw not in svc.log_text(), svc.logs()
        # While the node was away its worker said so once, not at every retry, and once it was back.
        log_text = svc.log_text()
        (name,) = [w["name"] for w in remote_workers(s, c)]
        said = log_text.count(f"worker {name}: cannot start a worker")
        said += log_text.count(f"worker {name} failed to start")
        assert said <= 1, log_text  # its death was said already (the retries that follow are debug)
    finally:
        svc.close()


@pytest.mark.slow
@needs_netns
def test_the_service_killed_mid_batch_and_restarted_restores_every_photo_once(
    ns_cluster: netns.Cluster, tmp_path: Path
) -> None:
    c = ns_cluster
    svc = Service(tmp_path, *cluster_args(c), ns=c.head_ns)
    names = [f"slow{i}.jpg" for i in range(6)]  # a second each on the node (fake_restorer)
    try:
        svc.start()
        for name in names:
            write_atomic(svc.inbox / name, name.encode())
        svc.wait(lambda s: any(w["in_flight"] > 0 for w in remote_workers(s, c)), what="photos on the node")
        svc.kill()  # SIGKILL: its Ray connection dies with it, and Ray ends the actors it owned
        svc.start()
        s = svc.wait_done(len(names), timeout=180.0)
        assert s["queue"]["done"] == len(names)
        assert s["queue"]["duplicate"] == 0
        assert sorted(p.name for p in svc.outbox.iterdir()) == sorted(names)  # no temp file left either
        journal = Journal.open()
        try:
            done = journal.jobs("done")
        finally:
            journal.close()
        assert sorted(j.source.name for j in done) == sorted(names)
    finally:
        svc.close()


@pytest.mark.slow
@needs_netns
def test_a_node_that_joins_mid_run_gets_a_worker_and_takes_the_queue(
    ns_cluster: netns.Cluster, tmp_path: Path
) -> None:
    c = ns_cluster
    # Not `cluster leave`: `ray stop` ends every Ray process of the machine, and the namespaces
    # share one, the head's included.
    c.kill_all(c.node_ns)
    svc = Service(tmp_path, *cluster_args(c), ns=c.head_ns)
    names = [f"p{i}.jpg" for i in range(3)]
    try:
        try:
            c.wait_nodes(1)  # the head has seen the node go
            svc.start(wait=False)  # ready means its workers are: there is none yet
            for name in names:
                write_atomic(svc.inbox / name, name.encode())
            s = svc.wait(
                lambda s: s["queue"]["queued"] == len(names) and s["problem"] is not None,
                what="the photos queued and the missing worker said",
            )
            assert s["workers"] == []
            assert "no worker yet: no cluster node offers a GPU or CPU" in s["problem"]
            joined = time.monotonic()
        finally:
            c.join_node()  # also when the test failed: the next tests need the node
        s = svc.wait(
            lambda s: any(w["state"] in ("idle", "busy") for w in remote_workers(s, c)),
            what="the node's worker ready",
        )
        print(f"node joined -> its worker ready: {time.monotonic() - joined:.1f} s")
        s = svc.wait_done(len(names))
        assert s["queue"]["done"] == len(names)
        assert sorted(p.name for p in svc.outbox.iterdir()) == sorted(names)
        (remote,) = remote_workers(s, c)
        assert remote["done"] == len(names)
    finally:
        svc.close()


@pytest.mark.slow
@needs_netns
def test_a_ray_cluster_the_user_started_with_ray_start_is_joined_and_used(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    # `ray start --head`, then `cluster join`, on one core: Ray counts both cores of the machine.
    with netns.cluster(tmp_path / "plain", plain_head=True, node_cpus="1") as c:
        status = c.gpen_watch(c.head_ns, "status").stdout
        assert status.count(": alive") == 2, status
        (tmp_path / "svc").mkdir()
        svc = Service(tmp_path / "svc", *cluster_args(c), ns=c.head_ns)
        names = [f"p{i}.jpg" for i in range(3)]
        try:
            svc.start()
            for name in names:
                write_atomic(svc.inbox / name, name.encode())
            s = svc.wait_done(len(names))
            (remote,) = remote_workers(s, c)
            assert remote["done"] == len(names)
            assert sorted(p.name for p in svc.outbox.iterdir()) == sorted(names)
            # Its restorer runs as many threads as the cores it may use, not as Ray counts.
            assert remote["threads"] == 1
        finally:
            svc.close()


def actor_leftovers(c: netns.Cluster) -> list[str]:
    """What the node's actors left in its temp folder (the one folder that holds their scratch
    folders aside)."""
    keep = c.node_tmp / "gpen-watch-actors"
    return sorted(
        str(p.relative_to(c.node_tmp))
        for p in c.node_tmp.rglob("*")
        if p != keep and "gpen-watch-actor" in str(p.relative_to(c.node_tmp))
    )


@pytest.mark.slow
@needs_netns
def test_the_node_keeps_nothing_of_the_photos_once_the_service_is_done_with_it(
    ns_cluster: netns.Cluster, tmp_path: Path
) -> None:
    c = ns_cluster
    svc = Service(tmp_path, *cluster_args(c), ns=c.head_ns)
    first = [f"slow{i}.jpg" for i in range(4)]
    more = [f"p{i}.jpg" for i in range(6)]
    try:
        svc.start()
        for name in first:
            write_atomic(svc.inbox / name, name.encode())
        svc.wait(lambda s: any(w["in_flight"] > 0 for w in remote_workers(s, c)), what="photos on the node")
        # Ray ends the actor that holds these photos without a chance to clean up after itself.
        svc.kill()
        svc.start()
        for name in more:
            write_atomic(svc.inbox / name, name.encode())
        s = svc.wait_done(len(first) + len(more))
        assert sum(w["done"] for w in remote_workers(s, c)) >= 1
        assert svc.stop() == 0
    finally:
        svc.close()
    assert sorted(p.name for p in svc.outbox.iterdir()) == sorted(first + more)
    assert actor_leftovers(c) == []


@pytest.mark.slow
@needs_netns
def test_a_second_join_or_head_says_what_runs_there_and_starts_nothing(ns_cluster: netns.Cluster) -> None:
    c = ns_cluster
    for ns, args, said in (
        (
            c.node_ns,
            ("join", c.address, "--bind", c.node_ip, "--cpu", "--temp-dir", str(c.ray_dir())),
            f"this machine is already joined to the cluster at {c.address}; nothing started",
        ),
        (
            c.head_ns,
            ("head", "--bind", c.head_ip, "--port", str(c.port), "--temp-dir", str(c.ray_dir())),
            f"this machine already runs the cluster's head at {c.address}; nothing started",
        ),
    ):
        before = set(c.pids(ns))
        proc = c.gpen_watch(ns, *args)
        assert (proc.stdout, proc.stderr) == (said + "\n", ""), proc
        # No `ray start`: nothing new in that machine (Ray's log monitor of a failed start was
        # left behind, and `leave` did not know it).
        assert set(c.pids(ns)) <= before
    c.wait_nodes(2)


def ray_daemons(c: netns.Cluster, ns: str) -> set[int]:
    return c.ray_daemons(ns)


@pytest.mark.slow
@needs_netns
def test_leave_stops_the_ray_node_gpen_watch_started_and_no_other_ray_process(
    ns_cluster: netns.Cluster,
) -> None:
    c = ns_cluster
    head = ray_daemons(c, c.head_ns)
    assert len(head) == 2  # the head's GCS and raylet: another machine's Ray, in this test
    assert ray_daemons(c, c.node_ns)
    try:
        out = c.gpen_watch(c.node_ns, "leave").stdout
        assert "the Ray node gpen-watch started here is stopped" in out
        assert c.pids(c.node_ns) == []  # the raylet, its agents and workers: all gone
        assert ray_daemons(c, c.head_ns) == head
        c.wait_nodes(1)
        again = c.gpen_watch(c.node_ns, "leave").stdout
        assert "no Ray node that gpen-watch started runs on this machine: nothing stopped" in again
    finally:
        c.kill_all(c.node_ns)
        c.join_node()
    c.wait_nodes(2)
    assert ray_daemons(c, c.head_ns) == head


@pytest.mark.slow
@needs_netns
def test_a_head_that_goes_away_leaves_the_service_on_local_workers_and_it_reconnects_when_back(
    ns_cluster: netns.Cluster, tmp_path: Path
) -> None:
    c = ns_cluster
    svc = Service(
        tmp_path,
        "--set",
        f"cluster.address={c.address}",
        "--set",
        f"cluster.token_file={c.token}",
        "--set",
        "workers.images_in_flight=3",
        ns=c.head_ns,
        env={"FAKE_SLOW": "2"},
    )
    # Enough work that the node still holds photos when the service notices that its head is
    # gone (the node's actors go on for a while without their head).
    names = [f"slow{i}.jpg" for i in range(20)]
    try:
        svc.start()
        for name in names:
            write_atomic(svc.inbox / name, name.encode())
        svc.wait(
            lambda s: any(w["in_flight"] > 0 for w in remote_workers(s, c)),
            what="photos in flight on the node",
        )
        assert svc.proc is not None
        c.kill_ray(c.head_ns, keep=svc.proc.pid)  # the head's Ray processes, not the service
        killed = time.monotonic()
        s = svc.wait_done(len(names), timeout=180.0)  # the local worker finishes the rest
        assert sorted(p.name for p in svc.outbox.iterdir()) == sorted(names)
        # Ray ended a driver whose head was away after about 60 s: the service outlives that.
        while time.monotonic() - killed < 95.0:
            assert svc.alive(), svc.logs()
            s = svc.status()
            time.sleep(5.0)
        assert s["cluster"]["connected"] is False
        assert s["problem"] is not None
        assert f"the Ray cluster at {c.address} is unreachable" in s["problem"], s["problem"]
        assert s["ray_loaded"] is False  # Ray lives in the bridge process, never in the service
        log_text = svc.log_text()
        assert log_text.count("is unreachable") == 1, log_text  # said once, not at every retry
        assert "will retry" in log_text  # the node's photos in flight were requeued
        with Journal.open() as journal:
            done = journal.jobs("done")
        assert sorted(j.source.name for j in done) == sorted(names)  # each photo once
        assert s["queue"]["duplicate"] == 0
        by_remote = sum(w["done"] for w in remote_workers(s, c))

        # The head comes back with the same token; the node, whose raylet ended with its head,
        # joins again. The service reconnects and the node restores new photos again.
        c.kill_all(c.node_ns)
        c.start_head()
        c.join_node()
        s = svc.wait(
            lambda s: s["cluster"]["connected"] and any(w["state"] == "idle" for w in remote_workers(s, c)),
            timeout=120.0,
            what="the node's worker back",
        )
        assert s["problem"] is None
        more = [f"slowagain{i}.jpg" for i in range(6)]
        for name in more:
            write_atomic(svc.inbox / name, name.encode())
        s = svc.wait_done(len(names) + len(more), timeout=120.0)
        assert sum(w["done"] for w in remote_workers(s, c)) > by_remote
        assert sorted(p.name for p in svc.outbox.iterdir()) == sorted(names + more)
        assert "connected to the Ray cluster at" in svc.log_text()
    finally:
        svc.close()


def test_cluster_status_shows_each_nodes_gpus_as_nvml_read_them_there_and_says_so_where_none() -> None:
    # NVML readings stand in for a node's GPUs (there is no GPU here); the rest is the real formatter.
    h200 = GpuSample(0, "NVIDIA H200", 87, 12 << 30, 140 << 30, 64)
    nodes = [
        {"NodeID": "a", "NodeManagerAddress": "10.0.0.1", "NodeManagerHostname": "head", "Alive": True,
         "Resources": {"CPU": 8}},
        {"NodeID": "b", "NodeManagerAddress": "10.0.0.2", "NodeManagerHostname": "gpu-box", "Alive": True,
         "Resources": {"CPU": 16, "GPU": 1}},
        {"NodeID": "c", "NodeManagerAddress": "10.0.0.3", "NodeManagerHostname": "laptop", "Alive": True,
         "Resources": {"CPU": 4, "gpen_watch_cpu": 1}},
        {"NodeID": "d", "NodeManagerAddress": "10.0.0.4", "NodeManagerHostname": "slow", "Alive": True,
         "Resources": {"CPU": 4, "GPU": 2}},
    ]  # fmt: skip
    text = cluster_cli.format_status(nodes, [], {"a": (), "b": (h200,), "c": ()})
    lines = text.splitlines()
    assert lines[0] == "10.0.0.1 (head): alive, offers 0 GPU(s)"
    assert lines[1] == "  no GPU (NVML finds none)"
    assert lines[3] == "  GPU 0 NVIDIA H200: 87%, 12.0/140.0 GiB, 64 °C"
    assert lines[5] == "  no GPU (NVML finds none); its CPU restores photos"
    assert lines[7] == f"  GPUs: not read (the node did not answer within {cluster_cli.GPU_READ_S:g} s)"


@pytest.mark.slow
@needs_netns
def test_a_head_whose_gcs_died_leaves_no_ray_process_behind_once_the_service_notices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "c").mkdir()
    with netns.cluster(tmp_path / "c", join=False) as c:
        # The service runs on the head's machine: the same state folder as `cluster head`.
        monkeypatch.setenv("XDG_STATE_HOME", c.ns_env(c.head_ns)["XDG_STATE_HOME"])
        (tmp_path / "svc").mkdir()
        svc = Service(
            tmp_path / "svc", "--set", f"cluster.address={c.address}", "--set", f"cluster.token_file={c.token}",
            ns=c.head_ns,
        )  # fmt: skip
        try:
            svc.start()
            svc.wait(lambda s: s["cluster"]["connected"], what="connected to the head")
            assert svc.proc is not None
            ray = set(c.pids(c.head_ns)) - netns.descendants(svc.proc.pid)
            (gcs,) = c.ray_daemons(c.head_ns, (b"/gcs_server",))
            left = ray - {gcs}
            assert len(left) >= 3, left  # its raylet, monitor, log monitor (and more)
            os.kill(gcs, signal.SIGKILL)
            svc.wait(
                lambda s: not (left & set(c.pids(c.head_ns))),
                timeout=120.0,
                what="the dead head's monitor, log monitor and raylet stopped",
            )
            assert svc.alive()
            assert (
                "the cluster head on this machine has died (its GCS is gone): stopped the" in svc.log_text()
            )
        finally:
            svc.close()
