"""Photos sent through the API in the journal: the submission recorded with its job in one
transaction, found again by its Idempotency-Key, listed by batch, counted for the daily limit; a
photo's own settings are what its worker gets, and what decides whether a copy of an earlier
result will do."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from gpen_watch.config import Config, InboxConfig, WatchConfig
from gpen_watch.journal import Journal, hash_file, schema
from gpen_watch.journal.records import Twin
from gpen_watch.journal.states import JobState
from gpen_watch.journal.submissions import Submission
from gpen_watch.outbox import commit, duplicates


@pytest.fixture
def env(tmp_path: Path):
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    cfg = Config(watch=WatchConfig(inboxes=[InboxConfig(inbox)], outbox=tmp_path / "outbox"))
    j = Journal.open(tmp_path / "journal.sqlite3")
    yield cfg, inbox, j
    j.close()


def sent(
    j: Journal,
    inbox: Path,
    name: str,
    data: bytes,
    *,
    key: str | None = None,
    batch: str = "b1",
    client: str = "t1",
    settings: dict[str, str] | None = None,
) -> int:
    path = inbox / name
    path.write_bytes(data)
    sub = Submission(client, batch, key, "req-" + name, inbox / f".gpen-upload-{name}.part")
    r = j.add(path, inbox, name, len(data), 0.0, hash_file(path), settings=settings, submission=sub)
    return r.job.id


def test_a_submission_is_found_by_its_key_its_job_and_its_batch(env) -> None:
    _cfg, inbox, j = env
    a = sent(j, inbox, "a.jpg", b"aaa", key="k1", settings={"restore.strength": "0.5"})
    b = sent(j, inbox, "b.jpg", b"bbbb", key=None)
    sent(j, inbox, "c.jpg", b"c", batch="other")
    found = j.submission_by_key("t1", "k1")
    assert found is not None and found.job.id == a and found.request == "req-a.jpg"
    assert found.job.settings == {"restore.strength": "0.5"}
    assert j.submission_by_key("t2", "k1") is None  # a key is each client's own
    assert j.submission_of(b) is not None and j.submission_of(b).size == 4  # type: ignore[union-attr]
    assert [s.job.id for s in j.batch_photos("t1", "b1")] == [a, b]
    assert [s.job.id for s in j.batch_photos("t1", "b1", after=j.submission_of(a).id)] == [b]  # type: ignore[union-attr]
    assert j.batch_counts("t1", "b1") == {"queued": 2}
    assert j.bytes_sent("t1", since=0.0) == 3 + 4 + 1
    assert j.bytes_sent("t2", since=0.0) == 0


def test_one_key_holds_one_photo_for_a_client(env) -> None:
    _cfg, inbox, j = env
    sent(j, inbox, "a.jpg", b"aaa", key="same")
    with pytest.raises(sqlite3.IntegrityError):
        sent(j, inbox, "b.jpg", b"bbb", key="same")
    # The failed transaction left no job behind: the job and its submission go together.
    assert [job.rel.name for job in j.jobs(JobState.QUEUED)] == ["a.jpg"]


def test_source_in_use_and_the_uploads_left_to_rename(env) -> None:
    _cfg, inbox, j = env
    job_id = sent(j, inbox, "a.jpg", b"aaa")
    assert j.source_in_use(inbox / "a.jpg")
    assert not j.source_in_use(inbox / "b.jpg")
    assert j.uploads_to_finish() == []
    (inbox / "a.jpg").unlink()  # as after a crash between the record and the rename
    [left] = j.uploads_to_finish()
    assert left.job.id == job_id and left.upload == inbox / ".gpen-upload-a.jpg.part"
    assert j.placed(job_id, inbox / "a (1).jpg", "a (1).jpg")
    job = j.require(job_id)
    assert (job.source, job.rel) == (inbox / "a (1).jpg", Path("a (1).jpg"))
    assert j.submission_of(job_id).upload is None  # type: ignore[union-attr]


def test_a_version_10_journal_gets_the_submissions_table(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript("".join(schema.MIGRATIONS[:10]) + "\nPRAGMA user_version = 10;")
    conn.close()
    with Journal.open(path) as j:
        assert j._read("PRAGMA user_version")[0][0] == schema.VERSION
        assert j.bytes_sent("x", 0.0) == 0


def test_a_photo_sent_with_its_own_settings_is_restored_with_them(env) -> None:
    cfg, inbox, j = env
    job_id = sent(j, inbox, "a.jpg", b"aaa", settings={"restore.strength": "0.3", "output.format": "png"})
    j.claim_batch(1, "w0")
    fj = commit.file_job(j, job_id, cfg)
    assert fj.restore is not None and fj.restore.strength == 0.3
    assert fj.format == "png"
    assert "sent with" in fj.settings_label and "restore.strength=0.3" in fj.settings_label


def test_a_drop_without_settings_keeps_its_inboxs(env) -> None:
    cfg, inbox, j = env
    path = inbox / "d.jpg"
    path.write_bytes(b"ddd")
    job_id = j.add(path, inbox, "d.jpg", 3, 0.0, hash_file(path)).job.id
    j.claim_batch(1, "w0")
    fj = commit.file_job(j, job_id, cfg)
    assert fj.restore is None and fj.settings_label == ""


def test_a_copy_of_a_result_is_refused_when_the_photo_came_with_other_settings(env) -> None:
    cfg, inbox, j = env
    first = j.require(sent(j, inbox, "a.jpg", b"same"))
    other = j.require(sent(j, inbox, "b.jpg", b"same", settings={"restore.strength": "0.2"}))
    plain = j.require(sent(j, inbox, "c.jpg", b"same"))
    assert duplicates.settings_differ(cfg, plain, first) is None
    why = duplicates.settings_differ(cfg, other, first)
    assert why is not None and "sent with settings of its own" in why
    assert Twin(other, first).job.settings == {"restore.strength": "0.2"}


def test_own_settings_that_no_longer_pass_fail_the_photo_with_the_reason(env) -> None:
    cfg, inbox, j = env
    job_id = sent(j, inbox, "a.jpg", b"aaa", settings={"restore.strength": "7"})
    j.claim_batch(1, "w0")
    with pytest.raises(Exception, match=r"a.jpg: its own settings \(restore.strength=7\).*between 0"):
        commit.file_job(j, job_id, cfg)


def test_the_photos_of_one_turn_are_taken_together_and_a_key_sent_twice_is_one_photo(env) -> None:
    from types import SimpleNamespace

    from gpen_watch.outbox import sent
    from gpen_watch.service import submit

    cfg, inbox, j = env
    run = SimpleNamespace(journal=j, cfg=cfg, gate=None, header_checks=False, maybe_queued=False)

    def request(name: str, data: bytes, key: str, asked: str) -> dict[str, object]:
        upload = inbox / sent.upload_name()
        upload.write_bytes(data)
        return {
            "cmd": "submit", "upload": str(upload), "inbox": str(inbox), "rel": name, "size": len(data),
            "sha256": hash_file(upload), "settings": {}, "client": "t1", "batch": "b", "key": key, "request": asked,
        }  # fmt: skip

    replies = submit.take_all(
        run,  # type: ignore[arg-type]
        [
            request("a.jpg", b"first", "k", "r-first"),
            request("a.jpg", b"first", "k", "r-first"),  # the same request again, in the same turn
            request("a.jpg", b"second", "k2", "r-second"),  # another photo of that name
            request("b.jpg", b"third", "k", "r-third"),  # the key of another request
        ],
    )
    assert [r["ok"] for r in replies] == [True, True, True, False]
    assert replies[1]["id"] == replies[0]["id"] and replies[1]["again"]
    assert replies[2]["name"] == "a (1).jpg" and "was taken in the inbox" in replies[2]["note"]
    assert replies[3]["status"] == 422 and "was used for another request" in replies[3]["error"]
    assert sorted(p.name for p in inbox.iterdir()) == ["a (1).jpg", "a.jpg"]  # no temp left
    assert (inbox / "a.jpg").read_bytes() == b"first" and (inbox / "a (1).jpg").read_bytes() == b"second"
    assert len(j.jobs(JobState.QUEUED)) == 2 and run.maybe_queued
