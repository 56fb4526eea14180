"""What a photo's page says of its faces' checks (docs/identity.md): each face's identity distance
and whether it may not look like the same person, the faces left as they were because already
sharp, and, where the identity check did not run, why, in one sentence instead of nothing.

The measures are the journal's (``journal.faces``), recorded with the run's result; the settings
in effect now only say why a check cannot run at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpen_watch.config import Config
from gpen_watch.dashboard.people import why_not_described
from gpen_watch.journal.browse import JournalBrowser
from gpen_watch.journal.faces import FaceRow
from gpen_watch.journal.records import Job
from gpen_watch.journal.states import SUCCEEDED

# How the engine's notes begin when the check could not run (restore.engines.face_checks).
_DID_NOT_RUN = ("the identity check did not run", "the identity check failed")


@dataclass(frozen=True)
class FaceCheckView:
    """One face's checks as its page shows them."""

    row: FaceRow
    person: str  # "RUN.FACE" for Results' "photos of this person"; "" when not described

    @property
    def sharp(self) -> bool:
        """Left as it was because already sharp (the journal keeps no other face left out)."""
        return not self.row.restored

    @property
    def distance_text(self) -> str:
        return f"{self.row.distance:.2f}" if self.row.distance is not None else ""


def face_checks_context(journal: JournalBrowser, job: Job, cfg: Config) -> dict[str, Any]:
    """``checks`` (face number: FaceCheckView) and ``identity_note`` (why no face of this run has
    an identity distance, or "")."""
    rows = journal.faces_of(job.id)
    checks = {r.index: FaceCheckView(r, f"{job.id}.{r.index}" if r.descriptor else "") for r in rows}
    return {
        "checks": checks,
        "identity_note": identity_note(job, rows, cfg),
        "identity_threshold": cfg.restore.identity_threshold,
    }


def identity_note(job: Job, rows: list[FaceRow], cfg: Config) -> str:
    """Why no restored face of ``job`` has an identity distance, in a sentence; "" when some
    has, or when no face was restored (nothing to check)."""
    if job.state not in SUCCEEDED or not job.faces or any(r.distance is not None for r in rows):
        return ""
    for note in job.notes:
        if note.startswith(_DID_NOT_RUN):
            return note[:1].upper() + note[1:] + "."
    now = why_not_described(cfg)
    if rows:
        return now or (
            "The identity check did not run for this photo: restore.identity_check was off when it "
            "was restored."
        )
    return now or (
        "No identity check is recorded for this photo: it was restored before gpen-watch checked "
        "faces, or by a restorer that does not."
    )
