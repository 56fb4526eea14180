"""`gpen-watch run` end to end: a real service subprocess, real watchdog observer, real worker processes.

Most tests run the workers with the fake restorer (tests/fake_restorer.py, no torch, milliseconds
per image) so that crashes, kills and restarts are cheap; the last ones run the real engine with
tiny random-weight models (conftest.tiny_models) on real photos and broken files.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tmpfs
from PIL import Image
from service_harness import (
    ServiceProcess,
    finished,
    queue_empty,
    real_engine_args,
    services_fixture,
    write_atomic,
)

from gpen_watch.journal import Journal
from gpen_watch.platform import paths
from gpen_watch.service import control

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and sockets")

FAKE = "fake_restorer:FakeRestorer"
START_TIMEOUT = 60.0


class Service(ServiceProcess):
    """One `gpen-watch run` subprocess on a temp inbox/outbox (tests/service_harness.py), with the fake
    restorer unless ``fake=False`` (the real engine)."""

    start_timeout = START_TIMEOUT
    wait_timeout = 30.0

    def __init__(self, root: Path, *extra: str, fake: bool = True, env: dict[str, str] | None = None) -> None:
        super().__init__(root, *extra, restorer=FAKE if fake else None, env=env)

    def wait_done(self, n: int, timeout: float = 30.0) -> dict[str, Any]:
        return self.wait(
            lambda s: finished(s) >= n and queue_empty(s),
            timeout,
            f"{n} jobs finished",
        )


services = services_fixture(Service)


def drop(folder: Path, name: str, data: bytes) -> Path:
    """Write a file the way a careful copier does: under a temp name, then rename into place."""
    return write_atomic(folder / name, data)


def status_cli(svc: Service) -> subprocess.CompletedProcess[str]:
    """`gpen-watch status` in a subprocess, against ``svc``; it must succeed."""
    out = subprocess.run(
        [sys.executable, "-m", "gpen_watch", "status"],
        env=svc.env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    return out


def files(folder: Path) -> list[str]:
    if not folder.exists():
        return []
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def assert_no_temps(*folders: Path) -> None:
    for folder in folders:
        temps = [f for f in files(folder) if "gpen-tmp" in f]
        assert not temps, f"leftover temp files in {folder}: {temps}"


# --- with the fake restorer ----------------------------------------------------------------------


def test_drop_files_and_get_outputs(services: Callable[..., Service]) -> None:
    svc = services("--set", "workers.cpu_workers=2")
    svc.inbox.mkdir(parents=True)
    svc.start()
    drop(svc.inbox, "a.jpg", b"photo a")
    drop(svc.inbox / "sub", "b.png", b"photo b")
    drop(svc.inbox, "notes.txt", b"not a photo")
    drop(svc.inbox, "bad.jpg", b"bad")  # the fake restorer fails names containing "bad"
    s = svc.wait_done(4)
    assert files(svc.outbox) == ["a.jpg", "sub/b.png"]
    assert (svc.outbox / "sub" / "b.png").read_bytes() == b"photo b"
    assert files(svc.originals) == ["a.jpg", "sub/b.png"]
    assert files(svc.failed) == ["bad.jpg", "bad.jpg.error.txt", "notes.txt", "notes.txt.error.txt"]
    assert "not an image" in (svc.failed / "bad.jpg.error.txt").read_text()
    assert "unsupported file type (.txt)" in (svc.failed / "notes.txt.error.txt").read_text()
    assert files(svc.inbox) == []
    assert s["queue"]["done"] == 2
    assert s["queue"]["unsupported"] == 2
    assert {e["file"] for e in s["last_errors"]} == {str(svc.inbox / "bad.jpg"), str(svc.inbox / "notes.txt")}
    assert len(s["workers"]) == 2
    assert all(w["device"] == "cpu" for w in s["workers"])
    assert s["torch_loaded"] is False
    # The same photo dropped again under another name is recognised, not redone, and gets the
    # first one's result under its own name.
    processed = sum(w["done"] for w in s["workers"])
    drop(svc.inbox, "a-copy.jpg", b"photo a")
    s = svc.wait(lambda s: s["queue"]["duplicate"] == 1, what="duplicate noticed")
    assert files(svc.outbox) == ["a-copy.jpg", "a.jpg", "sub/b.png"]
    assert (svc.outbox / "a-copy.jpg").read_bytes() == (svc.outbox / "a.jpg").read_bytes()
    assert sum(w["done"] for w in s["workers"]) == processed
    # The CLI sees the same service.
    out = status_cli(svc)
    assert "all time: 2 done" in out.stdout
    assert "cpu#1" in out.stdout
    assert svc.stop() == 0
    assert_no_temps(svc.outbox, svc.failed, svc.originals)


@pytest.mark.slow
def test_status_shows_the_device_a_worker_found_for_auto(services: Callable[..., Service]) -> None:
    """Without an NVIDIA GPU "auto" is left to the worker; what it reports (Apple's GPU on a Mac,
    here stood in for by the fake restorer) is what status shows, not "cpu"."""
    svc = services(env={"FAKE_DEVICE": "Apple GPU (mps)"})
    svc.inbox.mkdir(parents=True)
    svc.start()
    drop(svc.inbox, "a.jpg", b"photo a")
    s = svc.wait_done(1)
    assert s["workers"][0]["device"] == "Apple GPU (mps)"
    assert "worker cpu#0 ready on cpu: fake model, fake detector, on Apple GPU (mps)" in svc.log_text()
    out = status_cli(svc)
    assert "Apple GPU (mps)" in out.stdout
    assert svc.stop() == 0


@pytest.mark.slow
def test_a_copy_dropped_after_a_restart_gets_the_first_result_under_its_own_name(
    services: Callable[..., Service],
) -> None:
    svc = services().start()
    drop(svc.inbox, "a.jpg", b"photo a")
    svc.wait_done(1)
    assert svc.stop() == 0
    svc.start()
    drop(svc.inbox, "later/a again.jpg", b"photo a")
    s = svc.wait(lambda s: s["queue"]["duplicate"] == 1, what="duplicate noticed")
    assert files(svc.outbox) == ["a.jpg", "later/a again.jpg"]
    assert (svc.outbox / "later" / "a again.jpg").read_bytes() == (svc.outbox / "a.jpg").read_bytes()
    assert sum(w["done"] for w in s["workers"]) == 0  # nothing restored in this run
    assert files(svc.originals) == ["a.jpg", "later/a again.jpg"]
    assert svc.stop() == 0


def test_links_and_pipes_in_the_inbox_are_counted_in_status_and_named_in_the_log(
    services: Callable[..., Service], tmp_path: Path
) -> None:
    svc = services()
    svc.inbox.mkdir(parents=True)
    (tmp_path / "elsewhere.jpg").write_bytes(b"photo elsewhere")
    (svc.inbox / "link.jpg").symlink_to(tmp_path / "elsewhere.jpg")
    os.mkfifo(svc.inbox / "pipe.jpg")
    svc.start()
    drop(svc.inbox, "a.jpg", b"photo a")
    s = svc.wait(lambda s: s["special_files"] == 2 and s["queue"]["done"] == 1, what="special files counted")
    out = status_cli(svc)
    assert "left alone: 2 link, pipe or device files in the inboxes" in out.stdout
    log = svc.log_text()
    assert f"{svc.inbox / 'link.jpg'}: left alone: symbolic link (not followed)" in log
    assert f"{svc.inbox / 'pipe.jpg'}: left alone: named pipe (not opened)" in log
    assert files(svc.outbox) == ["a.jpg"]
    assert sorted(p.name for p in svc.inbox.iterdir()) == ["link.jpg", "pipe.jpg"]  # untouched
    assert s["queue"]["failed"] == s["queue"]["unsupported"] == 0
    assert svc.stop() == 0


def test_status_counts_photos_without_a_face_apart(services: Callable[..., Service]) -> None:
    svc = services()
    svc.inbox.mkdir(parents=True)
    svc.start()
    drop(svc.inbox, "a.jpg", b"photo a")
    drop(svc.inbox, "b.jpg", b"photo b")
    drop(svc.inbox, "noface.jpg", b"a landscape")  # the fake restorer finds no face in it
    drop(svc.inbox, "bad.jpg", b"bad")
    s = svc.wait_done(4)
    assert (s["restored_today"], s["no_face_today"], s["faces_today"]) == (2, 1, 2)
    # The queue's "done" (jobs that ended well) and this run's throughput agree; the worker's
    # count is every photo it finished, the failed one too, and is printed under another name.
    assert s["queue"]["done"] == s["throughput"]["images"] == 3
    assert s["workers"][0]["done"] == 4
    # The start-up log says what each worker loaded.
    assert "worker cpu#0 ready on cpu: fake model, fake detector, on cpu" in svc.log_text()
    assert s["workers"][0]["loaded"] == "fake model, fake detector, on cpu"
    assert f"no face in {svc.inbox / 'noface.jpg'}; written to" in svc.log_text()
    assert f"restored {svc.inbox / 'a.jpg'} ->" in svc.log_text()
    out = status_cli(svc)
    assert "done today: 3 photos: 2 restored (2 faces), 1 without a face" in out.stdout
    assert "all time: 3 done, 0 failed, 1 unsupported" in out.stdout
    assert "this run: 3 done, 2 faces restored" in out.stdout
    assert "processed 4" in out.stdout
    assert " done 4" not in out.stdout
    # Where the log is: in status, and the one line the service printed at start, though its
    # stderr is a file and no terminal.
    assert f"\nlog: {paths.log_file()}\n" in out.stdout + "\n"
    assert svc.stderr.read_text().splitlines()[0] == f"gpen-watch: logging to {paths.log_file()}"
    assert svc.stop() == 0


@pytest.mark.slow
def test_status_counts_failures_that_were_a_bug_apart(services: Callable[..., Service]) -> None:
    svc = services()
    svc.inbox.mkdir(parents=True)
    svc.start()
    drop(svc.inbox, "bugged.jpg", b"photo a")  # the fake restorer reports a decoder's bug
    drop(svc.inbox, "bad.jpg", b"bad")
    s = svc.wait_done(2)
    assert (s["queue"]["failed"], s["queue"]["unsupported"], s["queue"]["failed_by_bug"]) == (1, 1, 1)
    reason = (svc.failed / "bugged.jpg.error.txt").read_text()
    assert "this is a bug in gpen-watch or a library, not a fault of the file" in reason
    out = status_cli(svc)
    assert "all time: 0 done, 1 failed, 1 unsupported" in out.stdout
    assert "  1 failed because of a bug in gpen-watch or a library; see the log" in out.stdout
    assert svc.stop() == 0


def test_same_photo_dropped_twice_at_once_is_restored_once(services: Callable[..., Service]) -> None:
    # Two workers, so without the hold both copies would be restored side by side.
    svc = services("--set", "workers.cpu_workers=2", env={"FAKE_SLOW": "1"}).start()
    for name in ("slow-1.jpg", "slow-2.jpg", "slow-bad-1.jpg", "slow-bad-2.jpg"):
        drop(svc.inbox, name, b"broken twin" if "bad" in name else b"twin photo")
    s = svc.wait_done(4)
    # Each name has its result; the second one's is a copy of the first one's.
    assert files(svc.outbox) == ["slow-1.jpg", "slow-2.jpg"]
    assert (svc.outbox / "slow-2.jpg").read_bytes() == (svc.outbox / "slow-1.jpg").read_bytes()
    assert files(svc.originals) == ["slow-1.jpg", "slow-2.jpg"]  # the duplicate is archived like any
    assert s["queue"]["done"] == 1
    assert s["queue"]["duplicate"] == 1
    assert s["queue"]["unsupported"] == 2
    # The work was done once per content: the workers saw one of each pair.
    assert sum(w["done"] for w in s["workers"]) == 2
    with Journal.open() as j:
        jobs = {job.rel.name: job for state in ("done", "duplicate", "unsupported") for job in j.jobs(state)}
        first, second = jobs["slow-1.jpg"], jobs["slow-2.jpg"]
        assert second.duplicate_of == first.id
        assert second.output == svc.outbox / "slow-2.jpg"
        # It waited, queued, for the first one to end.
        assert [e.kind for e in j.history(second.id)][:2] == ["added", "claimed"]
        assert first.finished is not None
        assert second.started is not None
        assert second.started >= first.finished
        # The first one failed: its twin, which waited for it, failed with the same reason.
        bad1, bad2 = jobs["slow-bad-1.jpg"], jobs["slow-bad-2.jpg"]
        assert bad2.duplicate_of == bad1.id
        assert bad1.error is not None
        assert bad2.error is not None
        assert bad2.error.startswith(bad1.error)
    assert files(svc.failed) == [
        "slow-bad-1.jpg",
        "slow-bad-1.jpg.error.txt",
        "slow-bad-2.jpg",
        "slow-bad-2.jpg.error.txt",
    ]
    assert "same content as" in (svc.failed / "slow-bad-2.jpg.error.txt").read_text()
    assert svc.stop() == 0


@pytest.mark.slow
def test_file_copied_slowly_is_taken_only_when_complete(services: Callable[..., Service]) -> None:
    svc = services().start()
    chunks = [bytes([65 + i]) * 1000 for i in range(12)]
    with open(svc.inbox / "slow-copy.jpg", "wb") as f:  # written in place, no rename
        for chunk in chunks:
            f.write(chunk)
            f.flush()
            time.sleep(0.1)  # each write is well inside the 0.2 s settle time
            assert svc.status()["queue"]["queued"] + svc.status()["queue"]["done"] == 0
    svc.wait_done(1)
    assert (svc.outbox / "slow-copy.jpg").read_bytes() == b"".join(chunks)
    svc.stop()


@pytest.mark.skipif(
    not (tmpfs.can_mount() or os.geteuid() != 0), reason="cannot make the inbox read-only here"
)
@pytest.mark.slow
def test_originals_a_read_only_inbox_keeps_are_noted_not_retried(services: Callable[..., Service]) -> None:
    """Results published, originals cannot leave the inbox: a note in status (not a problem), no retry.

    A real read-only tmpfs where the test may mount (root), else ``chmod 0o555`` (root ignores it).
    """
    svc = services("--set", "watch.rescan_seconds=0.5")
    mounted = tmpfs.can_mount()
    with contextlib.ExitStack() as stack:
        if mounted:
            stack.enter_context(tmpfs.mounted(svc.inbox))
        else:
            svc.inbox.mkdir(parents=True)
            stack.callback(svc.inbox.chmod, 0o755)
        (svc.inbox / "a.jpg").write_bytes(b"photo a")
        (svc.inbox / "bad.jpg").write_bytes(b"bad")  # the fake restorer fails it: set aside, also left
        if mounted:
            tmpfs.read_only(svc.inbox, True)
        else:
            svc.inbox.chmod(0o555)
        svc.start()
        s = svc.wait(lambda s: s["originals_left"] == 2, 30, "both originals left in the inbox")
        assert s["problem"] is None
        assert s["originals_waiting"] == 0
        why = "Read-only file system" if mounted else "Permission denied"
        notice = s["notice"] or ""
        assert notice.startswith("2 original(s) left in the inbox: could not move it to ")
        assert why in notice
        assert notice.endswith("(and 1 other reason(s); see the log)")  # originals/ and failed/
        out = subprocess.run(
            [sys.executable, "-m", "gpen_watch", "status"], capture_output=True, text=True, timeout=30
        ).stdout
        assert "note: 2 original(s) left in the inbox" in out
        assert "PROBLEM" not in out
        # Not retried: neither by resume nor by rescans (the journal knows them), nothing restored again.
        assert control.request("resume")["ok"]
        time.sleep(1.5)
        s = control.request("status")
        assert s["originals_left"] == 2
        assert s["problem"] is None
        assert finished(s) == 2
        assert files(svc.inbox) == ["a.jpg", "bad.jpg"]
        assert files(svc.outbox) == ["a.jpg"]
        assert files(svc.originals) == []
        assert files(svc.failed) == ["bad.jpg.error.txt"]
        assert "left in the inbox" in (svc.failed / "bad.jpg.error.txt").read_text()
        assert svc.stop() == 0
    with Journal.open(paths.state_dir() / "journal.sqlite3") as j:
        jobs = j.jobs("done") + j.jobs("failed") + j.jobs("unsupported")
        assert sorted((x.source.name, x.attempts, x.original) for x in jobs) == [
            ("a.jpg", 1, "left"),
            ("bad.jpg", 1, "left"),
        ]


def test_second_instance_is_refused(services: Callable[..., Service]) -> None:
    svc = services().start()
    second = subprocess.run(svc.command(), env=svc.env, capture_output=True, text=True, timeout=60)
    assert second.returncode == 2
    assert f"already running (pid {svc.status()['pid']}" in second.stderr
    assert svc.status()["ok"]  # the first one is unharmed
    assert svc.stop() == 0


def test_control_files_are_private_and_stop_removes_them(services: Callable[..., Service]) -> None:
    svc = services().start()
    folder = paths.runtime_dir()
    assert oct(folder.stat().st_mode & 0o777) == "0o700"
    assert oct((folder / control.SOCKET_NAME).stat().st_mode & 0o777) == "0o600"
    assert oct((folder / control.SECRET_NAME).stat().st_mode & 0o777) == "0o600"
    out = subprocess.run(
        [sys.executable, "-m", "gpen_watch", "stop"], env=svc.env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0
    assert "stopped" in out.stdout
    assert svc.proc is not None
    assert svc.proc.wait(10) == 0
    assert not (folder / control.SOCKET_NAME).exists()
    assert not (folder / control.SECRET_NAME).exists()


def test_pause_stops_new_work_and_resume_continues(services: Callable[..., Service]) -> None:
    svc = services().start()
    assert control.request("pause")["ok"]
    drop(svc.inbox, "a.jpg", b"a")
    svc.wait(lambda s: s["queue"]["queued"] == 1, what="queued while paused")
    time.sleep(1.0)
    s = svc.status()
    assert s["paused"]
    assert s["queue"]["queued"] == 1
    assert s["queue"]["done"] == 0
    assert files(svc.outbox) == []
    assert control.request("resume")["ok"]
    svc.wait_done(1)
    assert files(svc.outbox) == ["a.jpg"]
    svc.stop()


def test_pause_twice_says_already_paused_and_resume_when_running_says_not_paused(
    services: Callable[..., Service],
) -> None:
    svc = services().start()

    def cli(command: str) -> str:
        out = subprocess.run(
            [sys.executable, "-m", "gpen_watch", command],
            env=svc.env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    assert cli("pause") == "paused"
    assert cli("pause") == "already paused"
    reply = control.request("pause")  # the reply the dashboard shows
    assert (reply["ok"], reply["changed"], reply["said"]) == (True, False, "already paused")
    assert svc.status()["paused"]
    assert cli("resume") == "resumed"
    assert cli("resume").startswith("not paused (it was already running)")
    reply = control.request("resume")
    assert (reply["ok"], reply["changed"]) == (True, False) and reply["said"].startswith("not paused")
    assert not svc.status()["paused"]
    svc.stop()


def test_files_dropped_while_down_are_processed_at_start(services: Callable[..., Service]) -> None:
    svc = services()
    for i in range(5):
        drop(svc.inbox / ("deep" if i % 2 else ""), f"p{i}.jpg", f"photo {i}".encode())
    svc.start()
    svc.wait_done(5)
    assert files(svc.outbox) == ["deep/p1.jpg", "deep/p3.jpg", "p0.jpg", "p2.jpg", "p4.jpg"]
    svc.stop()


def test_sigkilled_worker_mid_job_completes_once(services: Callable[..., Service], tmp_path: Path) -> None:
    started = tmp_path / "started"
    started.mkdir()
    env = {"FAKE_SLOW": "2", "FAKE_SLOW_STARTED": str(started)}
    svc = services("--set", "workers.images_in_flight=1", env=env).start()
    drop(svc.inbox, "slow.jpg", b"slow photo")
    svc.wait(lambda s: (started / "slow.jpg").exists(), what="the restorer on the photo")
    s = svc.status()
    os.kill(s["workers"][0]["pid"], signal.SIGKILL)
    s = svc.wait_done(1)
    assert s["queue"]["done"] == 1
    assert s["workers"][0]["restarts"] == 1
    assert files(svc.outbox) == ["slow.jpg"]
    svc.stop()
    with Journal.open() as j:
        job = j.jobs("done")[0]
        kinds = [e.kind for e in j.history(job.id)]
    assert "retry" in kinds
    assert kinds.count("finished") == 1


@pytest.mark.slow
def test_sigkilled_service_restarts_without_loss_or_duplicates(services: Callable[..., Service]) -> None:
    n = 6
    svc = services("--set", "workers.images_in_flight=2", env={"FAKE_SLOW": "0.7"})
    for i in range(n):
        drop(svc.inbox, f"slow{i}.jpg", f"photo {i}".encode())
    for _ in range(2):  # killed twice in the middle of the work
        svc.start()
        svc.wait(lambda s: s["queue"]["done"] >= 1 and s["queue"]["in_flight"] >= 1, what="work in flight")
        svc.kill()
    svc.start()
    svc.wait_done(n, timeout=60)
    svc.stop()
    assert files(svc.outbox) == sorted(f"slow{i}.jpg" for i in range(n))
    for i in range(n):
        assert (svc.outbox / f"slow{i}.jpg").read_bytes() == f"photo {i}".encode()
    assert files(svc.originals) == files(svc.outbox)
    assert files(svc.inbox) == []
    assert files(svc.failed) == []
    assert_no_temps(svc.outbox, svc.originals)
    with Journal.open() as j:
        counts = j.counts()
    assert counts["done"] == n
    assert sum(counts.values()) == n


@pytest.mark.slow
def test_workers_killed_many_times_every_image_still_done_once(services: Callable[..., Service]) -> None:
    n = 40
    svc = services(
        "--set", "workers.cpu_workers=2", "--set", "workers.max_attempts=10", env={"FAKE_SLOW": "0.1"}
    ).start()
    for i in range(n):
        drop(svc.inbox / f"d{i % 3}", f"slow{i}.jpg", f"photo {i}".encode())
    kills = 0
    deadline = time.monotonic() + 60
    while kills < 6 and time.monotonic() < deadline:
        s = svc.status()
        busy = [w for w in s["workers"] if w["state"] == "busy" and w["pid"]]
        if busy and finished(s) < n:
            try:
                os.kill(busy[kills % len(busy)]["pid"], signal.SIGKILL)
                kills += 1
            except ProcessLookupError:
                pass
        time.sleep(0.4)
    s = svc.wait_done(n, timeout=90)
    svc.stop()
    assert kills >= 3
    assert s["queue"]["done"] == n
    assert sum(w["restarts"] for w in s["workers"]) >= 3
    assert files(svc.outbox) == sorted(f"d{i % 3}/slow{i}.jpg" for i in range(n))
    for i in range(n):
        assert (svc.outbox / f"d{i % 3}" / f"slow{i}.jpg").read_bytes() == f"photo {i}".encode()
    assert_no_temps(svc.outbox, svc.originals)
    assert files(svc.failed) == []


@pytest.mark.slow
def test_sigterm_stops_within_seconds_and_requeues_work(services: Callable[..., Service]) -> None:
    svc = services("--set", "workers.images_in_flight=1", env={"FAKE_SLOW": "30"}).start()
    drop(svc.inbox, "slow.jpg", b"slow")
    s = svc.wait(lambda s: s["queue"]["restoring"] == 1, what="being restored")
    assert s["queue"]["in_flight"] == 1
    worker_pid = s["workers"][0]["pid"]
    assert svc.proc is not None
    t0 = time.monotonic()
    svc.proc.send_signal(signal.SIGTERM)
    assert svc.proc.wait(20) == 0
    assert time.monotonic() - t0 < 12  # grace 5 s, then the worker is killed
    # The two lines agree: the photo being restored got the grace period, then went back.
    log = svc.log_text()
    assert "stopping: 1 image(s) being restored get up to 5 s to finish\n" in log
    assert "1 run(s) handed back to the queue" in log
    with pytest.raises(ProcessLookupError):
        os.kill(worker_pid, 0)
    with Journal.open() as j:
        assert j.counts()["queued"] == 1  # handed back, done at the next start
    svc.env["FAKE_SLOW"] = "0"
    svc.start()
    svc.wait_done(1)
    svc.stop()
    assert files(svc.outbox) == ["slow.jpg"]


@pytest.mark.slow
def test_weights_error_is_reported_not_crash_looped_and_resume_retries(
    services: Callable[..., Service], tmp_path: Path
) -> None:
    missing = tmp_path / "weights-missing"
    missing.touch()
    svc = services(env={"FAKE_LOAD": f"model_error_while:{missing}"}).start(wait=False)
    s = svc.wait(lambda s: s["workers"] and s["workers"][0]["state"] == "error", what="worker error")
    assert "gpen-watch models fetch" in s["problem"]
    drop(svc.inbox, "a.jpg", b"a")
    s = svc.wait(lambda s: s["queue"]["queued"] == 1, what="queued")
    time.sleep(1.0)
    assert svc.status()["workers"][0]["restarts"] == 0
    assert svc.status()["queue"]["queued"] == 1
    assert files(svc.inbox) == ["a.jpg"]  # nothing lost: it waits for working weights
    missing.unlink()  # the user fetched the weights
    assert control.request("resume")["ok"]
    s = svc.wait_done(1)
    assert s["problem"] is None
    assert files(svc.outbox) == ["a.jpg"]
    svc.stop()


# --- with the real engine and tiny random models -------------------------------------------------


def _bomb_png() -> bytes:
    """A valid-looking PNG that declares 40000 x 40000 pixels (1.6 GP) in a few bytes."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return len(data).to_bytes(4, "big") + kind + data + zlib.crc32(kind + data).to_bytes(4, "big")

    ihdr = (40000).to_bytes(4, "big") * 2 + bytes([8, 2, 0, 0, 0])
    idat = zlib.compress(b"\x00" * 1024)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


@pytest.mark.slow
def test_real_engine_restores_photos_and_sets_aside_broken_files(
    services: Callable[..., Service], tiny_models: Any, grace_hopper_path: Path
) -> None:
    svc = services(*real_engine_args(tiny_models), fake=False)
    photo = grace_hopper_path.read_bytes()
    drop(svc.inbox, "grace.jpg", photo)  # dropped while down: taken by the start-up scan
    svc.start()
    # (An empty file waits 30 s before it is set aside, in case its copier stalled: the zero-byte
    # case is in tests/hostile/test_bad_inputs.py, which waits for it beside 45 other kinds.)
    drop(svc.inbox, "text.jpg", b"this is a text file, not a JPEG\n" * 10)
    drop(svc.inbox, "corrupt.jpg", b"\xff\xd8\xff\xe0" + os.urandom(3000))
    drop(svc.inbox, "bomb.png", _bomb_png())
    s = svc.wait_done(4, timeout=180)
    assert files(svc.outbox) == ["grace.jpg"]
    out = (svc.outbox / "grace.jpg").read_bytes()
    assert out[:2] == b"\xff\xd8"
    assert out != photo
    assert files(svc.originals) == ["grace.jpg"]
    reasons = {
        name: (svc.failed / f"{name}.error.txt").read_text()
        for name in ("text.jpg", "corrupt.jpg", "bomb.png")
    }
    for name, text in reasons.items():
        assert (svc.failed / name).exists(), name
        assert "Reason:" in text, text
        assert "unknown" not in text.split("Reason:")[1].splitlines()[0], text
    assert "MP" in reasons["bomb.png"] or "large" in reasons["bomb.png"].lower()
    assert s["queue"]["done"] == 1
    assert s["queue"]["failed"] + s["queue"]["unsupported"] == 3
    # The start-up log names what the worker really loaded, every "auto" resolved.
    assert (
        "ready on cpu: tiny-gpen-64.pth (64 px), retinaface_mobile0.25, feathered mask, on cpu in fp32"
        in svc.log_text()
    ), svc.logs()
    # The service went on working after the bad files, and the parent never loaded torch.
    assert s["workers"][0]["restarts"] == 0
    assert s["torch_loaded"] is False
    assert s["rss_peak_mb"] is None or s["rss_peak_mb"] < 300
    drop(svc.inbox, "again.jpg", photo + b"\0")  # different bytes (after the end marker): a new job
    svc.wait_done(5, timeout=120)
    assert files(svc.outbox) == ["again.jpg", "grace.jpg"]
    svc.stop()
    assert_no_temps(svc.outbox, svc.failed, svc.originals)


@pytest.mark.slow
def test_real_engine_with_corrupt_weights_reports_it_and_keeps_the_photos(
    services: Callable[..., Service], tiny_models: Any, tmp_path: Path
) -> None:
    bad = tmp_path / "models" / "broken.pth"
    bad.parent.mkdir()
    bad.write_bytes(tiny_models.gpen.read_bytes()[:5000])  # a download cut short
    svc = services(
        "--model",
        str(bad),
        "--model-dir",
        str(tiny_models.model_dir),
        "--set",
        "restore.detector=retinaface_mobile0.25",
        "--set",
        "restore.use_parse=false",
        fake=False,
    )
    # A real photo: one the service can tell is no image is set aside without a worker.
    photo = io.BytesIO()
    Image.new("RGB", (32, 24), (90, 120, 150)).save(photo, "JPEG")
    drop(svc.inbox, "a.jpg", photo.getvalue())
    svc.start(wait=False)
    # The service sees the cut-short archive itself and holds the workers (none crash-loops on it).
    s = svc.wait(lambda s: bool(s["problem"]) and s["queue"]["queued"] == 1, 90, "corrupt weights problem")
    assert s["problem"].startswith("corrupt model file: ")
    assert str(bad) in s["problem"]
    assert s["workers"][0]["state"] == "waiting for model files"
    assert s["workers"][0]["restarts"] == 0
    svc.stop()
    assert files(svc.inbox) == ["a.jpg"]
    assert files(svc.failed) == []


def test_the_engine_choice_says_what_the_service_checks_not_the_factory_name() -> None:
    from gpen_watch.dispatch.protocol import DEFAULT_FACTORY
    from gpen_watch.service.daemon import engine_from_environ

    real = engine_from_environ({})
    assert (real.factory, real.model_files, real.header_rules) == (DEFAULT_FACTORY, True, True)
    stand_in = engine_from_environ({"GPEN_WATCH_RESTORER": FAKE})
    assert (stand_in.factory, stand_in.model_files, stand_in.header_rules) == (FAKE, False, False)
    told = engine_from_environ({"GPEN_WATCH_RESTORER": FAKE, "GPEN_WATCH_HEADER_CHECKS": "1"})
    assert (told.model_files, told.header_rules) == (False, True)
