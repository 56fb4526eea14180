"""`gpen-watch cluster ...` where no Ray process is needed: what the commands say and refuse, and
what the service says when a remote worker is lost. The commands run in-process (``cli.main``);
a real process (`sleep`) stands for a recorded Ray daemon, `ray` itself is never run here.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpen_watch import cli
from gpen_watch.base.errors import ClusterError
from gpen_watch.cli import cluster as cluster_cli
from gpen_watch.cluster import started, token
from gpen_watch.platform import program

pytestmark = pytest.mark.skipif(not started.supported(), reason="the node's record needs Linux's /proc")


@pytest.fixture
def tok(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    token.ensure_token(path)
    return path


@pytest.fixture
def cfg(tmp_path: Path, tok: Path) -> Path:
    path = tmp_path / "cluster.toml"
    path.write_text(f'[cluster]\ntoken_file = "{tok}"\n', encoding="utf-8")
    return path


@pytest.fixture
def ray_never_runs(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every `ray` command the code would run, recorded instead of run."""
    calls: list[list[str]] = []

    def fake(cmd: list[str], path: Path) -> None:
        calls.append(cmd)

    monkeypatch.setattr(cluster_cli, "_ray", fake)
    return calls


def standing_in() -> Iterator[subprocess.Popen[bytes]]:
    """A real process for a Ray daemon in the record."""
    proc = subprocess.Popen(["sleep", "300"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def record(procs: list[tuple[subprocess.Popen[bytes], str]], role: str, address: str) -> None:
    """The record `cluster head/join` writes, of these processes (its file format)."""
    entries = [
        {
            "pid": p.pid,
            "started": started._start_time(str(p.pid)),
            "command": command,
            "role": role,
            "address": address,
        }
        for p, command in procs
    ]
    started.record_path().parent.mkdir(parents=True, exist_ok=True)
    started.record_path().write_text(json.dumps(entries), encoding="utf-8")


@pytest.fixture
def daemon() -> Iterator[subprocess.Popen[bytes]]:
    yield from standing_in()


@pytest.fixture
def second_daemon() -> Iterator[subprocess.Popen[bytes]]:
    yield from standing_in()


def test_a_second_join_says_the_machine_is_joined_and_starts_nothing(
    cfg: Path,
    daemon: subprocess.Popen[bytes],
    ray_never_runs: list[list[str]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    record([(daemon, "/venv/ray/core/src/ray/raylet/raylet")], started.NODE, "10.0.0.1:6379")
    assert cli.main(["cluster", "--config", str(cfg), "join", "10.0.0.1:6379", "--cpu"]) == 0
    out = capsys.readouterr()
    assert out.out == "this machine is already joined to the cluster at 10.0.0.1:6379; nothing started\n"
    # Another cluster: refused, naming the one it is in and what to do.
    assert cli.main(["cluster", "--config", str(cfg), "join", "10.9.9.9:6379"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "gpen-watch: error: this machine is already joined to the cluster at 10.0.0.1:6379; nothing "
        f"started; `{program.command('cluster leave')}` stops it first\n"
    )
    # So is a head on a machine that is a node.
    assert cli.main(["cluster", "--config", str(cfg), "head", "--bind", "10.0.0.2"]) == 2
    assert "already joined to the cluster at 10.0.0.1:6379" in capsys.readouterr().err
    assert ray_never_runs == []
    assert daemon.poll() is None  # the node is left as it was


def test_a_second_head_says_it_runs_and_starts_nothing(
    cfg: Path,
    daemon: subprocess.Popen[bytes],
    second_daemon: subprocess.Popen[bytes],
    ray_never_runs: list[list[str]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    gcs = "/venv/ray/core/src/ray/gcs/gcs_server --session-dir=/tmp/ray/session_1"
    record(
        [(daemon, gcs), (second_daemon, "python /venv/ray/autoscaler/_private/monitor.py")],
        started.HEAD,
        "10.0.0.1:6379",
    )
    assert cli.main(["cluster", "--config", str(cfg), "head", "--bind", "10.0.0.1"]) == 0
    assert (
        capsys.readouterr().out
        == "this machine already runs the cluster's head at 10.0.0.1:6379; nothing started\n"
    )
    assert cli.main(["cluster", "--config", str(cfg), "join", "10.0.0.1:6379"]) == 2
    assert "already runs the cluster's head at 10.0.0.1:6379" in capsys.readouterr().err
    assert ray_never_runs == []


def test_a_head_whose_gcs_died_leaves_nothing_running_once_a_command_looks(
    cfg: Path,
    daemon: subprocess.Popen[bytes],
    second_daemon: subprocess.Popen[bytes],
    ray_never_runs: list[list[str]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    gcs = "/venv/ray/core/src/ray/gcs/gcs_server --session-dir=/tmp/ray/session_1"
    monitor = "python /venv/ray/autoscaler/_private/monitor.py"
    record([(daemon, gcs), (second_daemon, monitor)], started.HEAD, "10.0.0.1:6379")
    daemon.kill()
    daemon.wait()
    assert started.running() is None  # a head without its GCS is not running
    # The next head starts: what the dead one left is stopped first, and the new one is not refused.
    assert cli.main(["cluster", "--config", str(cfg), "head", "--bind", "10.0.0.1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        "the cluster head gpen-watch started here had died (its GCS is gone, and Ray does not start it "
        "again): stopped the 1 Ray process(es) it left running\n"
    )
    assert second_daemon.wait(5) != 0  # stopped, not left to hold 80 MB
    assert [c[:2] for c in ray_never_runs] == [["start", "--head"]]


def test_a_head_record_that_names_no_gcs_is_never_taken_for_a_dead_head(
    daemon: subprocess.Popen[bytes],
) -> None:
    record([(daemon, "python /venv/ray/autoscaler/_private/monitor.py")], started.HEAD, "10.0.0.1:6379")
    assert started.stop_dead_head() == 0  # it cannot tell: nothing is stopped
    assert daemon.poll() is None
    assert started.running() == started.Running(started.HEAD, "10.0.0.1:6379", kept=False)


def test_a_killed_node_waiting_unreaped_is_not_taken_for_a_running_one(
    daemon: subprocess.Popen[bytes],
) -> None:
    record([(daemon, "/venv/ray/core/src/ray/raylet/raylet")], started.NODE, "10.0.0.1:6379")
    assert started.running() is not None
    daemon.kill()  # not waited for: a zombie, as Ray's daemons are under init until reaped
    stat = Path(f"/proc/{daemon.pid}/stat")
    while stat.read_text().rsplit(")", 1)[1].split()[0] != "Z":
        pass  # the kill lands within microseconds
    assert started.running() is None


def test_a_join_says_what_it_waits_for_before_ray_starts(
    cfg: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    said_before: list[str] = []

    def fake(cmd: list[str], path: Path) -> None:
        said_before.append(capsys.readouterr().out)  # what the user saw while `ray start` runs

    monkeypatch.setattr(cluster_cli, "_ray", fake)
    join = ["cluster", "--config", str(cfg), "join", "10.0.0.1:6379", "--bind", "10.0.0.2", "--cpu"]
    assert cli.main(join) == 0
    assert said_before == ["waiting for the head at 10.0.0.1:6379 to accept this node...\n"]
    gpus = len(cluster_cli.read_gpus())  # NVML on this machine: none, where there is no GPU
    assert capsys.readouterr().out == (
        f"joined the cluster at 10.0.0.1:6379 as 10.0.0.2 ({cluster_cli.offers(gpus, True)})\n"
    )


def test_what_a_joining_node_offers_is_said_as_it_is() -> None:
    assert cluster_cli.offers(0, True) == "its CPU; NVML finds no GPU on this machine"
    assert cluster_cli.offers(2, True) == "its 2 GPU(s) and its CPU"
    assert cluster_cli.offers(1, False) == "its 1 GPU(s)"
    assert cluster_cli.offers(0, False) == "nothing: NVML finds no GPU on this machine, and no --cpu"


def test_status_on_the_head_needs_no_setting(
    cfg: Path, daemon: subprocess.Popen[bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    from gpen_watch import config

    loaded = config.load(cfg)
    with pytest.raises(
        ClusterError, match=r"cluster\.address is not set and gpen-watch started no cluster node here"
    ):
        cluster_cli.status_address(loaded)
    gcs = "/venv/ray/core/src/ray/gcs/gcs_server --session-dir=/tmp/ray/session_1"
    record([(daemon, gcs)], started.HEAD, "10.0.0.1:6379")
    assert cluster_cli.status_address(loaded) == "10.0.0.1:6379"  # the head gpen-watch started here
    assert cluster_cli.status_address(config.load(cfg, {"cluster.address": "auto"})) == "auto"


def test_a_lost_remote_worker_is_said_in_words_with_what_becomes_of_its_photos() -> None:
    exceptions = pytest.importorskip("ray.exceptions")
    from gpen_watch.cluster.remote import lost_words

    raw = exceptions.ActorUnavailableError(
        "The actor is temporarily unavailable: RpcError: RPC Error message: Socket closed; RPC Error details:",
        b"\0" * 16,
    )
    said = lost_words(raw, "10.0.0.2")
    assert said == (
        "node 10.0.0.2 stopped answering: the machine is off or off the network, or its Ray processes "
        "died; its photos are requeued"
    )
    assert "RpcError" not in said
    assert lost_words(exceptions.NodeDiedError("x"), "10.0.0.2").startswith("node 10.0.0.2 died or left")
    other = lost_words(RuntimeError("grpc status 14"), "10.0.0.2")
    assert other == (
        "lost the worker on node 10.0.0.2: Ray raised RuntimeError, the debug log has its text; its photos are requeued"
    )
