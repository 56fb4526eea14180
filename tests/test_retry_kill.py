"""A retry killed at each of its steps, for real: the service is SIGKILLed inside ``send_back``
(``retry_kill_hook``) and started again. Whatever the step, the photo ends as one copy, in failed/
with its error file and its row on the Failed page (the retry undone, or tried again and failed
again), never also in the inbox, never as a second copy "NAME (1).jpg" beside a stale one.

Both ways a retry moves its file are covered: a hard link within one file system, and across file
systems (failed/ on a tmpfs) a hidden temp copy in the inbox, flushed, linked, the original removed.
The fast test kills one process at the step of issue 35 (linked, not yet unlinked) and recovers
in process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import tmpfs
from conftest import REPO
from dashboard_client import Dashboard, served_dashboard, wait_for
from service_harness import TESTS_DIR, ServiceProcess, write_atomic

from gpen_watch.config import Config, InboxConfig, WatchConfig
from gpen_watch.journal import Journal, hash_file
from gpen_watch.journal.browse import JournalBrowser
from gpen_watch.journal.journal import Job
from gpen_watch.journal.states import FAILURES, Hidden, JobState, Original
from gpen_watch.outbox import failed, recovery, retry

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

KILLED = -signal.SIGKILL


class KillHookService(ServiceProcess):
    """`gpen-watch run` with ``retry_kill_hook`` installed: each retry is killed at the step the
    file ``GW_RETRY_KILL_AT`` holds."""

    def command(self) -> list[str]:
        run = super().command()[3:]  # after `python -m gpen_watch`
        return [sys.executable, "-c", "import retry_kill_hook; retry_kill_hook.serve()", *run]


def photo_bytes(k: int) -> bytes:
    # Not a photo (so it fails at once), and large enough that half a copy is not all of it.
    return b"\xff\xd8 not really a photo, round %d\n" % k + bytes(range(256)) * 64


def journal_path(d: Dashboard) -> Path:
    return d.home / "state" / "gpen-watch" / "journal.sqlite3"


def jobs_of(d: Dashboard, name: str) -> list[Job]:
    browser = JournalBrowser.open(journal_path(d))
    try:
        return browser.named(name, (*FAILURES, JobState.QUEUED, JobState.RUNNING, JobState.DONE))
    finally:
        browser.close()


def shown_failure(d: Dashboard, name: str) -> Job | None:
    """The one failure of ``name`` on the Failed page, set aside with its error file, once nothing
    else of it is under way; None until then."""
    jobs = jobs_of(d, name)
    if any(j.state not in FAILURES or j.hidden == Hidden.RETRIED for j in jobs):
        return None
    shown = [j for j in jobs if j.hidden is None]
    if len(shown) != 1 or shown[0].original != Original.SET_ASIDE or shown[0].original_path is None:
        return None
    error = failed.error_file(shown[0].original_path)
    if not error.exists() or f"Run:      {shown[0].id}\n" not in error.read_text():
        return None
    return shown[0]


def settled(d: Dashboard, name: str, timeout: float = 30.0) -> Job:
    found: list[Job] = []

    def done() -> bool:
        assert d.svc.alive(), f"the service exited waiting for {name}\n{d.svc.logs()}"
        job = shown_failure(d, name)
        if job is not None and not os.path.lexists(d.svc.inbox / name):
            found.append(job)
            return True
        return False

    wait_for(done, timeout, f"{name} set aside, once, with its error file")
    return found[-1]


def problems_with(d: Dashboard, name: str, content: bytes, job: Job) -> list[str]:
    """What is wrong with the one copy of ``name`` (an empty list: nothing)."""
    out = []
    in_failed = sorted(
        str(p.relative_to(d.svc.failed)) for p in d.svc.failed.rglob("*") if name[:-4] in p.name
    )
    if in_failed != [name, name + failed.ERROR_SUFFIX]:
        out.append(f"failed/ holds {in_failed}")
    in_inbox = sorted(p.name for p in d.svc.inbox.iterdir() if name[:-4] in p.name)
    if in_inbox:
        out.append(f"the inbox still holds {in_inbox}")
    if job.original_path != d.svc.failed / name:
        out.append(f"the Failed row's file is {job.original_path}")
    elif job.original_path.read_bytes() != content:
        out.append("failed/ holds other bytes than the photo's")
    if d.get("/failed").text.count(f"{name}</a>") != 1:
        out.append("the Failed page does not list it once")
    return out


@dataclass
class Hook:
    at: Path
    log: Path

    def arm(self, step: int) -> None:
        self.at.write_text(str(step))

    def lines(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


@pytest.fixture(params=["link", "copy"])
def crossing(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """ "link": failed/ and the inbox on one file system; "copy": failed/ on a tmpfs of its own."""
    (tmp_path / "svc").mkdir()
    if request.param == "link":
        yield "link"
        return
    if not tmpfs.can_mount():
        pytest.skip("needs a tmpfs mount (root) for failed/ on another file system")
    with tmpfs.mounted(tmp_path / "svc" / "failed", size="16m"):
        yield "copy"


def one_round(d: Dashboard, hook: Hook, k: int) -> tuple[str, list[str]]:
    """Fail a photo, retry it killed at step ``k``, restart, retry it once more: the step killed
    at ("completed N" past the last) and what was wrong after it."""
    name, content = f"k{k} bad.jpg", photo_bytes(k)
    write_atomic(d.svc.inbox / name, content)
    settled(d, name)
    hook.arm(k)
    before = len(hook.lines())
    d.cli("retry", name)  # the service dies under it (or, past the last step, does it all)
    wait_for(lambda: len(hook.lines()) > before, 30, f"round {k}'s retry")
    at = hook.lines()[-1]
    hook.arm(0)
    if at.startswith("killed"):
        assert d.svc.proc is not None
        assert d.svc.proc.wait(30) == KILLED
        d.restart()
    try:
        return at, after_the_kill(d, name, content, at)
    except AssertionError as exc:  # a round that never settles is one more problem, not the end
        return at, [f"{at}: {exc}"]


def after_the_kill(d: Dashboard, name: str, content: bytes, at: str) -> list[str]:
    first = settled(d, name)
    problems = [f"{at}: {p}" for p in problems_with(d, name, content, first)]
    # Retried once more (no kill): it fails again under its own name, still one copy.
    again = d.cli("retry", name)
    if again.returncode != 0:
        return [*problems, f"{at}: the next retry was refused: {again.stderr.strip()}"]
    wait_for(lambda: getattr(shown_failure(d, name), "id", first.id) != first.id, 30, "its new failure")
    return problems + [f"{at}, then: {p}" for p in problems_with(d, name, content, settled(d, name))]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_retry_killed_at_each_step_ends_as_one_copy_on_the_failed_page(
    tmp_path: Path, crossing: str
) -> None:
    hook = Hook(tmp_path / "kill-at", tmp_path / "kills.log")
    env = {"GW_RETRY_KILL_AT": str(hook.at), "GW_RETRY_KILL_LOG": str(hook.log)}
    problems: list[str] = []
    steps: list[str] = []
    with served_dashboard(tmp_path / "svc", env=env, service=KillHookService) as d:
        for k in range(1, 40):
            at, wrong = one_round(d, hook, k)
            problems += wrong
            if at.startswith("completed"):
                break
            steps.append(at.split(" ", 2)[2])
    wrong = sorted({p.split(":")[0].removesuffix(", then") for p in problems})
    print(f"{crossing}: killed at each of {len(steps)} steps {steps}; left wrong after {wrong}")
    assert not problems, "\n".join(problems)
    assert len(steps) >= (4 if crossing == "link" else 9), steps


# --- fast: one process killed at the step, and the states recovery proves before removing --


_SEND_BACK_KILLED = """
import json, sys
from pathlib import Path
import retry_kill_hook
from gpen_watch.journal import Journal
from gpen_watch.outbox import retry

args = json.loads(sys.argv[1])
retry_kill_hook.install(lambda: args["kill_at"], Path(args["log"]))
retry.send_back(Journal.open(args["journal"]), args["job"], [Path(args["inbox"])])
"""


@dataclass
class Folders:
    inbox: Path
    failed: Path
    cfg: Config
    journal: Journal
    job: Job

    @classmethod
    def with_a_failure(cls, root: Path, content: bytes) -> Folders:
        inbox = root / "inbox"
        (inbox / "sub").mkdir(parents=True)
        cfg = Config(watch=WatchConfig(inboxes=[InboxConfig(inbox)], outbox=root / "outbox"))
        journal = Journal.open(root / "state" / "journal.sqlite3")
        job_id = cls.drop(journal, cfg, content)
        return cls(inbox, root / "failed", cfg, journal, journal.require(job_id))

    @staticmethod
    def drop(journal: Journal, cfg: Config, content: bytes) -> int:
        """The photo dropped (or found by the scan) at inbox/sub/a.jpg, and failed as not a photo."""
        inbox = cfg.watch.inboxes[0].path
        path = inbox / "sub" / "a.jpg"
        if not path.exists():
            path.write_bytes(content)
        st = path.stat()
        job = journal.add(path, inbox, "sub/a.jpg", st.st_size, st.st_mtime, hash_file(path)).job
        assert [j.id for j in journal.claim_batch(1, "w0").jobs] == [job.id]
        failed.fail(journal, job.id, "not a photo", cfg, kind=JobState.UNSUPPORTED)
        return job.id

    def names(self) -> tuple[list[str], list[str]]:
        def under(folder: Path) -> list[str]:
            return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if not p.is_dir())

        return under(self.inbox), under(self.failed)


def test_a_retry_killed_between_its_link_and_unlink_ends_as_one_copy(tmp_path: Path) -> None:
    """Issue 35's step, for real: the process is SIGKILLed once the photo is linked into its inbox,
    before failed/'s name is removed. The restart keeps the inbox copy (which the scan takes), and
    when it fails again it goes back under its own name, not as "a (1).jpg" beside a stale one."""
    content = photo_bytes(0)
    f = Folders.with_a_failure(tmp_path, content)
    assert f.names() == ([], ["sub/a.jpg", "sub/a.jpg.error.txt"])
    f.journal.close()
    args = {
        "kill_at": "unlink",
        "log": str(tmp_path / "kills.log"),
        "journal": str(tmp_path / "state" / "journal.sqlite3"),
        "job": f.job.id,
        "inbox": str(f.inbox),
    }
    pythonpath = os.pathsep.join([str(TESTS_DIR), str(REPO)])
    proc = subprocess.run(
        [sys.executable, "-c", _SEND_BACK_KILLED, json.dumps(args)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": pythonpath},
        timeout=60,
    )
    assert proc.returncode == KILLED, proc.stderr
    assert (tmp_path / "kills.log").read_text() == "killed 4 unlink\n"
    assert f.names() == (["sub/a.jpg"], ["sub/a.jpg", "sub/a.jpg.error.txt"])  # the doubled file
    f.journal = Journal.open(tmp_path / "state" / "journal.sqlite3")
    report = recovery.recover(f.journal, f.cfg)
    assert (report.retries.finished, report.retries.undone) == (1, 0)
    # One copy, in the inbox; the old error file stays until the new try ends.
    assert f.names() == (["sub/a.jpg"], ["sub/a.jpg.error.txt"])
    assert (f.inbox / "sub" / "a.jpg").read_bytes() == content
    assert f.journal.require(f.job.id).hidden == Hidden.RETRIED
    again = Folders.drop(f.journal, f.cfg, content)  # the scan's new job, failing again
    assert f.names() == ([], ["sub/a.jpg", "sub/a.jpg.error.txt"])
    assert f"Run:      {again}\n" in (f.failed / "sub" / "a.jpg.error.txt").read_text()
    assert [j.id for j in f.journal.failures_shown()] == [again]
    f.journal.close()


@pytest.mark.parametrize("left", ["a copy", "another photo", "half a temp copy", "a link to it"])
def test_recovery_removes_one_of_two_only_once_they_are_proved_the_same_photo(
    tmp_path: Path, left: str
) -> None:
    """The states a killed retry can leave, made on disk: the failed/ copy goes only when the inbox
    holds the same photo (same bytes after a copy across file systems); another photo of that name
    keeps both, and puts the failure back on the Failed page; a half-written temp copy goes."""
    content = photo_bytes(0)
    f = Folders.with_a_failure(tmp_path, content)
    assert f.journal.hide(f.job.id, Hidden.RETRIED, "sent back (then killed)")
    kept, dst = f.failed / "sub" / "a.jpg", f.inbox / "sub" / "a.jpg"
    if left == "a copy":
        dst.write_bytes(content)
    elif left == "another photo":
        dst.write_bytes(content[:-1] + b"!")  # same size, other bytes
    elif left == "half a temp copy":
        retry.temp_copy(dst, f.job.id).write_bytes(content[: len(content) // 2])
    else:
        dst.symlink_to(kept)  # the same bytes through a link, but not a second file: never removed
    report = recovery.recover(f.journal, f.cfg).retries
    inbox, in_failed = f.names()
    job = f.journal.require(f.job.id)
    if left == "a copy":
        assert (report.finished, inbox, in_failed) == (1, ["sub/a.jpg"], ["sub/a.jpg.error.txt"])
        assert dst.read_bytes() == content and job.hidden == Hidden.RETRIED
    else:
        assert report.finished == 0 and "sub/a.jpg" in in_failed and kept.read_bytes() == content
        assert job.hidden is None  # back on the Failed page
        assert inbox == ([] if left == "half a temp copy" else ["sub/a.jpg"])
        assert report.temps_removed == (left == "half a temp copy")
    f.journal.close()
