"""Bad inputs, each a test, against a real service: one service run per group, then a test per kind.

The real-engine group drops every kind of hostile file into one `gpen-watch run` with the tiny
models (half while it is down, for the start-up scan, half while it runs, for the watcher), waits
until the service is idle, stops it and surveys the folders and the journal. Each kind's test then
reads its own findings; ``test_invariant_*`` asserts the whole survey. The timing group (files
deleted, replaced or still being written while queued...) runs the copying stand-in restorer, whose
outputs are byte-equal to their source: proof of which content was taken.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpen_watch.journal import Journal
from gpen_watch.journal.journal import Job
from gpen_watch.journal.states import JobState
from gpen_watch.watch.settle import EMPTY_FILE_GRACE_SECONDS

from . import inputs
from .conftest import isolated_env
from .harness import Service, file_sha, real_engine_args, write_atomic, write_slowly
from .invariants import GONE, IGNORED, Ledger, Report, survey


@dataclass
class Outcome:
    svc: Service
    ledger: Ledger
    report: Report
    problems: list[str]
    jobs: dict[str, list[Job]]  # by path relative to the inbox
    log: str
    status: dict[str, Any]
    kind_rels: dict[str, list[str]]  # what each kind dropped

    def problems_of(self, *rels: str) -> list[str]:
        return [p for p in self.problems if any(repr(r) in p or str(self.svc.inbox / r) in p for r in rels)]


def _run_group(
    root: Path, kinds: list[inputs.Kind], *extra: str, restorer: str | None, timing: bool = False
) -> Outcome:
    with isolated_env(root / "home"):
        svc = Service(root, *extra, restorer=restorer, settle=0.3, env={"FAKE_SLOW": "1.5"})
        ledger = Ledger(svc.inbox)
        kind_rels: dict[str, list[str]] = {}

        def make(kind: inputs.Kind) -> None:
            before = len(ledger.drops)
            kind.make(svc.inbox, ledger)
            kind_rels[kind.name] = [d.rel for d in ledger.drops[before:]]

        try:
            for kind in kinds[::2]:
                make(kind)  # present at start: found by the start-up scan
            svc.start()
            for kind in kinds[1::2]:
                make(kind)  # dropped while running: seen by the watcher
            if timing:
                _timing_cases(svc, ledger)
            status = svc.wait_idle(ledger.jobs_expected(), timeout=240)
            time.sleep(1.0)  # late events (a second look at settled files) must change nothing
            status = svc.wait_idle(ledger.jobs_expected(), timeout=60)
            assert svc.stop() == 0
            report, problems = survey(svc, ledger, planted=[svc.outbox / "trap"])
            with Journal.open(readonly=True) as j:
                jobs: dict[str, list[Job]] = {}
                for state in ("done", "failed", "unsupported", "duplicate", "gone", "queued", "running"):
                    for job in j.jobs(state):
                        jobs.setdefault(str(job.source.relative_to(svc.inbox)), []).append(job)
            return Outcome(svc, ledger, report, problems, jobs, svc.log_text(), status, kind_rels)
        finally:
            svc.close()


# --- the real engine --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real(tiny_models: Any, tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    root = tmp_path_factory.mktemp("hostile-real")
    return _run_group(
        root,
        inputs.KINDS,
        *real_engine_args(tiny_models),
        "--set",
        "workers.images_in_flight=4",
        restorer=None,
    )


@pytest.mark.slow
@pytest.mark.parametrize("kind", inputs.KINDS, ids=lambda k: k.name)
def test_bad_input_real_engine(real: Outcome, kind: inputs.Kind) -> None:
    problems = real.problems_of(*real.kind_rels[kind.name])
    assert not problems, "\n".join(problems)
    extra = EXTRA_CHECKS.get(kind.name)
    if extra is not None:
        extra(real)


@pytest.mark.slow
def test_invariant_real_engine(real: Outcome) -> None:
    assert not real.problems, "\n".join(real.problems) + "\n" + real.svc.logs()
    s = real.status
    assert s["torch_loaded"] is False  # the parent never imported torch, whatever it was fed
    assert s["workers"][0]["restarts"] == 0  # no input crashed a worker
    print(f"real engine: {real.report}, parent RSS peak {s['rss_peak_mb']} MB")


def _hidden_reported_once(o: Outcome) -> None:
    lines = [line for line in o.log.splitlines() if ".hidden.jpg" in line]
    assert len(lines) == 1, lines
    assert "hidden" in lines[0], lines
    assert (o.svc.inbox / ".hidden.jpg").exists()


def _not_followed(o: Outcome) -> None:
    outside = o.svc.root / "outside"
    assert (outside / "secret.jpg").exists()
    assert (outside / "album" / "in-linked-folder.jpg").exists()
    assert not any("secret" in p.name or "in-linked-folder" in p.name for p in o.svc.outbox.rglob("*"))


def _heic(o: Outcome) -> None:
    try:
        import pillow_heif  # noqa: F401
    except ImportError:
        (job,) = o.jobs["phone.heic"]
        assert job.state == "unsupported"
        assert "install pillow-heif" in (job.error or "")


def _special_files_untouched(o: Outcome) -> None:
    import stat

    for name, test in (("pipe.jpg", stat.S_ISFIFO), ("null.jpg", stat.S_ISCHR), ("sock.jpg", stat.S_ISSOCK)):
        path = o.svc.inbox / name
        if name in {d.rel for d in o.ledger.drops}:
            assert test(os.lstat(path).st_mode), f"{name} is no longer the special file it was"


def _empty_taken_after_the_grace(o: Outcome) -> None:
    (job,) = o.jobs["zero.jpg"]
    # Recorded no sooner than the grace after it was written (mtime: whole seconds on some systems).
    assert job.created - job.mtime >= EMPTY_FILE_GRACE_SECONDS - 1, (job.created, job.mtime)


EXTRA_CHECKS = {
    "zero-byte": _empty_taken_after_the_grace,
    "leading-dot": _hidden_reported_once,
    "symlink-outside": _not_followed,
    "heic-without-plugin": _heic,
    "fifo": _special_files_untouched,
    "device-node": _special_files_untouched,
    "unix-socket": _special_files_untouched,
}


# --- timing: files that change while the service holds them -----------------------------------------


def _timing_cases(svc: Service, ledger: Ledger) -> None:
    data = {
        name: inputs.jpeg(seed=500 + i)
        for i, name in enumerate(
            [
                "deleted",
                "replaced",
                "replacement",
                "swapped",
                "running",
                "running-new",
                "trickle",
                "twice",
                "pair",
                "trap",
                "stalled",
            ]
        )
    }
    outside = svc.root / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "secret.jpg").write_bytes(inputs.jpeg(seed=999))

    # Deleted, replaced, and swapped for a symlink while queued (paused: nothing is taken meanwhile).
    assert svc.request("pause")["ok"]
    write_atomic(svc.inbox / "deleted-while-queued.jpg", data["deleted"])
    write_atomic(svc.inbox / "replaced-while-queued.jpg", data["replaced"])
    write_atomic(svc.inbox / "symlinked-while-queued.jpg", data["swapped"])
    # Those three by name: the photos dropped before them are queued too, so a count can be reached
    # before these are (seen once: the symlink swap came before its file was queued, never "gone").
    three = ("deleted-while-queued.jpg", "replaced-while-queued.jpg", "symlinked-while-queued.jpg")
    svc.wait(lambda s: all(_state_of(svc, n) == "queued" for n in three), what="3 queued while paused")
    os.unlink(svc.inbox / "deleted-while-queued.jpg")
    write_atomic(svc.inbox / "replaced-while-queued.jpg", data["replacement"])
    os.unlink(svc.inbox / "symlinked-while-queued.jpg")
    os.symlink(outside / "secret.jpg", svc.inbox / "symlinked-while-queued.jpg")
    svc.wait(
        lambda s: (
            s["queue"]["gone"] >= 3
            and s["settling"] == 0
            and _state_of(svc, "replaced-while-queued.jpg") == "queued"
        ),
        what="the changes noticed",
    )
    ledger.add("deleted-while-queued.jpg", data["deleted"], GONE)
    ledger.add("replaced-while-queued.jpg", data["replaced"], GONE)
    ledger.add("replaced-while-queued.jpg", data["replacement"], {"done"})
    ledger.add("symlinked-while-queued.jpg", data["swapped"], GONE)
    ledger.add("symlinked-while-queued.jpg", None, IGNORED)  # the link itself stays, not followed
    assert svc.request("resume")["ok"]

    # Replaced while being restored: the first job ends (its original is not touched: it is not the
    # file it took any more), the new content is a job of its own.
    write_atomic(svc.inbox / "slow-replaced-while-running.jpg", data["running"])
    svc.wait(lambda s: _state_of(svc, "slow-replaced-while-running.jpg") == "running", what="running")
    write_atomic(svc.inbox / "slow-replaced-while-running.jpg", data["running-new"])
    ledger.add(
        "slow-replaced-while-running.jpg",
        data["running"],
        {"done"},
        original={"replaced"},
        output_check=lambda out, job: None,
    )  # restored whichever content it read
    ledger.add("slow-replaced-while-running.jpg", data["running-new"], {"done"})

    # Written slowly in place: taken once, complete (the copy engine's output is byte-equal).
    write_slowly(svc.inbox / "trickle.jpg", data["trickle"], chunks=12, pause=0.1)
    ledger.add("trickle.jpg", data["trickle"], {"done"})

    # Created empty, then the copy stalls for several settle times before its first byte: an empty
    # file waits EMPTY_FILE_GRACE_SECONDS, so it is not set aside meanwhile, and is taken whole.
    stalled = svc.inbox / "stalled-copy.jpg"
    with open(stalled, "wb") as f:
        time.sleep(5 * svc.settle)
        assert stalled.exists(), "an empty file was taken"
        assert not _jobs_of(svc, "stalled-copy.jpg"), "an empty file was taken"
        f.write(data["stalled"])
    ledger.add("stalled-copy.jpg", data["stalled"], {"done"})

    # The same photo dropped twice: after it is done, under another name and under its own name.
    write_atomic(svc.inbox / "twice.jpg", data["twice"])
    ledger.add("twice.jpg", data["twice"], {"done"})
    svc.wait(lambda s: _state_of(svc, "twice.jpg") == "done", what="twice.jpg done")
    write_atomic(svc.inbox / "twice-again.jpg", data["twice"])
    ledger.add("twice-again.jpg", data["twice"], {"duplicate"})
    svc.wait(lambda s: not (svc.inbox / "twice.jpg").exists(), what="twice.jpg archived")
    write_atomic(svc.inbox / "twice.jpg", data["twice"])
    ledger.add("twice.jpg", data["twice"], {"duplicate"})
    # ...and twice at the same moment (both settle together; restoring one takes 1.5 s): the second
    # waits for the first and is then a duplicate of it (``_pair_restored_once``).
    write_atomic(svc.inbox / "slow-pair-1.jpg", data["pair"])
    write_atomic(svc.inbox / "slow-pair-2.jpg", data["pair"])
    ledger.add("slow-pair-1.jpg", data["pair"], {"done", "duplicate"})
    ledger.add("slow-pair-2.jpg", data["pair"], {"done", "duplicate"})

    # An outbox subfolder planted as a link out of the outbox: nothing is written through it.
    (outside / "trap").mkdir(exist_ok=True)
    os.symlink(outside / "trap", svc.outbox / "trap")
    write_atomic(svc.inbox / "trap" / "photo.jpg", data["trap"])
    ledger.add("trap/photo.jpg", data["trap"], {"failed"}, "outside")


def _pair_restored_once(o: Outcome) -> None:
    """The same photo dropped twice at once: one restored, the other a duplicate of it with a copy
    of its result under its own name."""
    (a,), (b,) = o.jobs["slow-pair-1.jpg"], o.jobs["slow-pair-2.jpg"]
    done, dup = (a, b) if a.state == "done" else (b, a)
    assert (done.state, dup.state) == ("done", "duplicate"), (a, b)
    assert dup.duplicate_of == done.id
    assert done.output is not None
    assert dup.output is not None
    assert dup.output.name == dup.source.name
    assert dup.attempts == 0  # never given to a worker
    # It was queued when the first was, and waited for it instead of being restored beside it.
    with isolated_env(o.svc.root / "home"), Journal.open(readonly=True) as j:
        history = j.history(dup.id)
    assert [e.kind for e in history][:2] == ["added", "claimed"], history
    assert history[1].detail == f"same content as run {done.id}"
    sha = a.sha256
    outputs = [
        p for p in o.svc.outbox.rglob("*") if p.is_file() and not p.is_symlink() and file_sha(p) == sha
    ]
    assert sorted(outputs) == sorted([done.output, dup.output]), outputs
    assert dup.output.read_bytes() == done.output.read_bytes()


def _jobs_of(svc: Service, rel: str) -> list[Job]:
    with Journal.open(readonly=True) as j:
        return [job for state in JobState for job in j.jobs(state) if job.source == svc.inbox / rel]


def _state_of(svc: Service, rel: str) -> str | None:
    with Journal.open(readonly=True) as j:
        for state in ("done", "running", "queued"):
            if any(job.source == svc.inbox / rel for job in j.jobs(state)):
                return state
    return None


NAME_KINDS = [k for k in inputs.KINDS if k.engine == "any"]


@pytest.fixture(scope="module")
def copying(tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    root = tmp_path_factory.mktemp("hostile-copy")
    return _run_group(
        root,
        NAME_KINDS,
        "--set",
        "workers.cpu_workers=2",
        "--set",
        "workers.images_in_flight=2",
        restorer="hostile.hostile_restorer:CopyRestorer",
        timing=True,
    )


@pytest.mark.slow
@pytest.mark.parametrize("kind", NAME_KINDS, ids=lambda k: k.name)
def test_names_and_special_files_copy_engine(copying: Outcome, kind: inputs.Kind) -> None:
    problems = copying.problems_of(*copying.kind_rels[kind.name])
    assert not problems, "\n".join(problems)
    extra = EXTRA_CHECKS.get(kind.name)
    if extra is not None:
        extra(copying)


@pytest.mark.parametrize(
    "rel",
    [
        "deleted-while-queued.jpg",
        "replaced-while-queued.jpg",
        "symlinked-while-queued.jpg",
        "slow-replaced-while-running.jpg",
        "trickle.jpg",
        "twice.jpg",
        "twice-again.jpg",
        "slow-pair-1.jpg",
        "slow-pair-2.jpg",
        "stalled-copy.jpg",
        "trap/photo.jpg",
    ],
)
@pytest.mark.slow
def test_file_changing_under_the_service(copying: Outcome, rel: str) -> None:
    problems = copying.problems_of(rel)
    assert not problems, "\n".join(problems)
    if rel.startswith("slow-pair-"):
        _pair_restored_once(copying)
    if rel == "symlinked-while-queued.jpg":
        secret = (copying.svc.root / "outside" / "secret.jpg").read_bytes()
        assert not any(p.is_file() and p.read_bytes() == secret for p in copying.svc.outbox.rglob("*"))
    if rel == "trap/photo.jpg":
        assert list((copying.svc.root / "outside" / "trap").iterdir()) == []


@pytest.mark.slow
def test_invariant_copy_engine(copying: Outcome) -> None:
    assert not copying.problems, "\n".join(copying.problems) + "\n" + copying.svc.logs()
