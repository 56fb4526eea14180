"""The journal's checked faces (``journal.faces``) and a batch's faces grouped by person
(``journal.people``): Chinese whispers on made-up descriptors, the faces' rows and the runs'
flagged counts through a real journal, and, with dlib's real files (../shared), the Solvay photo's
29 people each cut into four photos (as they are, enlarged twice, shrunk to 0.75, mirrored): the
groups come out as the people (the counts are printed; docs/identity.md quotes them).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np
import pytest
from dlib_models import SOLVAY_PEOPLE, identity_models, needs_dlib_models, real_detector, solvay_bgr

from gpen_watch.config import RestoreConfig
from gpen_watch.journal.faces import FaceRow
from gpen_watch.journal.journal import Journal
from gpen_watch.journal.people import group_faces
from gpen_watch.journal.schema import MIGRATIONS

THRESHOLD = RestoreConfig().identity_threshold


def _clusters(people: int, each: int, spread: float, seed: int = 1) -> tuple[np.ndarray, list[int]]:
    """``each`` descriptors around each of ``people`` centres 0.6 or more apart, within ``spread``."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(people, 128))
    centres *= 0.6 / np.sqrt(2) / np.linalg.norm(centres, axis=1, keepdims=True) * 1.3
    points, truth = [], []
    for p, centre in enumerate(centres):
        for _ in range(each):
            step = rng.normal(size=128)
            points.append(centre + step / np.linalg.norm(step) * spread * rng.random())
            truth.append(p)
    return np.array(points), truth


def _same_partition(groups: list[int], truth: list[int]) -> bool:
    return len({(g, t) for g, t in zip(groups, truth)}) == len(set(groups)) == len(set(truth))


def test_made_up_people_are_grouped_as_they_are() -> None:
    points, truth = _clusters(people=12, each=5, spread=0.12)
    groups = group_faces(points, THRESHOLD)
    assert _same_partition(groups, truth)
    assert group_faces(points, THRESHOLD) == groups  # the same every time
    assert group_faces(np.zeros((0, 128)), THRESHOLD) == []


def test_one_likeness_between_two_people_does_not_merge_them() -> None:
    """Two people 0.55 apart, six faces each, and a face half-way between them, near both: it joins
    one, and the two keep their own groups."""
    rng = np.random.default_rng(2)
    a = np.zeros(128)
    b = np.zeros(128)
    b[0] = 0.55
    faces = [c + rng.normal(size=128) * 0.004 for c in (a,) * 6 + (b,) * 6]
    bridge = (a + b) / 2
    groups = group_faces(np.vstack([*faces, bridge]), THRESHOLD)
    assert len(set(groups[:6])) == 1 and len(set(groups[6:12])) == 1 and groups[0] != groups[6]
    assert groups[12] in (groups[0], groups[6])


def _done_run(journal: Journal, inbox: Path, name: str) -> int:
    job = journal.add(inbox / name, inbox, name, len(name), 1.0, name.ljust(64, "0")[:64]).job
    journal.claim_batch(1, "w")
    journal.finish(job.id, inbox.parent / "out" / name, 1, {}, [])
    return job.id


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    with Journal.open(tmp_path / "j.sqlite3") as j:
        yield j


def _descriptor(value: float) -> bytes:
    return np.full(128, value, dtype="<f4").tobytes()


def test_a_runs_faces_are_kept_with_its_flagged_count(journal: Journal, tmp_path: Path) -> None:
    run = _done_run(journal, tmp_path / "in", "a.jpg")
    faces = [
        FaceRow(0, True, 0.12, 0.41, True, _descriptor(0.1)),
        FaceRow(1, True, 0.15, 0.05, False, _descriptor(0.2)),
        FaceRow(2, False, 0.33, None, False, _descriptor(0.3)),
    ]
    journal.record_faces(run, faces)
    got = journal.faces_of(run)
    assert [(f.index, f.restored, f.detail, f.distance, f.flagged) for f in got] == [
        (0, True, pytest.approx(0.12), pytest.approx(0.41), True),
        (1, True, pytest.approx(0.15), pytest.approx(0.05), False),
        (2, False, pytest.approx(0.33), None, False),
    ]
    assert got[2].descriptor == _descriptor(0.3) and got[0].job_id == run
    row = journal._read("SELECT flagged, identity FROM jobs WHERE id = ?", (run,))[0]
    assert (row[0], row[1]) == (1, pytest.approx(0.41))
    assert journal.flagged_in(run) == journal.flagged_today() == 1
    # Another attempt's faces replace the first's.
    journal.record_faces(run, faces[1:])
    assert [f.index for f in journal.faces_of(run)] == [1, 2]
    assert journal._read("SELECT flagged FROM jobs WHERE id = ?", (run,))[0][0] == 0
    with pytest.raises(ValueError, match="512"):
        journal.record_faces(run, [FaceRow(0, True, descriptor=b"\0" * 10)])


def test_a_batch_groups_the_faces_of_the_photos_results_lists(journal: Journal, tmp_path: Path) -> None:
    """A redo's faces stand for its photo's: the run it replaced is no longer listed."""
    inbox = tmp_path / "in"
    first = _done_run(journal, inbox, "a.jpg")
    second = _done_run(journal, inbox, "b.jpg")
    journal.record_faces(first, [FaceRow(0, True, 0.2, 0.1, False, _descriptor(0.0))])
    journal.record_faces(second, [FaceRow(0, True, 0.1, 0.1, False, _descriptor(0.0)), FaceRow(1, True)])
    again = journal.add_redo(journal.require(first), inbox / "a.jpg", {"restore.strength": 0.5})
    journal.claim_batch(1, "w")
    journal.finish(again.id, inbox.parent / "out" / "a.jpg", 1, {}, [])
    journal.record_faces(again.id, [FaceRow(0, True, 0.3, 0.1, False, _descriptor(0.001))])
    assert [(f.job_id, f.index) for f in journal.described_faces(first)] == [(second, 0), (again.id, 0)]
    (person,) = journal.people(first, THRESHOLD)
    assert person.clearest == (again.id, 0)  # the highest detail measure
    assert set(person.faces) == {(second, 0), (again.id, 0)}


def test_a_version_11_journal_gains_the_faces(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(path)
    for version, step in enumerate(MIGRATIONS[:11]):
        conn.executescript(f"BEGIN;\n{step}\nPRAGMA user_version = {version + 1};\nCOMMIT;")
    conn.close()
    with Journal.open(path) as j:
        run = _done_run(j, tmp_path / "in", "a.jpg")
        assert j.faces_of(run) == []
        assert j._read("SELECT flagged, identity FROM jobs WHERE id = ?", (run,))[0][0] is None


# --- the Solvay photo's people, each in four photos ----------------------------------------------


def _photos_of(photo: np.ndarray, box: np.ndarray, points: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """One person cut out (2.5 times the face's box, within the photo): as it is, enlarged twice,
    shrunk to 0.75 and mirrored, each with the face's five points in it."""
    h, w = photo.shape[:2]
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    half = 1.25 * max(box[2] - box[0], box[3] - box[1])
    x0, y0 = int(max(0, cx - half)), int(max(0, cy - half))
    x1, y1 = int(min(w, cx + half)), int(min(h, cy + half))
    crop = np.ascontiguousarray(photo[y0:y1, x0:x1])
    at = points - (x0, y0)
    mirrored = at.copy()
    mirrored[:, 0] = crop.shape[1] - 1 - mirrored[:, 0]
    return [
        (crop, at),
        (cv2.resize(crop, None, fx=2, fy=2, interpolation=cv2.INTER_CUBIC), (at + 0.5) * 2 - 0.5),
        (cv2.resize(crop, None, fx=0.75, fy=0.75, interpolation=cv2.INTER_AREA), (at + 0.5) * 0.75 - 0.5),
        (np.ascontiguousarray(crop[:, ::-1]), mirrored[[1, 0, 2, 4, 3]]),
    ]


@needs_dlib_models
@pytest.mark.slow
def test_the_solvay_people_in_four_photos_each_are_grouped_as_themselves(
    journal: Journal, tmp_path: Path
) -> None:
    photo = solvay_bgr()
    faces = real_detector().detect([photo])[0]
    assert len(faces) == SOLVAY_PEOPLE
    models = identity_models()
    truth: dict[tuple[int, int], int] = {}
    described: list[tuple[int, np.ndarray]] = []
    first = 0
    for person, face in enumerate(faces):
        for k, (image, points) in enumerate(_photos_of(photo, face.box, face.landmarks.astype(np.float64))):
            run = _done_run(journal, tmp_path / "in", f"person{person:02d}_{k}.jpg")
            first = first or run
            (descriptor,) = models.describe_faces([image], [points])
            described.append((person, descriptor))
            journal.record_faces(
                run, [FaceRow(0, True, None, None, False, descriptor.astype("<f4").tobytes())]
            )
            truth[(run, 0)] = person
    people = journal.people(first, THRESHOLD)
    who = np.array([p for p, _ in described])
    d = np.linalg.norm(
        np.stack([x for _, x in described])[:, None] - np.stack([x for _, x in described])[None], axis=2
    )
    same, other = who[:, None] == who[None], who[:, None] != who[None]
    print(
        f"a person's four photos: at most {d[same].max():.3f} apart; two people: at least {d[other].min():.3f}"
    )
    right = sum(len({truth[f] for f in p.faces}) == 1 and len(p.faces) == 4 for p in people)
    mixed = sum(len({truth[f] for f in p.faces}) > 1 for p in people)
    print(
        f"{len(truth)} faces of {SOLVAY_PEOPLE} people: {len(people)} groups, {right} exactly one person's four, {mixed} mixed"
    )
    assert len(people) == SOLVAY_PEOPLE and right == SOLVAY_PEOPLE and mixed == 0
