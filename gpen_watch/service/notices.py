"""Which notices to give, decided from one look at the service to the next: the one home of that
decision, for the tray (fed its ``TrayView``) and for the headless service's notice thread (fed
``facts_of(status)``), so both say the same things at the same moments.

Three kinds: a batch finished (the queue ran empty after work: "N restored, M failed"), a failure
burst (photos keep failing while a batch goes on: said before the batch ends, at most once per
``BURST_QUIET_S``), and a problem that needs the user (weights missing or damaged, outbox not
writable, originals waiting for a folder that refuses them, no worker can run, a worker's engine
not the one the settings ask for). A problem is announced once when it appears, not on every look
while it lasts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from gpen_watch.base.strenum import StrEnum
from gpen_watch.service.status import Status

PROBLEM_TITLES = {
    "weights": "gpen-watch: model weights missing",
    "corrupt": "gpen-watch: model weights damaged or the wrong file",
    "outbox": "gpen-watch: cannot write to the outbox",
    "away": "gpen-watch: the outbox's drive or share is away",
    "originals": "gpen-watch: originals waiting to be moved",
    "engine": "gpen-watch: not the engine, provider or number format the settings ask for",
    "other": "gpen-watch needs attention",
}
BATCH_TITLE = "gpen-watch: batch finished"
BURST_TITLE = "gpen-watch: photos are failing"
# Failures of a batch still going on that make a burst worth saying before the batch ends.
BURST_MIN = 5
# At most one burst notice in this long: a batch where every photo fails says so once, not per file.
BURST_QUIET_S = 600.0


class NoticeKind(StrEnum):
    BATCH_FINISHED = "batch_finished"
    FAILURES = "failures"
    PROBLEM = "problem"


@dataclass(frozen=True)
class Notice:
    """One notice. ``kind`` None: a message of the tray's own (a menu action that failed), which
    no one but the tray shows. The counts are the batch's (or the burst's) photos."""

    title: str
    message: str
    kind: NoticeKind | None = None
    restored: int = 0  # with restored faces
    failed: int = 0
    no_face: int = 0  # done, but no face was found to restore
    flagged: int = 0  # faces that may not look like the same person (docs/identity.md)


class NoticeFacts(Protocol):
    """What the decision reads of one look at the service (``tray.model.TrayView`` has these)."""

    @property
    def state(self) -> str: ...
    @property
    def queue_depth(self) -> int: ...
    @property
    def problem(self) -> str | None: ...
    @property
    def restored_total(self) -> int: ...  # photos done this run, with or without a face
    @property
    def failed_total(self) -> int: ...
    @property
    def no_face(self) -> int: ...  # photos done today without a face (the journal's count)
    @property
    def flagged_total(self) -> int: ...  # faces flagged this run (restore.identity_threshold)


@dataclass(frozen=True)
class StatusFacts:
    """``NoticeFacts`` of a status reply, for the service's own notice thread."""

    state: str
    queue_depth: int
    problem: str | None
    restored_total: int
    failed_total: int
    no_face: int
    flagged_total: int = 0


def facts_of(status: Status) -> StatusFacts:
    return StatusFacts(
        state="stopping" if status.stopping else "running",
        queue_depth=status.queue.depth,
        problem=status.problem_line(),  # one short line: a notice is no place for a block
        restored_total=status.throughput.images,
        failed_total=status.throughput.failed,
        no_face=status.no_face_today,
        flagged_total=status.throughput.flagged,
    )


@dataclass
class NoticeTracker:
    """Feed it every look; it answers with the notices that look calls for."""

    # Totals when the queue last ran empty (or a burst was said); the service counts from 0 when it
    # starts, and the tray and the notice thread start with it.
    _done_base: int = 0
    _failed_base: int = 0
    _flagged_base: int = 0
    _no_face_base: int | None = None
    _problem_kind: str | None = None
    _burst_at: float | None = None
    _burst_failed: int = 0  # failures of this batch already in a burst notice

    def update(self, facts: NoticeFacts, now: float | None = None) -> list[Notice]:
        if facts.state in ("starting", "stopping"):
            return []
        now = time.monotonic() if now is None else now
        notices: list[Notice] = []
        kind = problem_kind(facts.problem)
        if kind is not None and kind != self._problem_kind and facts.problem:
            notices.append(Notice(PROBLEM_TITLES[kind], facts.problem, NoticeKind.PROBLEM))
        self._problem_kind = kind
        if self._no_face_base is None or facts.no_face < self._no_face_base:
            self._no_face_base = facts.no_face  # the first look, or the day's count began again
        done = facts.restored_total - self._done_base
        failed = facts.failed_total - self._failed_base
        no_face = min(max(0, facts.no_face - self._no_face_base), max(0, done))
        flagged = max(0, facts.flagged_total - self._flagged_base)
        if facts.queue_depth == 0:
            # The queue is empty: whatever finished since it last was is one batch (also a batch
            # that came and went between two looks).
            if done > 0 or failed > 0:
                message = batch_message(done - no_face, failed, no_face, flagged)
                notices.append(
                    Notice(
                        BATCH_TITLE,
                        message,
                        NoticeKind.BATCH_FINISHED,
                        done - no_face,
                        failed,
                        no_face,
                        flagged,
                    )
                )
            self._done_base, self._failed_base = facts.restored_total, facts.failed_total
            self._flagged_base = facts.flagged_total
            self._no_face_base = facts.no_face
            self._burst_failed = 0
        elif failed - self._burst_failed >= BURST_MIN and (
            self._burst_at is None or now - self._burst_at >= BURST_QUIET_S
        ):
            new = failed - self._burst_failed
            notices.append(
                Notice(BURST_TITLE, burst_message(new, facts.queue_depth), NoticeKind.FAILURES, failed=new)
            )
            self._burst_at, self._burst_failed = now, failed
        return notices


def problem_kind(problem: str | None) -> str | None:
    if not problem:
        return None
    text = problem.lower()
    # A worker's engine note ("restore.provider = directml: ... so the CPU provider runs
    # instead", "restore.parse_precision = bf16: this CPU has no bf16 instructions ..."): the
    # service puts it last (report.build_status), so alone it starts the text.
    if text.startswith(
        ("restore.provider", "restore.engine", "restore.precision", "restore.parse_precision")
    ):
        return "engine"
    if text.startswith("outbox") and " is away: " in text:
        return "away"
    if text.startswith("outbox"):
        return "outbox"
    # Checked before "missing": a damaged file's message also says how to fetch a good one.
    if "corrupt" in text or "does not match" in text or "could not load the model" in text:
        return "corrupt"
    if "weights" in text or "models fetch" in text or "model file" in text:
        return "weights"
    # The service puts this one last (Service.status): alone it starts the text.
    if text.startswith("cannot move originals"):
        return "originals"
    return "other"


def _photos(n: int) -> str:
    return f"{n} photo{'s' if n != 1 else ''}"


def batch_message(restored: int, failed: int, no_face: int = 0, flagged: int = 0) -> str:
    text = f"{_photos(restored)} restored"
    if flagged:
        text += f" ({flagged_faces(flagged)})"
    if no_face:
        text += f", {no_face} without a face"
    if failed:
        text += f", {failed} failed (see the failed folder)"
    return text


def flagged_faces(n: int) -> str:
    """ "3 faces may not look like the same person" (restore.identity_threshold)."""
    return f"{n} face{'s' if n != 1 else ''} may not look like the same person"


def burst_message(failed: int, waiting: int) -> str:
    return (
        f"{_photos(failed)} failed in this batch so far, {waiting} still in the queue (see the failed folder)"
    )
