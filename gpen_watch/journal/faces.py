"""The faces a run checked (docs/identity.md), kept beside its job: one row a face the engine
restored or left as it was because it was already sharp, by its number on the photo's page, with
its detail measure, its identity distance and flag, and the original face's descriptor. The run
itself keeps how many faces were flagged and the largest distance, so Results can filter and order
its runs by them off the listed runs' indexes.

Writes (``FaceWrites``) are the service's, recorded just before a result's commit token (a result
that never becomes the run's leaves rows no page reads); reads (``FaceQueries``) serve the journal
and its read-only browser alike, and ``people`` groups a batch's faces by person.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gpen_watch.journal.queries import JournalQueries

# Bytes of one descriptor as stored: 128 float32, little-endian.
DESCRIPTOR_BYTES = 128 * 4


@dataclass(frozen=True)
class FaceRow:
    """One checked face of a run."""

    index: int  # its number on the photo's page
    restored: bool  # False: left as it was, already sharp
    detail: float | None = None
    distance: float | None = None
    flagged: bool = False
    descriptor: bytes = b""  # the original face's; b"": not described
    job_id: int = 0  # the run it belongs to (as read; ignored when written)


@dataclass(frozen=True)
class FaceSummary:
    """A run's faces in two numbers: how many were flagged, and the largest identity distance
    (None: none was checked)."""

    flagged: int
    largest: float | None


def summary(faces: Iterable[FaceRow]) -> FaceSummary:
    rows = list(faces)
    distances = [f.distance for f in rows if f.distance is not None]
    return FaceSummary(sum(f.flagged for f in rows), max(distances) if distances else None)


class FaceWrites(JournalQueries):
    """``Journal``'s write of a run's checked faces."""

    def record_faces(self, job_id: int, faces: Sequence[FaceRow]) -> None:
        """Keep ``faces`` as run ``job_id``'s (replacing any an earlier attempt of it recorded),
        and its flagged count and largest distance on the run."""
        for face in faces:
            if face.descriptor and len(face.descriptor) != DESCRIPTOR_BYTES:
                raise ValueError(f"a descriptor of {len(face.descriptor)} bytes, not {DESCRIPTOR_BYTES}")
        total = summary(faces)
        with self._write() as conn:
            conn.execute("DELETE FROM faces WHERE job_id = ?", (job_id,))
            conn.executemany(
                "INSERT INTO faces (job_id, idx, restored, detail, distance, flagged, descriptor)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        job_id,
                        f.index,
                        int(f.restored),
                        f.detail,
                        f.distance,
                        int(f.flagged),
                        f.descriptor or None,
                    )
                    for f in faces
                ],
            )
            conn.execute(
                "UPDATE jobs SET flagged = ?, identity = ? WHERE id = ?",
                (total.flagged if faces else None, total.largest, job_id),
            )


class FaceQueries(JournalQueries):
    """Reads of checked faces, for the journal and its browser."""

    def flagged_today(self) -> int:
        """Faces that may not look like the same person in the results of today's photos (each
        photo's newest run finished since local midnight)."""
        row = self._read(
            "SELECT COALESCE(SUM(flagged), 0) FROM jobs WHERE listed = 1 AND finished >= ? AND flagged > 0",
            (self._midnight(),),
        )
        return int(row[0][0])

    def flagged_in(self, first_id: int, last_id: int | None = None) -> int:
        """Flagged faces in the results of runs ``first_id`` to ``last_id`` (None: the newest),
        a batch's (``Batch.first_id``): each photo's newest run counted once."""
        row = self._read(
            "SELECT COALESCE(SUM(flagged), 0) FROM jobs WHERE listed = 1 AND id BETWEEN ? AND ? AND flagged > 0",
            (first_id, last_id if last_id is not None else 1 << 62),
        )
        return int(row[0][0])

    def faces_of(self, job_id: int) -> list[FaceRow]:
        """Run ``job_id``'s checked faces, by their number on its page."""
        return [
            _face(row)
            for row in self._read(
                "SELECT job_id, idx, restored, detail, distance, flagged, descriptor FROM faces"
                " WHERE job_id = ? ORDER BY idx",
                (job_id,),
            )
        ]

    def described_faces(self, first_id: int, last_id: int | None = None) -> list[FaceRow]:
        """The described faces of the photos Results lists (each photo's newest done run) among
        the runs ``first_id`` to ``last_id`` (None: the newest): a batch's (``Batch.first_id``),
        in run and face order."""
        last = last_id if last_id is not None else 1 << 62
        return [
            _face(row)
            for row in self._read(
                "SELECT f.job_id, f.idx, f.restored, f.detail, f.distance, f.flagged, f.descriptor"
                " FROM faces AS f JOIN jobs AS j ON j.id = f.job_id"
                " WHERE f.job_id BETWEEN ? AND ? AND j.listed = 1 AND f.descriptor IS NOT NULL"
                " ORDER BY f.job_id, f.idx",
                (first_id, last),
            )
        ]

    def faces_since(self, first_photo: int, limit: int) -> list[FaceRow]:
        """The described faces of the photos Results lists whose first run is ``first_photo`` or
        later (a batch and every photo since: ``BatchQueries.batch_start``), each photo as its
        newest done run, in run and face order; at most ``limit``."""
        return [
            _face(row)
            for row in self._read(
                "SELECT f.job_id, f.idx, f.restored, f.detail, f.distance, f.flagged, f.descriptor"
                " FROM faces AS f JOIN jobs AS j ON j.id = f.job_id"
                " WHERE f.job_id >= ? AND j.listed = 1 AND COALESCE(j.photo, j.id) >= ?"
                " AND f.descriptor IS NOT NULL ORDER BY f.job_id, f.idx LIMIT ?",
                (first_photo, first_photo, limit),
            )
        ]

    def listed_since(self, first_id: int) -> tuple[int, float]:
        """How many runs Results lists from run ``first_id`` on, and the sum of their ids: it
        changes when one of them ends or is redone (what ``faces_since`` reads), not when one is
        marked. The People view groups a batch again only then."""
        row = self._read("SELECT COUNT(*), TOTAL(id) FROM jobs WHERE id >= ? AND listed = 1", (first_id,))
        return int(row[0][0]), float(row[0][1])


def _face(row: sqlite3.Row) -> FaceRow:
    job_id, idx, restored, detail, distance, flagged, descriptor = tuple(row)
    return FaceRow(
        index=int(idx),
        restored=bool(restored),
        detail=float(detail) if detail is not None else None,
        distance=float(distance) if distance is not None else None,
        flagged=bool(flagged),
        descriptor=bytes(descriptor) if descriptor is not None else b"",
        job_id=int(job_id),
    )
