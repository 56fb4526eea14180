"""Results by the identity check, read from a real journal: the filter "may not look like the same
person", the order "largest identity change first" (with the runs either side of one, across the
photos no face of which was measured), one person's photos, the batch a People page groups, and
the indexes that keep a page of 100,000 runs fast (the plans, not a timing: docs/benchmarks.md has
the times)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from gpen_watch.journal.browse import JournalBrowser
from gpen_watch.journal.faces import FaceRow
from gpen_watch.journal.journal import Job, Journal
from gpen_watch.journal.review import Review, ReviewFilter, Sort
from gpen_watch.journal.schema import MIGRATIONS


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def _descriptor(person: int) -> bytes:
    """A made-up person's descriptor: people 1.0 apart, far over any threshold."""
    d = np.zeros(128, dtype="<f4")
    d[person] = 1.0 / np.sqrt(2)
    return d.tobytes()


def restore(journal: Journal, inbox: Path, photos: dict[str, list[FaceRow]]) -> dict[str, Job]:
    """Photos dropped together (one batch), then each restored to done in turn, its faces checked
    as ``photos`` says."""
    added = {
        name: journal.add(inbox / name, inbox, name, len(name), 1.0, name.ljust(64, "0")[:64]).job
        for name in photos
    }
    for name, faces in photos.items():
        (job,) = journal.claim_batch(1, "w").jobs
        assert job.id == added[name].id
        journal.record_faces(job.id, faces)
        journal.finish(job.id, inbox.parent / "out" / name, sum(f.restored for f in faces), {}, [])
    return {name: journal.require(job.id) for name, job in added.items()}


def face(index: int, distance: float | None, person: int, threshold: float = 0.32) -> FaceRow:
    flagged = distance is not None and distance > threshold
    return FaceRow(index, True, 0.1 + person / 100, distance, flagged, _descriptor(person))


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[tuple[Journal, JournalBrowser, dict[str, Job]]]:
    """A bride (person 1) in three photos, a groom (2) in two, and photos with nothing measured."""
    inbox = tmp_path / "inbox"
    with Journal.open(tmp_path / "j.sqlite3", clock=Clock()) as j:
        runs = restore(
            j,
            inbox,
            {
                "a.jpg": [face(0, 0.05, 1), face(1, 0.41, 2)],
                "b.jpg": [face(0, 0.12, 1)],
                "landscape.jpg": [],
                "c.jpg": [face(0, 0.55, 1), face(1, 0.36, 3)],
                "d.jpg": [face(0, 0.20, 2)],
                "unchecked.jpg": [FaceRow(0, True, 0.2)],
            },
        )
        browser = JournalBrowser.open(tmp_path / "j.sqlite3")
        try:
            yield j, browser, runs
        finally:
            browser.close()


def names(jobs: list[Job]) -> list[str]:
    return [job.rel.name for job in jobs]


def test_the_flagged_filter_shows_the_photos_with_a_face_over_the_threshold(
    journal: tuple[Journal, JournalBrowser, dict[str, Job]],
) -> None:
    j, b, runs = journal
    page = b.review_page(ReviewFilter(flagged=True))
    assert names(page.jobs) == ["c.jpg", "a.jpg"] and page.total == 2
    assert [job.flagged for job in page.jobs] == [2, 1]
    assert page.jobs[0].identity == pytest.approx(0.55)
    # A redo that put the face right takes the photo off: its run is the photo's now.
    again = j.add_redo(runs["a.jpg"], runs["a.jpg"].source, {"restore.strength": 0.5})
    j.claim_batch(1, "w")
    j.record_faces(again.id, [face(0, 0.05, 1), face(1, 0.1, 2)])
    j.finish(again.id, runs["a.jpg"].output or runs["a.jpg"].source, 2, {}, [])
    assert names(b.review_page(ReviewFilter(flagged=True)).jobs) == ["c.jpg"]
    # With the other filters: it narrows them, as they narrow it.
    assert names(b.review_page(ReviewFilter(flagged=True, text="C.JPG")).jobs) == ["c.jpg"]
    assert b.review_count(ReviewFilter(flagged=True, review=Review.ACCEPTED)) == 0


def test_largest_identity_change_first_and_unmeasured_photos_last(
    journal: tuple[Journal, JournalBrowser, dict[str, Job]],
) -> None:
    _, b, _ = journal
    order = b.review_page(ReviewFilter(sort=Sort.IDENTITY)).jobs
    # 0.55, 0.41, 0.20, 0.12; then the two with no face measured, newest first.
    assert names(order) == ["c.jpg", "a.jpg", "d.jpg", "b.jpg", "unchecked.jpg", "landscape.jpg"]
    assert [job.identity for job in order[4:]] == [None, None]
    # The photo page steps through the same order, also across the unmeasured ones.
    f = ReviewFilter(sort=Sort.IDENTITY)
    for k, job in enumerate(order):
        n = b.neighbours(f, job, around=2)
        assert n.position == k + 1 and n.total == len(order)
        assert (n.previous.id if n.previous else None) == (order[k - 1].id if k else None)
        assert (n.next.id if n.next else None) == (order[k + 1].id if k + 1 < len(order) else None)
    assert names(b.review_page(ReviewFilter(sort=Sort.IDENTITY), page=2, size=4).jobs) == [
        "unchecked.jpg",
        "landscape.jpg",
    ]


def test_one_persons_photos(journal: tuple[Journal, JournalBrowser, dict[str, Job]]) -> None:
    j, b, runs = journal
    first = b.batch_start()
    assert first == runs["a.jpg"].id
    people = j.people(first, 0.32)
    bride = next(p for p in people if (runs["b.jpg"].id, 0) in p.faces)
    theirs = frozenset(run for run, _ in bride.faces)
    f = ReviewFilter(runs=theirs)
    assert sorted(names(b.review_page(f).jobs)) == ["a.jpg", "b.jpg", "c.jpg"]
    assert b.review_count(f) == 3
    # With the identity order: the bride's photo whose faces changed most first.
    assert names(b.review_page(ReviewFilter(runs=theirs, sort=Sort.IDENTITY)).jobs) == [
        "c.jpg",
        "a.jpg",
        "b.jpg",
    ]
    n = b.neighbours(ReviewFilter(runs=theirs, sort=Sort.IDENTITY), runs["a.jpg"])
    assert n.position == 2 and n.previous is not None and n.previous.rel.name == "c.jpg"
    assert b.review_count(ReviewFilter(runs=frozenset())) == 0


def test_the_faces_a_batch_groups_are_its_photos_and_every_photo_since(
    journal: tuple[Journal, JournalBrowser, dict[str, Job]], tmp_path: Path
) -> None:
    j, b, runs = journal
    # A later drop, once the queue was empty: a batch of its own.
    j._clock.now += 3600  # type: ignore[attr-defined]
    later = restore(j, tmp_path / "inbox", {"later.jpg": [face(0, 0.1, 1)]})["later.jpg"]
    assert b.batch_start() == later.id
    assert b.batch_start(runs["c.jpg"].id) == runs["a.jpg"].id
    assert b.batch_before(later.id) == runs["a.jpg"].id and b.batch_before(runs["a.jpg"].id) is None
    assert b.batch_start(10_000) is None
    # A redo of a photo of the first batch, done after the second: it starts no batch, and the
    # second batch's faces do not take it in (it is an older photo's).
    again = j.add_redo(runs["d.jpg"], runs["d.jpg"].source, {"restore.strength": 0.5})
    j.claim_batch(1, "w")
    j.record_faces(again.id, [face(0, 0.2, 2)])
    j.finish(again.id, runs["d.jpg"].output or runs["d.jpg"].source, 1, {}, [])
    assert b.batch_start() == later.id
    assert [(f.job_id, f.index) for f in b.faces_since(later.id, 100)] == [(later.id, 0)]
    since_first = {(f.job_id, f.index) for f in b.faces_since(runs["a.jpg"].id, 100)}
    assert (again.id, 0) in since_first and (runs["d.jpg"].id, 0) not in since_first  # the redo stands for it
    assert (runs["unchecked.jpg"].id, 0) not in since_first  # never described
    assert len(b.faces_since(runs["a.jpg"].id, 3)) == 3


def test_a_page_of_many_runs_reads_the_indexes(
    journal: tuple[Journal, JournalBrowser, dict[str, Job]],
) -> None:
    """What keeps these views fast on 100,000 runs: a count of the flagged reads the filter index
    (which holds ``flagged``), the identity order reads its own index (no sort of every run), a person's photos are
    read by id."""
    _, b, runs = journal

    def plan(sql: str, args: list[object]) -> str:
        return " / ".join(str(r[3]) for r in b._read("EXPLAIN QUERY PLAN " + sql, args))

    flagged = ReviewFilter(flagged=True)
    where, args = flagged.where()
    assert "USING INDEX jobs_listed_filter" in plan(
        f"SELECT COUNT(*) FROM jobs AS j {flagged.count_index()} WHERE {where}", args
    )
    ordered = ReviewFilter(sort=Sort.IDENTITY)
    where, args = ordered.where()
    page = plan(f"SELECT j.* FROM jobs AS j WHERE {where} ORDER BY {ordered.order()} LIMIT 48", args)
    assert "jobs_listed_identity" in page and "TEMP B-TREE" not in page
    person = ReviewFilter(runs=frozenset({runs["a.jpg"].id, runs["c.jpg"].id}))
    where, args = person.where()
    assert "INTEGER PRIMARY KEY" in plan(
        f"SELECT COUNT(*) FROM jobs AS j {person.count_index()} WHERE {where}", args
    )


def test_a_version_12_journal_gains_the_identity_indexes(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(path)
    for version, step in enumerate(MIGRATIONS[:12]):
        conn.executescript(f"BEGIN;\n{step}\nPRAGMA user_version = {version + 1};\nCOMMIT;")
    conn.execute(
        "INSERT INTO jobs (source, inbox, rel, size, mtime, sha256, state, created, finished, output, faces,"
        " flagged, identity) VALUES ('/i/a.jpg', '/i', 'a.jpg', 1, 1, 'x', 'done', 1, 1, '/o/a.jpg', 1, 1, 0.5)"
    )
    conn.execute("UPDATE jobs SET listed = 1")
    conn.commit()
    conn.close()
    with Journal.open(path):
        pass
    b = JournalBrowser.open(path)
    try:
        (job,) = b.review_page(ReviewFilter(flagged=True, sort=Sort.IDENTITY)).jobs
        assert (job.flagged, job.identity) == (1, 0.5)
        indexes = {r[0] for r in b._read("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert {"jobs_listed_filter", "jobs_listed_identity", "jobs_listed_flagged"} <= indexes
    finally:
        b.close()
