"""`gpen-watch cluster join --stay`: a node that joins again by itself, in a real namespace cluster.

The keeper runs in the node's namespace as a login entry would run it; the head is stopped and
started again as a rebooted head machine would be (tests/netns.py). Skips where namespaces
cannot be made or Ray is not installed, saying why.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import netns
import pytest

from gpen_watch.base.errors import ClusterError
from gpen_watch.cluster import raylib, stay, token

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
SKIP = netns.skip_reason()
needs_netns = pytest.mark.skipif(SKIP is not None, reason=f"no namespace cluster: {SKIP}")


def wait_for(check: Callable[[], bool], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {what}")
        time.sleep(0.5)


def test_the_keeper_says_a_lasting_reason_once_and_stops_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No head at the address: said once, tried again with a back-off, until stopped."""
    monkeypatch.setattr(stay, "ray_cli", lambda: "ray")  # never run: the head does not answer
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    lines: list[str] = []
    plan = stay.NodePlan(("start",), tmp_path / "token", "joined {bind}", head_address=f"127.0.0.1:{port}")
    keeper = stay.Keeper(plan, lines.append)
    thread = threading.Thread(target=keeper.run)
    thread.start()
    wait_for(lambda: len(lines) > 0, "the first line", 10)
    time.sleep(3.5)  # tries at 0, 1 and 3 s
    keeper.stop.set()
    thread.join(10)
    assert not thread.is_alive()
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"cannot reach the cluster's head at 127.0.0.1:{port} (")
    assert lines[0].endswith(
        "waiting for it (`gpen-watch cluster head` starts it there); trying again every 30 s at most"
    )
    assert lines[1] == "stopped: this machine's Ray node is down"
    assert keeper.runs == 0


def test_without_ray_the_keeper_says_so_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(raylib.sys, "executable", str(tmp_path / "python"))  # no `ray` beside it
    monkeypatch.setenv("PATH", str(tmp_path))
    plan = stay.NodePlan(("start",), tmp_path / "token", "joined {bind}", head_address="127.0.0.1:1")
    with pytest.raises(ClusterError, match="the `ray` command is not on PATH; install it with"):
        stay.Keeper(plan, print).run()


def test_a_refused_token_is_said_as_the_plain_join_says_it(tmp_path: Path) -> None:
    tail = ["...", "ray.exceptions.AuthenticationError: InvalidAuthToken: the token does not match"]
    said = raylib.ray_failure("start", "\n".join(tail), 1, tmp_path / "token")
    assert said == token.refused_token(tmp_path / "token")
    assert raylib.ray_failure("start", "\nboom\nmore", 1, tmp_path / "t") == "`ray start` failed: boom; more"
    assert raylib.ray_failure("start", "", 3, tmp_path / "t") == "`ray start` failed: exit code 3"


@pytest.mark.slow
@needs_netns
def test_a_kept_node_waits_for_its_head_and_joins_again_when_the_head_restarts(tmp_path: Path) -> None:
    with netns.cluster(tmp_path, join=False) as c:
        c.kill_all(c.head_ns)  # the head machine is still off when the node's login starts
        out = tmp_path / "keeper.out"
        keeper = c.keep_node(out)
        try:
            said = lambda: out.read_text(encoding="utf-8")  # noqa: E731
            wait_for(lambda: "cannot reach the cluster's head" in said(), "the keeper saying it waits", 60)
            time.sleep(8.0)  # tries at 1, 2 and 4 s: the lasting reason is said once
            assert said().count("cannot reach the cluster's head") == 1, said()
            assert keeper.poll() is None

            c.start_head()  # the head machine is up
            c.wait_nodes(2)
            joined = f"joined the cluster at {c.address} as {c.node_ip} (its CPU; NVML finds no GPU on this machine)"
            assert said().count(joined) == 1, said()

            # The head restarts (a new Ray cluster with the same token): the node's raylet ends with
            # the old one, and the keeper starts it again in the new one, with no one at the node.
            c.kill_all(c.head_ns)
            c.start_head()
            wait_for(lambda: said().count(joined) == 2, "the node joined again", 150)
            c.wait_nodes(2)
            assert "the Ray node ended after" in said(), said()
            assert keeper.poll() is None

            # `leave` stops the keeper first, so the node stays out.
            left = c.gpen_watch(c.node_ns, "leave").stdout
            assert (
                "has left the cluster (the Ray node gpen-watch started here is stopped); its `--stay` keeper too"
                in left
            ), left
            assert keeper.wait(60) == 0, said()
            assert "stopped: this machine's Ray node is down" in said()
            assert c.pids(c.node_ns) == []  # keeper, `ray start`, raylet and workers: all gone
            c.wait_nodes(1)
        finally:
            if keeper.poll() is None:
                keeper.kill()
                keeper.wait(30)


@pytest.mark.slow
@needs_netns
def test_a_kept_head_is_started_again_when_its_ray_processes_die(tmp_path: Path) -> None:
    with netns.cluster(tmp_path, join=False) as c:
        c.kill_all(c.head_ns)  # the fixture's head: this one is the keeper's
        out = tmp_path / "keeper.out"
        keeper = c.keep_head(out)
        try:
            said = lambda: out.read_text(encoding="utf-8")  # noqa: E731
            running = f"cluster head running at {c.address} (token authentication on)"
            wait_for(lambda: running in said(), "the head running", 90)
            assert f"gpen-watch cluster join {c.address}" in said()  # the instructions, as without --stay
            c.wait_nodes(1)
            gcs = c.ray_daemons(c.head_ns, (b"/gcs_server",))
            assert len(gcs) == 1, gcs
            os.kill(gcs.pop(), signal.SIGKILL)  # the head's GCS dies: `ray start --block` ends the rest
            wait_for(lambda: said().count(running) == 2, "the head started again", 90)
            assert "the Ray node ended after" in said()
            c.wait_nodes(1)
            keeper.send_signal(signal.SIGTERM)  # as a login manager stops it
            assert keeper.wait(60) == 0, said()
            assert "stopped: this machine's Ray node is down" in said()
            assert c.pids(c.head_ns) == []
        finally:
            if keeper.poll() is None:
                keeper.kill()
                keeper.wait(30)
