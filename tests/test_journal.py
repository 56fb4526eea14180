"""The job journal: states, duplicates, atomic claims, and surviving a SIGKILLed writer."""

from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from gpen_watch.base.errors import GpenWatchError
from gpen_watch.journal import Journal, hash_file, schema
from gpen_watch.journal.journal import VANISHED
from gpen_watch.journal.states import ACTIVE, TRANSITIONS, JobState, TransitionError, check_move, sql_in

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def journal(tmp_path: Path):
    j = Journal.open(tmp_path / "state" / "journal.sqlite3")
    yield j
    j.close()


def add(j: Journal, name: str, content: str = "", size: int = 10, inbox: str = "/in"):
    digest = hashlib.sha256((content or name).encode()).hexdigest()
    return j.add(f"{inbox}/{name}", inbox, name, size, 1000.0, digest)


def test_open_creates_wal_database_with_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "journal.sqlite3"
    with Journal.open(path):
        pass
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.VERSION
    conn.close()
    with Journal.open(path) as j:  # reopening does not migrate again
        assert j.counts()["queued"] == 0
        assert j.integrity_check() == "ok"


def test_journal_from_newer_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    Journal.open(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {schema.VERSION + 1}")
    conn.close()
    with pytest.raises(GpenWatchError, match="newer gpen-watch"):
        Journal.open(path)


def test_damaged_journal_is_reported_with_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(GpenWatchError, match="move the file aside"):
        Journal.open(path)


def test_add_creates_a_queued_job_with_history(journal: Journal) -> None:
    r = add(journal, "a.jpg")
    assert r.status == "new"
    assert r.is_new
    job = journal.get(r.job.id)
    assert job is not None
    assert job.state == "queued"
    assert job.attempts == 0
    assert job.source == Path("/in/a.jpg")
    assert job.rel == Path("a.jpg")
    assert job.size == 10
    assert job.mtime == 1000.0
    assert [e.kind for e in journal.history(job.id)] == ["added"]


def test_same_file_seen_again_is_known_not_a_new_job(journal: Journal) -> None:
    first = add(journal, "a.jpg")
    again = add(journal, "a.jpg")
    assert again.status == "known"
    assert again.job.id == first.job.id
    assert journal.counts()["queued"] == 1


def test_same_photo_under_another_name_after_done_is_linked_to_it_and_claimed_as_a_copy(
    journal: Journal,
) -> None:
    first = add(journal, "a.jpg", content="photo")
    journal.claim_batch(1, "w0")
    journal.finish(first.job.id, "/out/a.jpg", faces=2, timings={"restore": 1.5}, notes=["ok"])
    dup = add(journal, "copy of a.jpg", content="photo")
    assert dup.status == "duplicate"
    assert dup.duplicate_of is not None
    assert dup.duplicate_of.id == first.job.id
    assert dup.message == "same content as /in/a.jpg: its result /out/a.jpg is copied under this name"
    # Queued for its own result, linked to the first.
    assert dup.job.state == "queued"
    assert dup.job.duplicate_of == first.job.id
    assert dup.job.output is None
    # The duplicate file seen again by a rescan is not announced twice.
    assert add(journal, "copy of a.jpg", content="photo").status == "known"
    batch = journal.claim_batch(4, "w0")
    assert batch.jobs == []
    (copy,) = batch.copies
    assert copy.job.id == dup.job.id
    assert copy.first.id == first.job.id
    assert copy.first.output == Path("/out/a.jpg")
    assert copy.job.state == "running"
    # Its own output: finishing a linked job makes it a duplicate, not a second "done".
    assert journal.finish(dup.job.id, "/out/copy of a.jpg", faces=2)
    ended = journal.require(dup.job.id)
    assert ended.state == "duplicate"
    assert ended.output == Path("/out/copy of a.jpg")
    assert ended.duplicate_of == first.job.id
    assert journal.counts()["done"] == 1
    assert journal.counts()["duplicate"] == 1


def test_identical_content_while_first_is_still_queued_is_its_own_job(journal: Journal) -> None:
    add(journal, "a.jpg", content="photo")
    assert add(journal, "b.jpg", content="photo").status == "new"


def test_twin_waits_for_the_first_and_is_then_claimed_as_a_copy_of_it(journal: Journal) -> None:
    first = add(journal, "a.jpg", content="photo")
    twin = add(journal, "b.jpg", content="photo")
    other = add(journal, "c.jpg", content="other")
    batch = journal.claim_batch(3, "w0")
    assert [j.id for j in batch.jobs] == [first.job.id, other.job.id]  # the twin is held, not skipped over
    assert batch.held == 1
    assert batch.copies == []
    assert journal.claim_batch(3, "w0").jobs == []  # still held while the first runs
    assert journal.require(twin.job.id).state == "queued"
    journal.finish(first.job.id, "/out/a.jpg")
    batch = journal.claim_batch(3, "w0")
    assert batch.jobs == []
    assert batch.held == 0
    (copy,) = batch.copies
    assert copy.job.id == twin.job.id
    assert copy.first.id == first.job.id
    assert copy.job.duplicate_of == first.job.id
    assert copy.job.state == "running"
    assert [e.kind for e in journal.history(twin.job.id)] == ["added", "claimed"]
    assert journal.history(twin.job.id)[-1].detail == f"same content as run {first.job.id}"
    assert add(journal, "b.jpg", content="photo").status == "known"  # a rescan does not announce it again


def test_twins_that_waited_for_a_failed_first_repeat_its_failure(journal: Journal) -> None:
    first = add(journal, "a.jpg", content="photo")
    twins = [add(journal, f"b{i}.jpg", content="photo").job.id for i in range(2)]
    assert [j.id for j in journal.claim_batch(5, "w0").jobs] == [first.job.id]
    journal.fail(first.job.id, "truncated JPEG")
    batch = journal.claim_batch(5, "w0")
    assert batch.jobs == []  # not restored again
    assert [t.job.id for t in batch.repeats] == twins
    assert {t.first.id for t in batch.repeats} == {first.job.id}
    assert {t.first.error for t in batch.repeats} == {"truncated JPEG"}
    assert [journal.require(i).duplicate_of for i in twins] == [first.job.id] * 2


def test_the_same_photo_dropped_after_its_failure_was_recorded_is_retried(journal: Journal) -> None:
    first = add(journal, "a.jpg", content="photo")
    journal.claim_batch(1, "w0")
    journal.fail(first.job.id, "the worker ran out of memory")
    later = add(journal, "again.jpg", content="photo")
    assert later.status == "new"
    batch = journal.claim_batch(5, "w0")
    assert [j.id for j in batch.jobs] == [later.job.id]
    assert batch.repeats == []


def test_a_copy_whose_first_result_is_gone_is_restored_itself(journal: Journal) -> None:
    first = add(journal, "a.jpg", content="photo")
    journal.claim_batch(1, "w0")
    journal.finish(first.job.id, "/out/a.jpg")
    dup = add(journal, "b.jpg", content="photo")
    (copy,) = journal.claim_batch(1, "w0").copies
    assert journal.restore_instead(copy.job.id, "the first result was deleted")
    assert journal.require(dup.job.id).duplicate_of is None
    journal.finish(dup.job.id, "/out/b.jpg", faces=1)
    assert journal.require(dup.job.id).state == "done"


def test_a_copy_dropped_again_under_the_first_name_ends_without_an_output_of_its_own(
    journal: Journal,
) -> None:
    first = add(journal, "a.jpg", content="photo")
    journal.claim_batch(1, "w0")
    journal.finish(first.job.id, "/out/a.jpg")
    journal.set_original(first.job.id, "archived", "/originals/a.jpg")
    again = add(journal, "a.jpg", content="photo")
    (copy,) = journal.claim_batch(1, "w0").copies
    assert journal.end_as_duplicate(copy.job.id, "dropped again: its result is /out/a.jpg")
    ended = journal.require(again.job.id)
    assert (ended.state, ended.output, ended.duplicate_of) == ("duplicate", None, first.job.id)


def test_a_version_1_journal_is_migrated_and_its_duplicates_lose_the_borrowed_output(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(schema.MIGRATIONS[0] + "\nPRAGMA user_version = 1;")
    cols = "source, inbox, rel, size, mtime, sha256, created, state, output, duplicate_of"
    conn.execute(
        f"INSERT INTO jobs (id, {cols}) VALUES (1, '/in/a.jpg', '/in', 'a.jpg', 5, 0, 'h', 0, 'done', '/out/a.jpg', NULL)"
    )
    conn.execute(
        f"INSERT INTO jobs (id, {cols}) VALUES (2, '/in/b.jpg', '/in', 'b.jpg', 5, 0, 'h', 0, 'duplicate', '/out/a.jpg', 1)"
    )
    conn.commit()
    conn.close()
    with Journal.open(path) as j:
        assert j._read("PRAGMA user_version")[0][0] == schema.VERSION
        old_dup = j.require(2)
        assert (old_dup.state, old_dup.duplicate_of, old_dup.output) == ("duplicate", 1, None)
        assert j.require(1).output == Path("/out/a.jpg")


def test_held_twins_do_not_hold_up_the_rest_of_the_queue(journal: Journal) -> None:
    # More twins than one page of the queue walk: the jobs behind them are still found.
    ids = [add(journal, f"{i}.jpg", content="same" if i < 150 else f"x{i}").job.id for i in range(160)]
    batch = journal.claim_batch(4, "w0")
    assert [j.id for j in batch.jobs] == [ids[0], *ids[150:153]]
    assert batch.held == 149


def test_redrop_after_original_was_archived_is_a_duplicate_but_kept_original_is_known(
    journal: Journal,
) -> None:
    a = add(journal, "a.jpg", content="A")
    b = add(journal, "b.jpg", content="B")
    journal.claim_batch(2, "w0")
    journal.finish(a.job.id, "/out/a.jpg")
    journal.finish(b.job.id, "/out/b.jpg")
    journal.set_original(a.job.id, "archived", "/originals/a.jpg")
    journal.set_original(b.job.id, "kept", "/in/b.jpg")
    assert add(journal, "a.jpg", content="A").status == "duplicate"  # user dropped it again
    assert add(journal, "b.jpg", content="B").status == "known"  # still sitting there (keep policy)


def test_failed_file_dropped_again_after_being_set_aside_is_retried(journal: Journal) -> None:
    a = add(journal, "a.jpg")
    journal.claim_batch(1, "w0")
    journal.fail(a.job.id, "truncated JPEG")
    assert add(journal, "a.jpg").status == "known"  # still in the inbox, not yet set aside
    journal.set_original(a.job.id, "set-aside", "/failed/a.jpg")
    assert add(journal, "a.jpg").status == "new"


def test_original_waiting_for_its_folder_is_known_and_listed_until_moved(journal: Journal) -> None:
    a = add(journal, "a.jpg", content="A")
    b = add(journal, "b.jpg", content="B")
    journal.claim_batch(2, "w0")
    journal.finish(a.job.id, "/out/a.jpg")
    journal.fail(b.job.id, "truncated JPEG")
    journal.set_original(a.job.id, "waiting", "/originals")
    journal.set_original(b.job.id, "waiting", "/failed")
    assert [(j.id, j.original_path) for j in journal.waiting_originals()] == [
        (a.job.id, Path("/originals")),
        (b.job.id, Path("/failed")),
    ]
    # The start-up scan or a rescan finds them in the inbox: the same jobs, not new drops.
    assert add(journal, "a.jpg", content="A").status == "known"
    assert add(journal, "b.jpg", content="B").status == "known"
    assert journal.pending_originals() == []  # not an interrupted move: the service retries these
    journal.set_original(a.job.id, "archived", "/originals/a.jpg")
    assert [j.id for j in journal.waiting_originals()] == [b.job.id]


def test_file_replaced_while_queued_supersedes_the_old_job(journal: Journal) -> None:
    old = add(journal, "a.jpg", content="v1")
    new = add(journal, "a.jpg", content="v2")
    assert new.status == "new"
    assert new.superseded == [old.job.id]
    gone = journal.get(old.job.id)
    assert gone is not None
    assert gone.state == "gone"
    assert "replaced" in (gone.error or "")


def test_claim_moves_oldest_queued_to_running_and_counts_attempts(journal: Journal) -> None:
    ids = [add(journal, f"{i}.jpg").job.id for i in range(5)]
    claimed = journal.claim_batch(2, "cuda:0").jobs
    assert [j.id for j in claimed] == ids[:2]
    assert all(j.state == "running" and j.attempts == 1 and j.worker == "cuda:0" for j in claimed)
    assert journal.claim_batch(0, "x").jobs == []
    assert journal.counts() == {**journal.counts(), "queued": 3, "running": 2}
    assert journal.history(ids[0])[-1].detail == "attempt 1 on cuda:0"


def test_concurrent_claims_never_hand_out_a_job_twice(journal: Journal) -> None:
    for i in range(200):
        add(journal, f"{i}.jpg")
    got: list[int] = []
    lock = threading.Lock()

    def worker(name: str) -> None:
        while batch := journal.claim_batch(3, name).jobs:
            with lock:
                got.extend(j.id for j in batch)

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == sorted(set(got))
    assert len(got) == 200


def test_claims_from_two_processes_never_overlap(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    with Journal.open(path) as j:
        for i in range(300):
            add(j, f"{i}.jpg")
    script = textwrap.dedent(
        f"""
        import sys
        from gpen_watch.journal import Journal
        j = Journal.open({str(path)!r})
        while batch := j.claim_batch(2, sys.argv[1]).jobs:
            print(*[x.id for x in batch], flush=True)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen([sys.executable, "-c", script, f"p{i}"], stdout=subprocess.PIPE, text=True, env=env)
        for i in range(2)
    ]
    ids = [int(x) for p in procs for x in p.communicate(timeout=60)[0].split()]
    assert sorted(ids) == list(range(1, 301))


def test_transitions_and_their_guards(journal: Journal) -> None:
    a, b, c, d = (add(journal, f"{n}.jpg").job.id for n in "abcd")
    assert journal.finish(a, "/out/a.jpg")  # queued -> done is allowed (a late result after a requeue)
    journal.claim_batch(3, "w")  # b, c, d
    assert journal.move(b, JobState.QUEUED, "worker crashed")
    assert not journal.move(b, JobState.QUEUED, "again")  # only running jobs are requeued
    assert journal.fail(c, "not a JPEG", kind="unsupported")
    assert not journal.fail(c, "twice")
    assert not journal.finish(c, "/out/c.jpg")  # ended jobs stay ended
    assert journal.move(b, JobState.GONE, VANISHED)  # queued again, so it can go
    assert not journal.move(d, JobState.GONE, VANISHED)  # running: the worker will find out
    with pytest.raises(ValueError):
        journal.fail(d, "x", kind="oops")  # type: ignore[arg-type]
    states = {j: journal.get(j).state for j in (a, b, c, d)}  # type: ignore[union-attr]
    assert states == {a: "done", b: "gone", c: "unsupported", d: "running"}
    kinds = [e.kind for e in journal.history(b)]
    assert kinds == ["added", "claimed", "requeued", "gone"]


def test_requeue_running_after_crash_and_gives_up_after_max_attempts(journal: Journal) -> None:
    a, b = add(journal, "a.jpg").job.id, add(journal, "b.jpg").job.id
    journal.claim_batch(2, "w")
    journal.move(b, JobState.QUEUED, "x")
    journal.claim_batch(1, "w")  # b: attempt 2
    assert journal.requeue_running("service restarted", max_attempts=2) == 1
    assert journal.get(a).state == "queued"  # type: ignore[union-attr]
    failed = journal.get(b)
    assert failed is not None
    assert failed.state == "failed"
    assert "gave up after 2" in (failed.error or "")


def test_output_reservations_are_exclusive_among_active_jobs(journal: Journal) -> None:
    a, b = add(journal, "a.jpg").job.id, add(journal, "b.jpg").job.id
    assert journal.reserve_output(a, "/out/x.jpg")
    assert journal.output_reserved("/out/x.jpg")
    assert not journal.output_reserved("/out/x.jpg", exclude_job=a)
    assert not journal.reserve_output(b, "/out/x.jpg")
    assert journal.reserve_output(b, "/out/x (1).jpg")
    journal.claim_batch(2, "w")
    journal.finish(a, "/out/x.jpg")
    assert not journal.output_reserved("/out/x.jpg")  # done: the file itself now holds the name
    assert journal.get(a).output == Path("/out/x.jpg")  # type: ignore[union-attr]


def test_today_counts_photos_without_a_face_apart(tmp_path: Path) -> None:
    now = [time.mktime((2024, 5, 1, 12, 0, 0, 0, 0, -1))]
    j = Journal.open(tmp_path / "j.sqlite3", clock=lambda: now[0])
    ids = [add(j, f"{i}.jpg").job.id for i in range(4)]
    j.claim_batch(4, "w")
    j.finish(ids[0], "/out/0.jpg", faces=2)
    j.finish(ids[1], "/out/1.jpg", faces=0)  # a landscape: done, nothing restored
    j.finish(ids[2], "/out/2.jpg", faces=1)
    j.fail(ids[3], "truncated JPEG")
    assert j.today() == (2, 1, 3)
    assert j.done_today() == 3  # every finished photo, faces or not


def test_status_queries(tmp_path: Path) -> None:
    now = [time.mktime((2024, 5, 1, 12, 0, 0, 0, 0, -1))]
    j = Journal.open(tmp_path / "j.sqlite3", clock=lambda: now[0])
    ids = [add(j, f"{i}.jpg").job.id for i in range(4)]
    j.claim_batch(4, "w")
    now[0] -= 86400  # yesterday
    j.finish(ids[0], "/out/0.jpg", faces=1)
    now[0] += 86400
    j.finish(ids[1], "/out/1.jpg", faces=3)
    j.fail(ids[2], "truncated JPEG")
    now[0] += 1
    j.fail(ids[3], "text file", kind="unsupported")
    assert j.done_today() == 1
    assert j.done_since(0) == (2, 4)
    assert j.today() == (1, 0, 3)
    assert [x.id for x in j.recent_errors(5)] == [ids[3], ids[2]]
    assert j.recent_errors(5)[1].error == "truncated JPEG"
    counts = j.counts()
    assert counts["done"] == 2
    assert counts["failed"] == 1
    assert counts["unsupported"] == 1
    assert set(counts) == {str(state) for state in JobState}
    j.log_event(ids[1], "note", "oom: retrying at scale 0.5", worker="cuda:0")
    assert j.history(ids[1])[-1].detail == "oom: retrying at scale 0.5"
    j.close()


def test_hash_file_streams_and_refuses_special_files(tmp_path: Path) -> None:
    data = os.urandom(3 * (1 << 20) + 123)
    f = tmp_path / "big.bin"
    f.write_bytes(data)
    assert hash_file(f) == hashlib.sha256(data).hexdigest()
    link = tmp_path / "link.jpg"
    link.symlink_to(f)
    with pytest.raises(OSError):
        hash_file(link)
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "pipe.jpg"
        os.mkfifo(fifo)
        with pytest.raises(OSError):
            hash_file(fifo)  # refused at once, never blocks waiting for a writer


# --- crash safety: a real writer process, SIGKILLed -----------------------------------------------

_WRITER = textwrap.dedent(
    """
    import hashlib, os, sys
    from gpen_watch.journal import Journal

    def say(kind, job_id):
        # One write(2) per line: a pipe write that small is atomic, so the kill cannot tear a line.
        # (print() writes each argument separately when PYTHONUNBUFFERED is set.)
        os.write(1, f"{kind} {job_id}\\n".encode())

    j = Journal.open(sys.argv[1])
    i = int(sys.argv[2])
    while True:
        i += 1
        r = j.add(f"/in/{i}.jpg", "/in", f"{i}.jpg", i, 1.0, hashlib.sha256(str(i).encode()).hexdigest())
        say("added", r.job.id)
        for job in j.claim_batch(2, "w").jobs:
            say("claimed", job.id)
            if job.id % 3 == 0:
                j.finish(job.id, f"/out/{job.id}.jpg", faces=1, timings={"restore": 0.1})
                say("finished", job.id)
    """
)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkilled_writer_leaves_a_consistent_journal_and_running_jobs_are_requeued(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    acknowledged: dict[int, str] = {}
    start = 0
    for round_ in range(4):
        with subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path), str(start)], stdout=subprocess.PIPE, text=True, env=env
        ) as proc:
            assert proc.stdout is not None
            lines = []
            # Let it get some work done, then kill it wherever it happens to be.
            while len(lines) < 40 + 17 * round_:
                line = proc.stdout.readline()
                assert line, "writer died on its own"
                lines.append(line.split())
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            rest = proc.stdout.read().splitlines()
        lines += [ln.split() for ln in rest if ln.strip()]
        for kind, job_id in lines:
            acknowledged[int(job_id)] = kind
        start += 1000

        with Journal.open(path) as j:
            assert j.integrity_check() == "ok"
            # Everything the writer saw committed is there, at least as far along.
            order = {"added": 0, "claimed": 1, "finished": 2}
            for job_id, kind in acknowledged.items():
                job = j.get(job_id)
                assert job is not None, f"job {job_id} lost"
                seen = {"queued": 0, "running": 1, "done": 2}[job.state]
                assert seen >= order[kind] or (job.state == "queued" and kind == "claimed")
            running = j.counts()["running"]
            assert j.requeue_running("writer was killed") == running
            assert j.counts()["running"] == 0


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_inside_a_transaction_rolls_it_back(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    with Journal.open(path) as j:
        job_id = add(j, "a.jpg").job.id
    script = textwrap.dedent(
        f"""
        from gpen_watch.journal import Journal
        j = Journal.open({str(path)!r})
        with j._write() as conn:
            n = 0
            while True:
                j._event(conn, {job_id}, "spam", "x" * 1000)
                n += 1
                if n == 5000:  # well past the page cache: pages are spilling into the WAL
                    print("inside", flush=True)
        """
    )
    with subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    ) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "inside"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    with Journal.open(path) as j:
        assert j.integrity_check() == "ok"
        assert [e.kind for e in j.history(job_id)] == ["added"]
        assert add(j, "b.jpg").status == "new"  # and it is writable again


def test_file_dropped_again_after_it_went_missing_is_a_new_job(journal: Journal) -> None:
    first = add(journal, "a.jpg")
    assert journal.move(first.job.id, JobState.GONE, VANISHED)
    again = add(journal, "a.jpg")
    assert again.status == "new"
    assert again.job.id != first.job.id


def test_status_reader_opens_read_only_beside_the_running_writer(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    with Journal.open(path) as writer:
        add(writer, "a.jpg")
        with Journal.open(path, readonly=True) as reader:
            assert reader.counts()["queued"] == 1
            add(writer, "b.jpg")
            assert reader.counts()["queued"] == 2  # sees the writer's commits (WAL)
            with pytest.raises(sqlite3.OperationalError):
                reader.claim_batch(1, "nope")


def test_every_named_job_state_is_one_the_schema_accepts_and_no_other(tmp_path: Path) -> None:
    # A state added to JobState without a migration would fail at the first write; this says so first.
    assert tuple(JobState) == tuple(JobState(s) for s in schema.V1_STATES)
    with Journal.open(tmp_path / "j.sqlite3") as j:
        j.add(tmp_path / "a.jpg", tmp_path, "a.jpg", 1, 1.0, "0" * 64)
        conn = sqlite3.connect(j.path)
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("UPDATE jobs SET state = 'queud'")
        conn.close()


def test_sql_in_lists_the_states_as_sql_string_literals() -> None:
    assert sql_in(ACTIVE) == "('queued', 'running')"


def test_a_version_2_journal_gains_the_node_column_and_ran_on_records_it(tmp_path: Path) -> None:
    path = tmp_path / "v2.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(schema.MIGRATIONS[0] + schema.MIGRATIONS[1] + "\nPRAGMA user_version = 2;")
    conn.execute(
        "INSERT INTO jobs (id, source, inbox, rel, size, mtime, sha256, created, state, output)"
        " VALUES (1, '/in/a.jpg', '/in', 'a.jpg', 5, 0, 'h', 0, 'done', '/out/a.jpg')"
    )
    conn.commit()
    conn.close()
    with Journal.open(path) as j:
        assert j._read("PRAGMA user_version")[0][0] == schema.VERSION
        assert j.require(1).node is None  # restored before nodes were recorded: unknown
        j.ran_on(1, "studio-b (192.168.1.12)")
        assert j.require(1).node == "studio-b (192.168.1.12)"


def test_failures_that_were_a_bug_of_ours_are_counted_apart_also_in_a_migrated_journal(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v3.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript("".join(schema.MIGRATIONS[:3]) + "\nPRAGMA user_version = 3;")
    conn.execute(
        "INSERT INTO jobs (id, source, inbox, rel, size, mtime, sha256, created, state, error)"
        " VALUES (1, '/in/old.jpg', '/in', 'old.jpg', 5, 0, 'h', 0, 'failed', 'truncated JPEG')"
    )
    conn.commit()
    conn.close()
    with Journal.open(path) as j:
        assert j.bug_failures() == 0  # failed before faults were recorded: the file's
        bug, damaged, crashed = (add(j, name) for name in ("bug.eps", "cut.jpg", "crash.png"))
        j.claim_batch(3, "w0")
        assert j.fail(bug.job.id, "gpen-watch could not decode it: TypeError: ...", ours=True)
        assert j.fail(damaged.job.id, "truncated JPEG")
        assert j.counts()["failed"] == 3 and j.bug_failures() == 1
        # Retried and given up on for another reason: no longer counted as ours.
        conn = j._conn
        conn.execute("UPDATE jobs SET state = 'running', attempts = 3 WHERE id = ?", (bug.job.id,))
        assert j.requeue_running("worker crashed", max_attempts=3) == 1  # crash.png goes back
        assert j.require(bug.job.id).state == "failed" and j.bug_failures() == 0
        assert j.require(crashed.job.id).state == "queued"


def test_a_worker_that_dies_while_restoring_a_job_charges_it_an_attempt_in_the_journal(
    journal: Journal,
) -> None:
    """A local process or a remote node alike: the pool's policy reports the death, the service
    records it (``jobs.on_event``), and `attempts` counts that try, as the failure file and
    `max_attempts` do."""
    from gpen_watch.config import WorkerConfig, load
    from gpen_watch.dispatch import protocol as P
    from gpen_watch.dispatch.devices import WorkerSlot
    from gpen_watch.dispatch.policy import FaultPolicy
    from gpen_watch.dispatch.tasks import Task
    from gpen_watch.restore.api import FileJob
    from gpen_watch.service import jobs
    from gpen_watch.service.running import Running

    job_id = add(journal, "a.jpg").job.id
    (job,) = journal.claim_batch(1, "10.0.0.2/cpu").jobs
    assert job.attempts == 1
    slot = WorkerSlot("10.0.0.2/cpu", "cpu", "10.0.0.2 CPU", None, 2, node="node (10.0.0.2)")
    policy = FaultPolicy(
        [slot], WorkerConfig(max_attempts=3), clock=time.monotonic, start_timeout=300.0, silence_timeout=60.0
    )
    policy.spawned(0, None)
    policy.on_message(0, P.Ready(pid=None, device="cpu", threads=2), [])
    policy.pending.append(Task(job_id, FileJob(Path("/in/a.jpg"), Path("/out/a.tmp"))))
    policy.dispatch()
    policy.on_message(0, P.Took(job_id), [])
    events: list = []
    policy.on_exit(0, "node 10.0.0.2 stopped answering; its photos are requeued", events, clean=False)
    run = Running(load(None), journal, None, None, threading.Event())  # type: ignore[arg-type]
    for ev in events:
        jobs.on_event(run, ev)
    again = journal.get(job_id)
    assert again is not None
    assert (again.state, again.attempts) == ("running", 2)  # the pool runs it again: attempt 2
    assert journal.history(job_id)[-1].kind == "retry"
    assert not journal.charge_attempt(add(journal, "queued.jpg").job.id, "x")  # only a running job


def test_the_transition_table_refuses_a_move_it_does_not_list() -> None:
    with pytest.raises(TransitionError, match="from running to gone"):
        check_move(JobState.GONE, [JobState.RUNNING])
    with pytest.raises(TransitionError, match="from done to queued"):
        check_move(JobState.QUEUED, [JobState.DONE])
    # Nothing leaves an ended state, and each move's sources are what the table lists.
    assert not any(TRANSITIONS[s] for s in (JobState.DONE, JobState.FAILED, JobState.GONE))
    assert check_move(JobState.QUEUED) == (JobState.RUNNING,)
    assert check_move(JobState.GONE) == (JobState.QUEUED,)
    assert check_move(JobState.FAILED) == ACTIVE


def test_journal_moves_a_job_only_along_the_table(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j.sqlite3") as journal:
        job = journal.add(tmp_path / "a.jpg", tmp_path, "a.jpg", 3, 0.0, "aa").job
        assert not journal.move(job.id, JobState.QUEUED, "not running: nothing to hand back")
        assert journal.move(job.id, JobState.FAILED, "broken", ours=True)
        assert journal.require(job.id).state == JobState.FAILED
        assert journal.bug_failures() == 1
        # Ended: no listed move leaves it, so none happens and its record stays.
        assert not journal.move(job.id, JobState.GONE, VANISHED)
        assert not journal.move(job.id, JobState.UNSUPPORTED, "again")
        assert journal.require(job.id).error == "broken"
        # A job is done only with its output: ``move`` refuses instead of writing a bare state.
        with pytest.raises(TransitionError):
            journal.move(job.id, JobState.DONE, "no output")
