"""Which desktop notifications to show, decided from one tray view to the next.

Two kinds: a batch finished (the queue ran empty after work: "N restored, M failed"), and a
problem that needs the user (weights missing, outbox not writable, no worker can run). A problem is
announced once when it appears, not on every poll while it lasts.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpen_watch.tray.model import TrayView


@dataclass(frozen=True)
class Notice:
    title: str
    message: str


@dataclass
class NoticeTracker:
    """Feed it every view; it answers with the notices that view calls for."""

    _busy: bool = False
    _restored_at_start: int = 0
    _failed_at_start: int = 0
    _problem_kind: str | None = None
    _seen: bool = False

    def update(self, view: TrayView) -> list[Notice]:
        if view.state in ("starting", "stopping"):
            return []
        notices: list[Notice] = []
        kind = problem_kind(view.problem)
        if kind is not None and kind != self._problem_kind and view.problem:
            notices.append(Notice(PROBLEM_TITLES[kind], view.problem))
        self._problem_kind = kind
        if not self._seen:
            # The first view sets the baseline: a restart with nothing queued says nothing.
            self._seen = True
            self._start_batch(view)
            self._busy = view.queue_depth > 0
            return notices
        if view.queue_depth > 0 and not self._busy:
            self._busy = True
            self._start_batch(view)
        elif view.queue_depth == 0 and self._busy:
            self._busy = False
            restored = view.restored_total - self._restored_at_start
            failed = view.failed_total - self._failed_at_start
            if restored or failed:
                notices.append(Notice("gpen-watch: batch finished", batch_message(restored, failed)))
        return notices

    def _start_batch(self, view: TrayView) -> None:
        self._restored_at_start = view.restored_total
        self._failed_at_start = view.failed_total


PROBLEM_TITLES = {
    "weights": "gpen-watch: model weights missing",
    "outbox": "gpen-watch: cannot write to the outbox",
    "other": "gpen-watch needs attention",
}


def problem_kind(problem: str | None) -> str | None:
    if not problem:
        return None
    text = problem.lower()
    if text.startswith("outbox"):
        return "outbox"
    if "weights" in text or "models fetch" in text or "model file" in text:
        return "weights"
    return "other"


def batch_message(restored: int, failed: int) -> str:
    text = f"{restored} photo{'s' if restored != 1 else ''} restored"
    if failed:
        text += f", {failed} failed (see the failed folder)"
    return text
