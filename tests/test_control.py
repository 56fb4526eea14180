"""The control channel and the single-instance lock (in-process server; the service end to end is in test_daemon)."""

from __future__ import annotations

import gc
import json
import os
import socket
import stat
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from gpen_watch.cli import control as control_cli
from gpen_watch.platform import paths, program
from gpen_watch.service import control
from gpen_watch.service.status import Status

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")


@pytest.fixture(autouse=True)
def user_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, short_tmp: Path) -> None:
    for var, sub in (
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_STATE_HOME", "state"),
        ("XDG_CACHE_HOME", "cache"),
        ("HOME", "home"),
    ):
        monkeypatch.setenv(var, str(tmp_path / sub))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(short_tmp))


@pytest.fixture
def short_tmp() -> Any:
    # Unix socket paths must stay under ~100 bytes; pytest's tmp_path can be longer.
    import shutil
    import tempfile

    d = tempfile.mkdtemp(prefix="gw-")
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def server() -> Any:
    calls: list[dict[str, Any]] = []

    def handler(req: dict[str, Any]) -> dict[str, Any]:
        calls.append(req)
        if req["cmd"] == "boom":
            raise RuntimeError("handler bug")
        return {"ok": True, "cmd": req["cmd"], "pid": os.getpid()}

    srv = control.ControlServer(handler)
    srv.start()
    srv.calls = calls  # type: ignore[attr-defined]
    yield srv
    srv.close()


def test_files_are_private(server: control.ControlServer) -> None:
    folder = paths.runtime_dir()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    sock = folder / control.SOCKET_NAME
    assert stat.S_ISSOCK(sock.stat().st_mode)
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600
    secret = folder / control.SECRET_NAME
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert json.loads(secret.read_text())["pid"] == os.getpid()


def test_loose_runtime_dir_is_tightened(short_tmp: Path) -> None:
    folder = paths.runtime_dir()
    folder.mkdir(parents=True, mode=0o755)
    folder.chmod(0o755)
    control.private_dir()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_authenticated_client_gets_answers(server: control.ControlServer) -> None:
    assert control.request("status") == {"ok": True, "cmd": "status", "pid": os.getpid()}
    with control.ControlClient() as client:
        assert client.request("pause")["cmd"] == "pause"
        assert client.request("resume")["cmd"] == "resume"
    assert [c["cmd"] for c in server.calls] == ["status", "pause", "resume"]  # type: ignore[attr-defined]
    # A failing handler answers with the error and the channel stays up.
    assert control.request("boom") == {"ok": False, "error": "RuntimeError: handler bug"}
    assert control.request("status")["ok"]


def _raw(address: str) -> tuple[socket.socket, Any]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(address.removeprefix("unix:"))
    return s, s.makefile("rb")


def test_client_without_the_secret_is_refused(server: control.ControlServer) -> None:
    # Skips the handshake and sends a command straight away.
    s, r = _raw(server.address)
    with s, r:
        hello = json.loads(r.readline())
        assert "nonce" in hello
        assert "token" not in json.dumps(hello)
        s.sendall(b'{"cmd": "stop"}\n')
        assert json.loads(r.readline()) == {"ok": False, "error": "authentication failed"}
        assert r.readline() == b""  # closed
    # A wrong answer to the challenge.
    s, r = _raw(server.address)
    with s, r:
        r.readline()
        s.sendall(json.dumps({"auth": "0" * 64}).encode() + b"\n")
        assert json.loads(r.readline())["ok"] is False
        assert r.readline() == b""
    # Replaying an answer that was valid for another connection's nonce.
    s, r = _raw(server.address)
    with s, r:
        nonce1 = json.loads(r.readline())["nonce"]
        s2, r2 = _raw(server.address)
        with s2, r2:
            r2.readline()
            s2.sendall(json.dumps({"auth": control._answer(server.token, nonce1)}).encode() + b"\n")
            assert json.loads(r2.readline())["ok"] is False
    assert not server.calls  # type: ignore[attr-defined]


def test_a_wrong_secret_file_is_refused(server: control.ControlServer) -> None:
    secret = paths.runtime_dir() / control.SECRET_NAME
    info = json.loads(secret.read_text())
    info["token"] = "f" * 64
    secret.write_text(json.dumps(info))
    with pytest.raises(control.ControlError, match="authentication failed"):
        control.request("status")


def test_no_service_says_not_running_in_words_and_how_to_start_it() -> None:
    with pytest.raises(control.NotRunning) as refused:
        control.request("status")
    said = str(refused.value)
    assert said.startswith(f"gpen-watch is not running; start it with `{program.command('run')}`"), said
    assert "channel" not in said and "socket" not in said  # words of ours, not the user's


def test_stale_socket_from_a_killed_service_says_not_running(server: control.ControlServer) -> None:
    secret = paths.runtime_dir() / control.SECRET_NAME
    text = secret.read_text()
    server.close()
    secret.write_text(text)  # as if the service had been SIGKILLed: files left behind
    with pytest.raises(control.NotRunning, match="not running; start it with"):
        control.request("status")


def test_close_removes_the_files(server: control.ControlServer) -> None:
    server.close()
    assert not (paths.runtime_dir() / control.SOCKET_NAME).exists()
    assert not (paths.runtime_dir() / control.SECRET_NAME).exists()


def test_second_instance_is_refused_with_the_pid() -> None:
    first = control.InstanceLock().acquire()
    try:
        with pytest.raises(control.AlreadyRunning, match=rf"already running \(pid {os.getpid()}"):
            control.InstanceLock().acquire()
    finally:
        first.release()
    control.InstanceLock().acquire().release()  # free again


def test_status_cli_without_service(capsys: pytest.CaptureFixture[str]) -> None:
    from gpen_watch import cli

    assert cli.main(["status"]) == 3
    assert "not running" in capsys.readouterr().out


def test_format_status() -> None:
    text = control_cli.format_status(
        Status.from_json(
            {
                "version": "0.1.0",
                "pid": 42,
                "uptime_s": 75,
                "paused": True,
                "queue": {
                    "queued": 3,
                    "running": 5,
                    "in_flight": 4,
                    "restoring": 1,
                    "done": 10,
                    "failed": 1,
                    "unsupported": 2,
                },
                "restored_today": 7,
                "no_face_today": 3,
                "faces_today": 12,
                "throughput": {"images": 10, "faces": 14, "images_per_min": 4, "images_per_s": 0.5},
                "workers": [
                    {
                        "name": "cpu#0",
                        "device": "cpu",
                        "state": "busy",
                        "in_flight": 1,
                        "done": 10,
                        "faces": 14,
                        "restarts": 1,
                        "pid": 43,
                        "error": None,
                        "loaded": "GPEN-BFR-256 (256 px), retinaface_mobile0.25, feathered mask, on cpu in fp32",
                    }
                ],
                "last_errors": [{"when": "12:00:00", "file": "a.jpg", "error": "truncated JPEG"}],
                "notice": "1 original(s) left in the inbox: could not delete it: Read-only file system",
            }
        )
    )
    assert "paused (pid 42, up 1m15s)" in text
    assert "note: 1 original(s) left in the inbox: could not delete it" in text
    assert "PROBLEM" not in text
    # Handed out: 5; sent to the worker: 4, of which its restorer works on 1 (one more waits in
    # the pool for a free slot, and counts as waiting).
    assert "queue: 4 waiting, 4 in the worker, 1 being restored" in text
    assert "all time: 10 done, 1 failed, 2 unsupported" in text
    assert "done today: 10 photos: 7 restored (12 faces), 3 without a face" in text
    assert "this run: 10 done, 14 faces restored; now 4 photos/min" in text
    # The worker's count (failures included) is not called "done" like the queue's.
    assert "cpu#0" in text
    assert "processed 10" in text
    assert "restarts 1" in text
    assert "GPEN-BFR-256 (256 px), retinaface_mobile0.25" in text
    assert "a.jpg: truncated JPEG" in text


def test_format_status_counts_redos_apart_from_the_photos_done() -> None:
    """A redo restores a photo already done: "done" counts photos, the redos come beside them, in
    today's line, the run's and all time alike."""
    text = control_cli.format_status(
        Status.from_json(
            {
                "queue": {"done": 15, "redos": 3},
                "restored_today": 9,
                "no_face_today": 3,
                "faces_today": 14,
                "redos_today": 3,
                "throughput": {"images": 12, "redos": 1, "faces": 20, "images_per_min": 0},
            }
        )
    )
    assert "done today: 12 photos (+3 redos): 9 restored (14 faces), 3 without a face" in text
    assert "may not look like" not in text  # no face flagged today: nothing said
    flagged = control_cli.format_status(
        Status.from_json({"restored_today": 9, "faces_today": 14, "flagged_today": 2})
    )
    assert "9 restored (14 faces), 0 without a face; 2 faces may not look like the same person" in flagged
    assert "all time: 12 done (+3 redos), 0 failed" in text
    assert "this run: 12 done (+1 redo), 20 faces restored; now 0 photos/min" in text


def test_status_survives_the_wire_and_tolerates_a_service_one_release_apart() -> None:
    """What the daemon sends is what the CLI and the tray read back, nested parts included; a key
    this release does not know is ignored and one it misses takes its default."""
    from gpen_watch.service.status import (
        DownloadStatus,
        ErrorEntry,
        ModelFileStatus,
        ModelsStatus,
        QueueStatus,
        WorkerStatus,
    )

    sent = Status(
        version="9.9",
        pid=7,
        queue=QueueStatus(queued=2, running=1, done=5),
        workers=(WorkerStatus(name="cpu#0", device="cpu", rss_mb={"decode": 80.5, "peak": 120.0}),),
        models=ModelsStatus(
            "waiting",
            (ModelFileStatus(role="gpen", file="g.pth", state="missing"),),
            ("/m",),
            DownloadStatus("GPEN", "g.pth", 10, 100, 10),
        ),
        last_errors=(ErrorEntry("12:00", "a.jpg", "truncated JPEG"),),
        inboxes=("/in",),
    )
    wire = json.loads(json.dumps({"ok": True, **sent.to_json(), "from_the_future": 1}))
    assert Status.from_json(wire) == sent
    old = Status.from_json({"ok": True, "queue": {"queued": 3}})
    assert old.queue.depth == 3
    assert old.workers == ()


def test_format_status_counts_the_failures_that_were_a_bug_apart() -> None:
    from gpen_watch.service.status import QueueStatus

    text = control_cli.format_status(Status(queue=QueueStatus(done=4, failed=3, failed_by_bug=2)))
    assert "all time: 4 done, 3 failed, 0 unsupported" in text
    assert "  2 failed because of a bug in gpen-watch or a library; see the log" in text
    plain = control_cli.format_status(Status(queue=QueueStatus(failed=3)))
    assert "bug" not in plain


def test_format_status_lists_the_cluster_nodes_with_their_gpus_and_the_node_of_each_error() -> None:
    rtx = {
        "index": 0,
        "name": "NVIDIA RTX 4090",
        "util_percent": 87,
        "mem_used": 2**30,
        "mem_total": 24 * 2**30,
    }
    nodes = [
        {"name": "studio-a", "local": True, "up": True, "workers": 1, "done": 4},
        {
            "name": "studio-b (192.168.1.12)",
            "up": True,
            "workers": 1,
            "done": 3,
            "in_flight": 1,
            "gpus": [rtx],
        },
        {"name": "studio-c (192.168.1.13)", "workers": 2},
    ]
    error = {
        "when": "12:00:00",
        "file": "a.jpg",
        "error": "truncated JPEG",
        "node": "studio-b (192.168.1.12)",
    }
    text = control_cli.format_status(Status.from_json({"nodes": nodes, "last_errors": [error]}))
    assert "nodes (processed this run):" in text
    assert "  studio-a (this machine): 1 worker, in flight 0, processed 4" in text
    assert (
        "  studio-b (192.168.1.12) (up): 1 worker, in flight 1, processed 3\n    NVIDIA RTX 4090: 87%, 1.0/24.0 GiB"
        in text
    )
    assert "  studio-c (192.168.1.13) (away): 2 workers, in flight 0, processed 0" in text
    assert "a.jpg: truncated JPEG (on studio-b (192.168.1.12))" in text
    # Without a cluster node the section is left out: the workers' lines say it all.
    alone = control_cli.format_status(Status.from_json({"nodes": nodes[:1]}))
    assert "nodes" not in alone


def test_a_start_that_fails_leaves_no_socket_open(short_tmp: Path) -> None:
    # The address file cannot be written (a folder holds its name): start() fails, and neither the
    # listening socket nor the wake-up pair may stay open (pytest turns their ResourceWarning into
    # an error when they are collected).
    folder = control.private_dir()
    (folder / control.SECRET_NAME).mkdir()
    srv = control.ControlServer(lambda req: {"ok": True})
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", ResourceWarning)
        with pytest.raises(OSError):
            srv.start()
        srv.close()
        gc.collect()
    assert [str(w.message) for w in seen if issubclass(w.category, ResourceWarning)] == []


def test_a_workers_line_names_its_device_and_engine_without_stray_commas_or_padding() -> None:
    """One worker alone: its columns carry no padding, and the engine sits in brackets beside the
    device; several workers line up, each column as wide as its widest entry."""
    from gpen_watch.service.status import WorkerStatus

    alone = WorkerStatus(
        name="cpu#0", device="cpu", state="idle", engine="PyTorch 2.13.0", pid=43, loaded="GPEN"
    )
    assert control_cli.worker_lines([alone]) == [
        "  cpu#0  cpu (PyTorch 2.13.0)  idle  in flight 0  processed 0  faces 0  restarts 0  pid 43",
        "         GPEN",
    ]
    # Before its engine says which it is, the device alone; no pid yet, no "pid".
    waiting = WorkerStatus(name="cpu#1", device="cpu", state="stopped")
    assert control_cli.worker_lines([waiting]) == [
        "  cpu#1  cpu  stopped  in flight 0  processed 0  faces 0  restarts 0"
    ]
    both = control_cli.worker_lines([alone, waiting])
    assert both[0].startswith("  cpu#0  cpu (PyTorch 2.13.0)  idle     in flight 0")
    assert both[2].startswith("  cpu#1  cpu                   stopped  in flight 0")
    text = control_cli.format_status(Status(workers=(alone,)))
    assert ",  " not in text and ", idle" not in text


def test_a_problem_block_is_printed_with_its_short_first_line_after_problem() -> None:
    """`status` prints each problem's first line after "PROBLEM:", short, then the rest of its
    block under it; a one-line problem is one line."""
    from gpen_watch.service.status import ProblemStatus

    block = "model files missing: no internet connection\n  GPEN-BFR-512.pth (GPEN-BFR-512, 284.1 MB)\n  to get it, run:"
    s = Status(
        problem=block + "\noutbox: disk full",
        problems=(
            ProblemStatus("models", block, "model files missing: no internet connection"),
            ProblemStatus("outbox", "outbox: disk full"),
        ),
    )
    lines = control_cli.format_status(s).splitlines()
    at = lines.index("PROBLEM: model files missing: no internet connection")
    assert lines[at + 1 : at + 4] == [
        "  GPEN-BFR-512.pth (GPEN-BFR-512, 284.1 MB)",
        "  to get it, run:",
        "PROBLEM: outbox: disk full",
    ]
    assert all(len(line) <= 100 for line in lines)


def test_the_problem_line_is_short_and_says_where_the_rest_is_read() -> None:
    """The tray's menu line and a desktop notice: the first problem's short line, how many more,
    and where to read them: the dashboard when it is served, else the log, else `status`."""
    from gpen_watch.service.status import ProblemStatus

    models = ProblemStatus(
        "models", "model files missing: x\n  a.pth\n  b.pth", "model files missing: no internet connection"
    )
    outbox = ProblemStatus("outbox", "outbox: /out: No space left on device; retrying every 30 s")
    with_page = Status(problems=(models,), dashboard="http://127.0.0.1:4736/", log_file="/l/gpen-watch.log")
    line = with_page.problem_line()
    assert line == "model files missing: no internet connection (see the dashboard)"
    assert len(line) <= 64  # tray.model.MAX_LINE: the menu shows it whole
    assert Status(problems=(outbox,), log_file="/l/gpen-watch.log").problem_line() == (
        "outbox: /out: No space left on device (see the log)"
    )
    both = Status(problems=(models, outbox)).problem_line()
    assert (
        both
        == f"model files missing: no internet connection (1 more problem; see `{program.command('status')}`)"
    )
    # A problem said whole in one line has nothing more to read elsewhere.
    whole = ProblemStatus("outbox", "outbox: /out is read-only")
    assert (
        Status(problems=(whole,), dashboard="http://127.0.0.1:4736/").problem_line()
        == "outbox: /out is read-only"
    )
    assert Status().problem_line() is None
