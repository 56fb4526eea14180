"""Originals that the archive or failed/ folder refuses wait in the inbox and are moved once it works.

A real `gpen-watch run` with the fake restorer (tests/fake_restorer.py). The folders are broken the
way the hostile outbox tests break the outbox: a small tmpfs mounted on each and remounted
read-only where mounting is allowed (root), else ``chmod 0o500`` (which root would ignore).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import tmpfs
from service_harness import ServiceProcess

from gpen_watch.journal import Journal
from gpen_watch.platform import paths
from gpen_watch.service import control

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals, sockets and permissions")

FAKE = "fake_restorer:FakeRestorer"  # tests/fake_restorer.py

CAN_MOUNT = tmpfs.can_mount()
CAN_CHMOD = os.name == "posix" and os.geteuid() != 0


class Breakable:
    """A folder that can be made to refuse writes and then repaired."""

    def __init__(self, folder: Path, mounted: bool) -> None:
        self.folder = folder
        self.mounted = mounted

    def refuse(self, on: bool) -> None:
        if self.mounted:
            tmpfs.read_only(self.folder, on)
        else:
            self.folder.chmod(0o500 if on else 0o755)


@contextlib.contextmanager
def breakable(*folders: Path) -> Iterator[list[Breakable]]:
    with contextlib.ExitStack() as stack:
        made = []
        for f in folders:
            f.mkdir(parents=True, exist_ok=True)
            if CAN_MOUNT:
                stack.enter_context(tmpfs.mounted(f))
            else:
                stack.callback(f.chmod, 0o755)
            made.append(Breakable(f, CAN_MOUNT))
        yield made


def files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def gpen_status() -> str:
    return subprocess.run(
        [sys.executable, "-m", "gpen_watch", "status"], capture_output=True, text=True, timeout=30
    ).stdout


@pytest.mark.skipif(not (CAN_MOUNT or CAN_CHMOD), reason="cannot make a folder refuse writes here")
def test_originals_wait_while_their_folders_refuse_them_and_move_once_they_work(tmp_path: Path) -> None:
    svc = ServiceProcess(tmp_path, restorer=FAKE)  # tests/service_harness.py
    originals, failed = tmp_path / "originals", tmp_path / "failed"
    svc.inbox.mkdir()
    try:
        with breakable(originals, failed) as (arch, fail):
            arch.refuse(True)
            fail.refuse(True)
            svc.start()
            (svc.inbox / "good.jpg").write_bytes(b"a photo")
            (svc.inbox / "bad.jpg").write_bytes(b"not an image")  # the fake restorer refuses it

            # Nothing lost, nothing failed for this: the result is in the outbox, the originals wait
            # in the inbox, and the status says where they cannot go and how many wait.
            s = svc.wait(lambda s: s["originals_waiting"] == 2, 60, "both originals waiting")
            assert s["queue"]["done"] == 1
            assert s["queue"]["unsupported"] == 1
            problem = s["problem"] or ""
            assert f"cannot move originals to {originals}" in problem
            assert f"cannot move originals to {failed}" in problem
            assert "1 left in the inbox" in problem
            assert "retrying every 30 s" in problem
            assert ("Read-only file system" if arch.mounted else "Permission denied") in problem
            assert f"PROBLEM: cannot move originals to {originals}" in gpen_status()
            assert files(svc.inbox) == ["bad.jpg", "good.jpg"]
            assert files(svc.outbox) == ["good.jpg"]
            assert files(failed) == []

            # The archive works again: `resume` moves its original at once; failed/ still refuses.
            arch.refuse(False)
            assert control.request("resume")["ok"]
            s = svc.wait(lambda s: s["originals_waiting"] == 1, 30, "the archived original moved")
            assert str(originals) not in (s["problem"] or "")
            assert f"cannot move originals to {failed}" in s["problem"]
            assert files(originals) == ["good.jpg"]
            assert files(svc.inbox) == ["bad.jpg"]

            # Across a restart: the journal knows what waits; moved at start once failed/ works.
            assert svc.stop() == 0
            fail.refuse(False)
            svc.start()
            s = svc.wait(
                lambda s: s["originals_waiting"] == 0 and s["problem"] is None, 30, "the problem cleared"
            )
            assert files(svc.inbox) == []
            assert files(failed) == ["bad.jpg", "bad.jpg.error.txt"]
            assert "moved here as bad.jpg" in (failed / "bad.jpg.error.txt").read_text()
            assert files(svc.outbox) == ["good.jpg"]
            assert (svc.outbox / "good.jpg").read_bytes() == b"a photo"
            assert (originals / "good.jpg").read_bytes() == b"a photo"
            assert svc.stop() == 0
    finally:
        svc.close()
    # Restored once, never again: one done job, one attempt; the failed one set aside once.
    with Journal.open(paths.state_dir() / "journal.sqlite3") as j:
        done, bad = j.jobs("done"), j.jobs("unsupported")
        assert [(x.source.name, x.attempts, x.original) for x in done] == [("good.jpg", 1, "archived")]
        assert [(x.source.name, x.original) for x in bad] == [("bad.jpg", "set-aside")]
        assert j.counts()["queued"] == j.counts()["running"] == 0


def test_the_service_retries_waiting_originals_periodically_without_resume(
    tmp_path: Path, monkeypatch
) -> None:
    """The service loop's retry (OriginalsWatch), in process: due every retry_s, not before."""
    import errno
    import threading

    from gpen_watch.config import Config, InboxConfig, WatchConfig
    from gpen_watch.journal import hash_file
    from gpen_watch.outbox import commit, durable
    from gpen_watch.restore.api import FileResult
    from gpen_watch.service.originals_watch import OriginalsWatch

    inbox, outbox, originals = tmp_path / "inbox", tmp_path / "outbox", tmp_path / "originals"
    inbox.mkdir()
    cfg = Config(watch=WatchConfig(inboxes=[InboxConfig(inbox)], outbox=outbox))
    watch = OriginalsWatch(cfg, retry_s=0.3)
    running = threading.Event()
    journal = Journal.open(tmp_path / "journal.sqlite3")
    try:
        watch.retry(journal, running)  # at start: nothing waits, nothing to do later
        assert watch.retry_at is None
        assert watch.problem() is None
        src = inbox / "a.jpg"
        src.write_bytes(b"a photo")
        st = src.stat()
        job_id = journal.add(src, inbox, "a.jpg", st.st_size, st.st_mtime, hash_file(src)).job.id
        journal.claim_batch(1, "w0")
        fj = commit.file_job(journal, job_id, cfg)
        fj.dst.write_bytes(b"restored")

        def full(src, directory, name, job_id, taken=None):  # type: ignore[no-untyped-def]
            raise OSError(errno.ENOSPC, "No space left on device", str(src), None, str(directory / name))

        monkeypatch.setattr(durable, "move_no_clobber", full)
        outcome = commit.commit(journal, job_id, FileResult(src=src, ok=True, dst=fj.dst, faces=1), cfg)
        watch.note(outcome.original)
        assert watch.problem() == (
            f"cannot move originals to {originals}: No space left on device; "
            "1 left in the inbox; retrying every 0.3 s"
        )
        assert watch.waiting_count == 1
        monkeypatch.undo()  # room again
        watch.retry(journal, running)  # not due yet
        assert src.exists()
        assert watch.problem() is not None
        time.sleep(0.35)
        watch.retry(journal, running)
        assert not src.exists()
        assert (originals / "a.jpg").read_bytes() == b"a photo"
        assert watch.problem() is None
        assert watch.retry_at is None
        assert (outbox / "a.jpg").read_bytes() == b"restored"
    finally:
        journal.close()
