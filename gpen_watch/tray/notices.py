"""Which desktop notifications to show, decided from one tray view to the next.

Two kinds: a batch finished (the queue ran empty after work: "N restored, M failed"), and a
problem that needs the user (weights missing or damaged, outbox not writable, originals waiting for a folder
that refuses them, no worker can run). A problem is announced once when it appears, not on every
poll while it lasts.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpen_watch.tray.model import TrayView

PROBLEM_TITLES = {
    "weights": "gpen-watch: model weights missing",
    "corrupt": "gpen-watch: model weights damaged or the wrong file",
    "outbox": "gpen-watch: cannot write to the outbox",
    "originals": "gpen-watch: originals waiting to be moved",
    "other": "gpen-watch needs attention",
}


@dataclass(frozen=True)
class Notice:
    title: str
    message: str


@dataclass
class NoticeTracker:
    """Feed it every view; it answers with the notices that view calls for."""

    # Totals when the queue last ran empty; the service counts from 0 when it starts, with the tray.
    _restored_base: int = 0
    _failed_base: int = 0
    _problem_kind: str | None = None

    def update(self, view: TrayView) -> list[Notice]:
        if view.state in ("starting", "stopping"):
            return []
        notices: list[Notice] = []
        kind = problem_kind(view.problem)
        if kind is not None and kind != self._problem_kind and view.problem:
            notices.append(Notice(PROBLEM_TITLES[kind], view.problem))
        self._problem_kind = kind
        if view.queue_depth == 0:
            # The queue is empty: whatever finished since it last was is one batch (also a batch
            # that came and went between two polls).
            restored = view.restored_total - self._restored_base
            failed = view.failed_total - self._failed_base
            if restored > 0 or failed > 0:
                notices.append(Notice("gpen-watch: batch finished", batch_message(restored, failed)))
            self._restored_base, self._failed_base = view.restored_total, view.failed_total
        return notices


def problem_kind(problem: str | None) -> str | None:
    if not problem:
        return None
    text = problem.lower()
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


def batch_message(restored: int, failed: int) -> str:
    text = f"{restored} photo{'s' if restored != 1 else ''} restored"
    if failed:
        text += f", {failed} failed (see the failed folder)"
    return text
