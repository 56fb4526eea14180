"""A full or read-only outbox: photos wait in the inbox (queued, not failed, nothing half-written),
status names the problem, and they go through once there is room again.

A real small tmpfs is mounted on the outbox where this is allowed (root); elsewhere the worker's
writes fail with the errno at the write call (hostile_restorer.FaultyWriteRestorer).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpen_watch.journal import Journal

from . import inputs
from .harness import Service, real_engine_args, write_atomic
from .invariants import Ledger, check, survey

if __package__ == "tests.hostile":  # python -m tests.hostile..., from the repository root
    from .. import tmpfs
else:  # pytest puts tests/ on sys.path
    import tmpfs

# --- a full or read-only outbox ---------------------------------------------------------------------


class Tmpfs:
    """A small tmpfs mounted on the outbox: really full, really read-only (needs root and mount)."""

    kind = "tmpfs"

    def __init__(self, where: Path) -> None:
        self.where = where
        self.filler = where / "filler.bin"

    def setup(self, svc: Service) -> None:
        pass

    def fill(self) -> None:
        # Until the file system says no: every byte (and every inode's data block) is taken.
        with contextlib.suppress(OSError), open(self.filler, "wb") as f:
            while True:
                f.write(b"\0" * 65536)
                f.flush()

    def free(self) -> None:
        self.filler.unlink()

    def read_only(self, on: bool) -> None:
        tmpfs.read_only(self.where, on)


class Simulated:
    """The worker's file writes fail with the errno written in a control file (no mount needed)."""

    kind = "simulated"

    def __init__(self, where: Path) -> None:
        self.control = where.parent / "write-fault"

    def setup(self, svc: Service) -> None:
        svc.env["GPEN_WATCH_RESTORER"] = "hostile.hostile_restorer:FaultyWriteRestorer"
        svc.env["HOSTILE_WRITE_FAULT"] = str(self.control)

    def fill(self) -> None:
        self.control.write_text("ENOSPC")

    def free(self) -> None:
        self.control.unlink()

    def read_only(self, on: bool) -> None:
        if on:
            self.control.write_text("EROFS")
        else:
            self.control.unlink()


CAN_MOUNT = tmpfs.can_mount()


@contextlib.contextmanager
def outbox_fault(kind: str, outbox: Path) -> Iterator[Tmpfs | Simulated]:
    outbox.mkdir(parents=True, exist_ok=True)
    if kind == "simulated":
        yield Simulated(outbox)
        return
    with tmpfs.mounted(outbox):
        yield Tmpfs(outbox)


def _outbox_kinds() -> list[Any]:
    tmpfs = pytest.param("tmpfs", marks=pytest.mark.skipif(not CAN_MOUNT, reason="cannot mount a tmpfs here"))
    # The simulated variant stands in where mounting is not allowed; with a tmpfs it is a slow extra.
    simulated = pytest.param("simulated", marks=[pytest.mark.slow] if CAN_MOUNT else [])
    return [tmpfs, simulated]


def _wait_problem(svc: Service, words: str, queued: int = 1) -> dict[str, Any]:
    """Until status names the problem and the photos sit in the queue, none in progress."""

    def held(s: dict[str, Any]) -> bool:
        q = s["queue"]
        if q["failed"]:
            raise AssertionError(f"a photo failed instead of waiting: {s['last_errors']}")
        return (
            words.lower() in (s["problem"] or "").lower()
            and q["queued"] >= queued
            and q["running"] == 0
            and q["in_flight"] == 0
            and s["settling"] == 0
        )

    return svc.wait(held, 90, f"problem mentioning {words!r}")


def _assert_waiting(svc: Service, names: list[str]) -> None:
    """The photos wait in the inbox, queued: not failed, not moved, and nothing half-written."""
    with Journal.open(readonly=True) as j:
        queued = {job.source.name for job in j.jobs("queued")}
        failed = [(job.source.name, job.error) for job in j.jobs("failed")]
    assert set(names) <= queued, (queued, failed)
    assert not failed, failed
    assert all((svc.inbox / n).exists() for n in names)
    assert not svc.failed.exists() or not any(svc.failed.rglob("*"))
    assert not [p for p in svc.outbox.rglob("*") if "tmp" in p.name]


@pytest.mark.slow
@pytest.mark.parametrize("kind", _outbox_kinds())
def test_outbox_full_then_read_only_jobs_wait_and_recover(services: Any, tiny_models: Any, kind: str) -> None:
    svc = services(*real_engine_args(tiny_models), restorer=None)
    ledger = Ledger(svc.inbox)
    with outbox_fault(kind, svc.outbox) as fault:
        fault.setup(svc)
        svc.start()
        write_atomic(svc.inbox / "before.jpg", inputs.jpeg(seed=70))  # the outbox works at first
        ledger.add("before.jpg", inputs.jpeg(seed=70), {"done"})
        svc.wait_idle(1)

        fault.fill()
        full = [f"full{i}.jpg" for i in range(3)]
        for i, name in enumerate(full):
            write_atomic(svc.inbox / name, inputs.jpeg(seed=71 + i))
            ledger.add(name, inputs.jpeg(seed=71 + i), {"done"})
        s = _wait_problem(svc, "disk full", len(full))
        _assert_waiting(svc, full)
        assert "outbox" in s["problem"]
        fault.free()
        assert svc.request("resume")["ok"]  # retry now rather than at the next periodic try
        svc.wait_idle(4)

        fault.read_only(True)
        ro = [f"ro{i}.jpg" for i in range(2)]
        for i, name in enumerate(ro):
            write_atomic(svc.inbox / name, inputs.jpeg(seed=80 + i))
            ledger.add(name, inputs.jpeg(seed=80 + i), {"done"})
        _wait_problem(svc, "read-only", len(ro))
        _assert_waiting(svc, ro)
        fault.read_only(False)
        assert svc.request("resume")["ok"]
        s = svc.wait_idle(6)
        assert s["problem"] is None
        assert svc.stop() == 0
        check(svc, ledger)


@pytest.mark.slow
@pytest.mark.skipif(not CAN_MOUNT, reason="cannot mount a tmpfs here")
def test_outbox_full_recovers_by_itself_when_space_returns(services: Any, tiny_models: Any) -> None:
    """No resume: the held work is retried on its own (every 30 s) once there is room again."""
    svc = services(*real_engine_args(tiny_models), restorer=None)
    ledger = Ledger(svc.inbox)
    with outbox_fault("tmpfs", svc.outbox) as fault:
        svc.start()
        fault.fill()
        write_atomic(svc.inbox / "a.jpg", inputs.jpeg(seed=90))
        ledger.add("a.jpg", inputs.jpeg(seed=90), {"done"})
        _wait_problem(svc, "outbox")
        _assert_waiting(svc, ["a.jpg"])
        fault.free()
        svc.wait_idle(1, timeout=90)
        assert svc.stop() == 0
        check(svc, ledger)


# --- originals/ and failed/ that refuse the originals ------------------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(not (CAN_MOUNT or os.geteuid() != 0), reason="cannot make a folder refuse writes here")
def test_the_invariant_accounts_for_originals_waiting_for_the_archive_only(services: Any) -> None:
    """A done photo's original waiting for a refusing originals/ is accounted for (result in the
    outbox, original in the inbox or moved away); a failed one waiting for failed/ (no error file
    yet) and one whose result is gone are still findings. Once the folders work: the full invariant."""
    svc = services()
    ledger = Ledger(svc.inbox)
    photo = inputs.jpeg(seed=95)
    with contextlib.ExitStack() as stack:
        for folder in (svc.originals, svc.failed):
            if CAN_MOUNT:
                stack.enter_context(tmpfs.mounted(folder))
                tmpfs.read_only(folder, True)
            else:
                folder.mkdir(parents=True)
                folder.chmod(0o500)
                stack.callback(folder.chmod, 0o755)
        svc.start()
        write_atomic(svc.inbox / "a.jpg", photo)
        ledger.add("a.jpg", photo, {"done"})
        write_atomic(svc.inbox / "bad.jpg", b"bad")  # the stand-in fails it
        ledger.add("bad.jpg", b"bad", {"failed", "unsupported"})
        svc.wait(lambda s: s["originals_waiting"] == 2, 60, "both originals waiting")
        assert svc.stop() == 0

        def findings(name: str) -> list[str]:
            return [p for p in survey(svc, ledger)[1] if p.startswith(repr(name))]

        assert findings("a.jpg") == []
        assert any("original 'waiting'" in p for p in findings("bad.jpg"))
        moved = svc.root / "a-moved-away.jpg"
        (svc.inbox / "a.jpg").rename(moved)  # the user took it out of the inbox meanwhile
        assert findings("a.jpg") == []
        moved.rename(svc.inbox / "a.jpg")
        (svc.outbox / "a.jpg").rename(moved)  # its result is not in the outbox: a finding
        assert any("original 'waiting' but its result" in p for p in findings("a.jpg"))
        moved.rename(svc.outbox / "a.jpg")

        for folder in (svc.originals, svc.failed):
            if CAN_MOUNT:
                tmpfs.read_only(folder, False)
            else:
                folder.chmod(0o755)
        svc.start()
        svc.wait(lambda s: s["originals_waiting"] == 0 and s["problem"] is None, 30, "the originals moved")
        assert svc.stop() == 0
        check(svc, ledger)
