"""Results as a review queue, read from a real journal: each photo once as its newest done run,
the filters, the orders, numbered pages, the runs either side of one, and marks that persist."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpen_watch.journal.browse import JournalBrowser
from gpen_watch.journal.journal import Job, Journal
from gpen_watch.journal.review import Outcome, Review, ReviewFilter, Sort
from gpen_watch.journal.schema import MIGRATIONS
from gpen_watch.journal.states import JobState, Mark, Original


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def restore(journal: Journal, inbox: Path, name: str, faces: int) -> Job:
    """One photo through the journal to done, with ``faces`` restored."""
    job = journal.add(inbox / name, inbox, name, len(name), 1.0, name.ljust(64, "0")[:64]).job
    journal.claim_batch(1, "w")
    journal.finish(job.id, inbox.parent / "out" / name, faces, {}, [])
    return journal.require(job.id)


def redo(journal: Journal, of: Job, faces: int) -> Job:
    again = journal.add_redo(of, of.source, {"restore.strength": 0.5})
    journal.claim_batch(1, "w")
    journal.finish(again.id, of.output or of.source, faces, {}, [])
    return journal.require(again.id)


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[tuple[Journal, JournalBrowser, dict[str, Job]]]:
    inbox = tmp_path / "inbox"
    with Journal.open(tmp_path / "j.sqlite3", clock=Clock()) as j:
        runs = {
            "wedding_001.jpg": restore(j, inbox, "wedding_001.jpg", 3),
            "wedding_002.jpg": restore(j, inbox, "wedding_002.jpg", 1),
            "landscape.jpg": restore(j, inbox, "landscape.jpg", 0),
            "Portrait_100%.jpg": restore(j, inbox, "Portrait_100%.jpg", 2),
        }
        broken = j.add(inbox / "broken.jpg", inbox, "broken.jpg", 3, 1.0, "f" * 64).job
        j.claim_batch(1, "w")
        j.fail(broken.id, "not an image file")
        runs["broken.jpg"] = j.require(broken.id)
        browser = JournalBrowser.open(tmp_path / "j.sqlite3")
        try:
            yield j, browser, runs
        finally:
            browser.close()


def names(jobs: list[Job]) -> list[str]:
    return [job.rel.name for job in jobs]


def test_every_photo_once_newest_first_with_failures(
    journal: tuple[Journal, JournalBrowser, dict[str, Job]],
) -> None:
    j, b, runs = journal
    newer = redo(j, runs["wedding_002.jpg"], 1)
    page = b.review_page(ReviewFilter())
    assert names(page.jobs) == [
        "wedding_002.jpg",
        "broken.jpg",
        "Portrait_100%.jpg",
        "landscape.jpg",
        "wedding_001.jpg",
    ]
    assert page.jobs[0].id == newer.id  # the redo stands for its photo; the run it replaced is gone
    assert page.total == 5 and page.pages == 1


def test_a_redo_of_a_redo_still_shows_its_photo_once(
    journal: tuple[Journal, JournalBrowser, dict[str, Job]],
) -> None:
    j, b, runs = journal
    second = redo(j, runs["landscape.jpg"], 1)
    third = redo(j, runs["landscape.jpg"], 2)  # asked from the first run's page, after the second
    shown = b.review_page(ReviewFilter(text="landscape")).jobs
    assert [job.id for job in shown] == [third.id]
    assert second.photo == third.photo == runs["landscape.jpg"].id


def test_a_failed_redo_keeps_the_photos_result(
    journal: tuple[Journal, JournalBrowser, dict[str, Job]],
) -> None:
    j, b, runs = journal
    again = j.add_redo(runs["wedding_001.jpg"], runs["wedding_001.jpg"].source, {"restore.upscale": 2})
    j.claim_batch(1, "w")
    j.fail(again.id, "the upscaler file is missing")
    restored = b.review_page(ReviewFilter(outcome=Outcome.RESTORED)).jobs
    assert runs["wedding_001.jpg"].id in [job.id for job in restored]
    failed = b.review_page(ReviewFilter(outcome=Outcome.FAILED)).jobs
    assert sorted(names(failed)) == ["broken.jpg", "wedding_001.jpg"]


@pytest.mark.parametrize(
    ("f", "expected"),
    [
        (ReviewFilter(text="WEDDING"), {"wedding_001.jpg", "wedding_002.jpg"}),
        (ReviewFilter(text="100%"), {"Portrait_100%.jpg"}),  # a wildcard is a character
        (ReviewFilter(text="_00"), {"wedding_001.jpg", "wedding_002.jpg"}),
        (ReviewFilter(outcome=Outcome.RESTORED), {"wedding_001.jpg", "wedding_002.jpg", "Portrait_100%.jpg"}),
        (ReviewFilter(outcome=Outcome.NO_FACE), {"landscape.jpg"}),
        (ReviewFilter(outcome=Outcome.FAILED), {"broken.jpg"}),
        (ReviewFilter(faces_min=2), {"wedding_001.jpg", "Portrait_100%.jpg"}),
        (ReviewFilter(faces_min=1, faces_max=2), {"wedding_002.jpg", "Portrait_100%.jpg"}),
        (ReviewFilter(inbox="/elsewhere"), set()),
    ],
)
def test_filters(
    journal: tuple[Journal, JournalBrowser, dict[str, Job]], f: ReviewFilter, expected: set[str]
) -> None:
    _, b, _ = journal
    page = b.review_page(f)
    assert set(names(page.jobs)) == expected
    assert page.total == len(expected)


def test_date_range(journal: tuple[Journal, JournalBrowser, dict[str, Job]]) -> None:
    _, b, runs = journal
    cut = runs["landscape.jpg"].finished
    assert cut is not None
    assert set(names(b.review_page(ReviewFilter(since=cut)).jobs)) == {
        "landscape.jpg",
        "Portrait_100%.jpg",
        "broken.jpg",
    }
    assert set(names(b.review_page(ReviewFilter(until=cut)).jobs)) == {"wedding_001.jpg", "wedding_002.jpg"}


def test_orders(journal: tuple[Journal, JournalBrowser, dict[str, Job]]) -> None:
    _, b, _ = journal
    assert names(b.review_page(ReviewFilter(sort=Sort.NAME)).jobs) == [
        "broken.jpg",
        "landscape.jpg",
        "Portrait_100%.jpg",  # case-blind
        "wedding_001.jpg",
        "wedding_002.jpg",
    ]
    assert names(b.review_page(ReviewFilter(sort=Sort.FACES, outcome=Outcome.RESTORED)).jobs) == [
        "wedding_001.jpg",
        "Portrait_100%.jpg",
        "wedding_002.jpg",
    ]
    assert names(b.review_page(ReviewFilter(sort=Sort.OLDEST)).jobs)[0] == "wedding_001.jpg"


def test_numbered_pages_cover_every_match_once(
    journal: tuple[Journal, JournalBrowser, dict[str, Job]],
) -> None:
    _, b, _ = journal
    pages = [b.review_page(ReviewFilter(sort=Sort.NAME), page=n, size=2) for n in (1, 2, 3)]
    assert [p.pages for p in pages] == [3, 3, 3]
    seen = [n for p in pages for n in names(p.jobs)]
    assert seen == names(b.review_page(ReviewFilter(sort=Sort.NAME)).jobs)
    assert b.review_page(ReviewFilter(), page=99, size=2).page == 3  # clamped to the last


@pytest.mark.parametrize("sort", list(Sort))
def test_neighbours_step_through_the_filter_in_its_order(
    journal: tuple[Journal, JournalBrowser, dict[str, Job]], sort: Sort
) -> None:
    _, b, _ = journal
    f = ReviewFilter(sort=sort, outcome=Outcome.RESTORED)
    order = b.review_page(f).jobs
    for i, job in enumerate(order):
        n = b.neighbours(f, job)
        assert n.position == i + 1 and n.total == len(order)
        assert (n.previous.id if n.previous else None) == (order[i - 1].id if i else None)
        assert (n.next.id if n.next else None) == (order[i + 1].id if i + 1 < len(order) else None)


def test_marks_and_reviewed_filter_and_persist(
    tmp_path: Path, journal: tuple[Journal, JournalBrowser, dict[str, Job]]
) -> None:
    j, b, runs = journal
    assert j.set_mark([runs["wedding_001.jpg"].id], Mark.ACCEPTED) == 1
    assert j.set_mark([runs["wedding_002.jpg"].id], Mark.LOOK, "eyes look odd") == 1
    assert j.set_mark([runs["broken.jpg"].id], Mark.ACCEPTED) == 0  # a failure has no result to accept
    assert j.set_reviewed([runs["landscape.jpg"].id]) == 1
    assert names(b.review_page(ReviewFilter(review=Review.ACCEPTED)).jobs) == ["wedding_001.jpg"]
    look = b.review_page(ReviewFilter(review=Review.LOOK)).jobs
    assert names(look) == ["wedding_002.jpg"] and look[0].mark_note == "eyes look odd"
    assert set(names(b.review_page(ReviewFilter(review=Review.UNREVIEWED)).jobs)) == {
        "Portrait_100%.jpg",
        "broken.jpg",
    }
    j.close()
    with Journal.open(tmp_path / "j.sqlite3") as again:  # a restart: the marks are in the file
        assert again.require(runs["wedding_002.jpg"].id).mark == Mark.LOOK
        assert again.require(runs["landscape.jpg"].id).reviewed is not None
        assert [e.detail for e in again.history(runs["wedding_002.jpg"].id)][
            -1
        ] == "needs another look: eyes look odd"


def test_a_step_from_a_photo_just_marked_out_of_the_filter_goes_on(
    journal: tuple[Journal, JournalBrowser, dict[str, Job]],
) -> None:
    j, b, _ = journal
    f = ReviewFilter(review=Review.UNREVIEWED, sort=Sort.NAME)
    order = b.review_page(f).jobs
    j.set_reviewed([order[1].id])
    n = b.neighbours(f, order[1])
    assert n.position == 0 and n.next is not None and n.next.id == order[2].id
    assert n.previous is not None and n.previous.id == order[0].id


def test_version_7_journal_gains_photo_links_for_its_redos(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(path)
    for step in MIGRATIONS[:7]:
        conn.executescript(step)
    conn.execute("PRAGMA user_version = 7")
    row = (
        "INSERT INTO jobs (source, inbox, rel, size, mtime, sha256, state, created, finished, redo_of) VALUES"
    )
    conn.execute(f"{row} ('/i/a.jpg', '/i', 'a.jpg', 1, 1, 'x', 'done', 1, 1, NULL)")
    conn.execute(f"{row} ('/i/a.jpg', '/i', 'a.jpg', 1, 1, 'x', 'done', 2, 2, 1)")
    conn.execute(f"{row} ('/i/a.jpg', '/i', 'a.jpg', 1, 1, 'x', 'done', 3, 3, 2)")
    conn.commit()
    conn.close()
    with Journal.open(path) as j:
        assert [j.require(i).photo for i in (1, 2, 3)] == [None, 1, 1]
    b = JournalBrowser.open(path)
    try:
        assert [job.id for job in b.review_page(ReviewFilter()).jobs] == [3]
        assert b.review_page(ReviewFilter()).jobs[0].state == JobState.DONE
    finally:
        b.close()


def test_a_dismissed_failure_leaves_results(journal: tuple[Journal, JournalBrowser, dict[str, Job]]) -> None:
    j, b, runs = journal
    from gpen_watch.journal.states import Hidden

    assert j.hide(runs["broken.jpg"].id, Hidden.DISMISSED, "by hand")
    assert "broken.jpg" not in names(b.review_page(ReviewFilter()).jobs)
    j.unhide(runs["broken.jpg"].id, "shown again")
    assert "broken.jpg" in names(b.review_page(ReviewFilter()).jobs)


def copy_of(journal: Journal, first: Job, inbox: Path, rel: str, output: bool = True) -> Job:
    """The same photo as ``first`` dropped again as ``rel``: a copy of its result (``output``), or
    the same name dropped again (no output of its own)."""
    added = journal.add(inbox / rel, inbox, rel, first.size, 1.0, first.sha256)
    assert added.status == "duplicate"
    claim = journal.claim_batch(1, "w")
    assert [t.job.id for t in claim.copies] == [added.job.id]
    if output:
        journal.finish(added.job.id, inbox.parent / "out" / rel, first.faces or 0, {}, ["a copy"])
    else:
        journal.end_as_duplicate(added.job.id, "dropped again")
    return journal.require(added.job.id)


def test_flags_stars_and_reviewed_come_and_go_together(
    journal: tuple[Journal, JournalBrowser, dict[str, Job]],
) -> None:
    j, b, runs = journal
    picked, rejected, rated = (runs[n].id for n in ("wedding_001.jpg", "wedding_002.jpg", "landscape.jpg"))
    assert j.set_mark([rejected], Mark.REJECTED) == 1
    assert j.set_stars([rated, picked], 4) == 2
    assert j.set_mark([picked], Mark.ACCEPTED) == 1
    assert j.set_stars([runs["broken.jpg"].id], 3) == 0  # a failure has no result to rate
    assert names(b.review_page(ReviewFilter(review=Review.REJECTED)).jobs) == ["wedding_002.jpg"]
    assert set(names(b.review_page(ReviewFilter(stars_min=4)).jobs)) == {"wedding_001.jpg", "landscape.jpg"}
    assert b.review_page(ReviewFilter(stars_min=5)).total == 0
    unreviewed = {"Portrait_100%.jpg", "broken.jpg"}
    assert set(names(b.review_page(ReviewFilter(review=Review.UNREVIEWED)).jobs)) == unreviewed
    # Clearing the flag keeps the rating (still reviewed); clearing both leaves it unreviewed.
    j.set_mark([picked], None)
    assert j.require(picked).reviewed is not None and j.require(picked).stars == 4
    j.set_stars([picked], 0)
    assert j.require(picked).reviewed is None and j.require(picked).stars is None
    assert set(names(b.review_page(ReviewFilter(review=Review.UNREVIEWED)).jobs)) == unreviewed | {
        "wedding_001.jpg"
    }
    with pytest.raises(ValueError, match="stars must be 0 to 5"):
        j.set_stars([rated], 6)
    assert [e.detail for e in j.history(rated)][-1] == "rated 4 stars"


def test_a_copy_under_its_own_name_is_a_photo_of_results(
    tmp_path: Path, journal: tuple[Journal, JournalBrowser, dict[str, Job]]
) -> None:
    j, b, runs = journal
    inbox = tmp_path / "inbox"
    first = runs["wedding_001.jpg"]
    j.set_original(first.id, Original.ARCHIVED, tmp_path / "archive" / "wedding_001.jpg")
    copy = copy_of(j, first, inbox, "album/wedding_001.jpg")
    again = copy_of(j, first, inbox, "wedding_001.jpg", output=False)  # the same name: no result of its own
    shown = b.review_page(ReviewFilter(text="wedding_001")).jobs
    assert [job.id for job in shown] == [copy.id, first.id]
    assert again.id not in [job.id for job in b.review_page(ReviewFilter()).jobs]
    assert [job.id for job in b.review_page(ReviewFilter(outcome=Outcome.COPY)).jobs] == [copy.id]
    assert copy.id in [job.id for job in b.review_page(ReviewFilter(outcome=Outcome.RESTORED)).jobs]
    assert {k: v.id for k, v in b.copy_sources(shown).items()} == {copy.id: first.id}
    # A copy is flagged like any photo; a redo of the original, of the copy, groups them.
    assert j.set_mark([copy.id], Mark.ACCEPTED) == 1
    assert [r.id for r in j.copy_group(first)] == [first.id, copy.id]
    assert [r.id for r in j.copy_group(copy)] == [first.id, copy.id]
    assert [r.id for r in j.copy_group(runs["landscape.jpg"])] == [runs["landscape.jpg"].id]
    # Redone, the copy is its newest run, still a copy of the first photo.
    newer = redo(j, copy, 3)
    shown = b.review_page(ReviewFilter(text="album")).jobs
    assert [job.id for job in shown] == [newer.id]
    assert {k: v.id for k, v in b.copy_sources(shown).items()} == {newer.id: first.id}
    assert [job.id for job in b.review_page(ReviewFilter(outcome=Outcome.COPY)).jobs] == [newer.id]
    assert [r.id for r in j.copy_group(first)] == [first.id, newer.id]


def test_neighbours_around_a_photo_for_the_filmstrip(
    journal: tuple[Journal, JournalBrowser, dict[str, Job]],
) -> None:
    _, b, _ = journal
    f = ReviewFilter(sort=Sort.NAME)
    order = b.review_page(f).jobs
    n = b.neighbours(f, order[2], around=2)
    assert [job.id for job in n.before] == [order[1].id, order[0].id]  # the nearest first
    assert [job.id for job in n.after] == [order[3].id, order[4].id]
    assert n.previous == order[1] and n.next == order[3] and n.position == 3


def test_version_8_journal_lists_its_copies_and_keeps_its_marks(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(path)
    for step in MIGRATIONS[:8]:
        conn.executescript(step)
    conn.execute("PRAGMA user_version = 8")
    row = (
        "INSERT INTO jobs (source, inbox, rel, size, mtime, sha256, state, created, finished, output,"
        " duplicate_of, mark, listed) VALUES"
    )
    conn.execute(
        f"{row} ('/i/a.jpg', '/i', 'a.jpg', 1, 1, 'x', 'done', 1, 1, '/o/a.jpg', NULL, 'accepted', 1)"
    )
    conn.execute(
        f"{row} ('/i/b/a.jpg', '/i', 'b/a.jpg', 1, 1, 'x', 'duplicate', 2, 2, '/o/b/a.jpg', 1, NULL, NULL)"
    )
    conn.execute(f"{row} ('/i/a.jpg', '/i', 'a.jpg', 1, 1, 'x', 'duplicate', 3, 3, NULL, 1, NULL, NULL)")
    conn.commit()
    conn.close()
    with Journal.open(path) as j:
        assert j.require(1).mark == Mark.ACCEPTED and j.require(1).stars is None
    b = JournalBrowser.open(path)
    try:
        assert [job.id for job in b.review_page(ReviewFilter()).jobs] == [2, 1]
    finally:
        b.close()
