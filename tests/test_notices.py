"""The one decision of which notices to give (service.notices), and the service's notice thread
(service.notifier): desktop only without a tray, the webhook in both cases."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_notices_webhook import Hook

from gpen_watch.config import Config, NotifyConfig
from gpen_watch.service import notices
from gpen_watch.service.notices import NoticeKind, NoticeTracker, StatusFacts
from gpen_watch.service.notifier import Notifier
from gpen_watch.service.status import QueueStatus, Status, Throughput


def facts(
    depth: int = 0, done: int = 0, failed: int = 0, no_face: int = 0, problem: str | None = None
) -> StatusFacts:
    return StatusFacts("running", depth, problem, done, failed, no_face)


def test_a_batch_counts_restored_no_face_and_failed_apart() -> None:
    t = NoticeTracker()
    assert t.update(facts(no_face=7)) == []  # today's earlier photos are no batch of this run
    assert t.update(facts(depth=4, done=1, no_face=7)) == []
    (n,) = t.update(facts(done=3, failed=1, no_face=8))
    assert (n.kind, n.restored, n.no_face, n.failed) == (NoticeKind.BATCH_FINISHED, 2, 1, 1)
    assert n.message == "2 photos restored, 1 without a face, 1 failed (see the failed folder)"
    # After midnight the day's count starts again: no negative counts.
    (n,) = t.update(facts(done=4, no_face=0))
    assert (n.restored, n.no_face) == (1, 0)


def test_a_batch_says_how_many_faces_may_not_look_like_the_same_person() -> None:
    t = NoticeTracker()
    assert t.update(StatusFacts("running", 2, None, 1, 0, 0, flagged_total=1)) == []
    (n,) = t.update(StatusFacts("running", 0, None, 3, 0, 0, flagged_total=4))
    assert n.flagged == 4
    assert n.message == "3 photos restored (4 faces may not look like the same person)"
    # The next batch counts its own.
    (n,) = t.update(StatusFacts("running", 0, None, 4, 0, 0, flagged_total=5))
    assert n.flagged == 1 and n.message == "1 photo restored (1 face may not look like the same person)"


def test_a_failure_burst_is_said_once_while_the_batch_goes_on() -> None:
    t = NoticeTracker()
    t.update(facts(), now=0)
    assert t.update(facts(depth=50, failed=notices.BURST_MIN - 1), now=1) == []
    (n,) = t.update(facts(depth=40, failed=notices.BURST_MIN), now=2)
    assert n.kind == NoticeKind.FAILURES and n.failed == notices.BURST_MIN
    assert n.message.startswith(
        f"{notices.BURST_MIN} photos failed in this batch so far, 40 still in the queue"
    )
    # More failures soon after: quiet, not one notice per file.
    assert t.update(facts(depth=30, failed=3 * notices.BURST_MIN), now=3) == []
    later = 2 + notices.BURST_QUIET_S
    (n,) = t.update(facts(depth=20, failed=3 * notices.BURST_MIN), now=later)
    assert n.failed == 2 * notices.BURST_MIN  # those since the last burst notice
    (n,) = t.update(facts(done=5, failed=3 * notices.BURST_MIN), now=later + 1)
    assert n.kind == NoticeKind.BATCH_FINISHED and n.failed == 3 * notices.BURST_MIN  # the whole batch


class Desktop:
    def __init__(self, session: bool = True) -> None:
        self.session = session
        self.shown: list[tuple[str, str]] = []

    def desktop_session(self) -> bool:
        return self.session

    def notify(self, title: str, message: str) -> bool:
        self.shown.append((title, message))
        return True


class Looks:
    """The status the notice thread reads, set by the test."""

    def __init__(self) -> None:
        self.status = Status(queue=QueueStatus(), throughput=Throughput(), inboxes=("/in",))
        self.read = threading.Event()

    def __call__(self) -> Status:
        self.read.set()
        return self.status

    def batch(self, images: int, failed: int = 0) -> None:
        self.status = Status(throughput=Throughput(images=images, failed=failed), inboxes=("/in",))


@pytest.fixture
def hook() -> Iterator[Hook]:
    h = Hook()
    yield h
    h.close()


def wait_for(cond: object, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.mark.parametrize("tray", [False, True])
def test_desktop_only_without_a_tray_the_webhook_always(hook: Hook, tmp_path: Path, tray: bool) -> None:
    desktop, looks = Desktop(), Looks()
    cfg = Config(notify=NotifyConfig(webhook=hook.url))
    n = Notifier(
        lambda: cfg,
        looks,
        desktop=desktop,
        tray_shows=lambda: tray,
        journal_path=tmp_path / "j.db",
        poll_s=0.02,
    )
    n.start()
    try:
        wait_for(looks.read.is_set, "a first look")
        looks.batch(3)
        wait_for(lambda: hook.bodies, "the webhook's post")
    finally:
        n.close()
    assert [b["event"] for b in hook.bodies] == ["batch_finished"]
    assert hook.bodies[0]["inboxes"] == ["/in"] and hook.bodies[0]["restored"] == 3
    assert desktop.shown == ([] if tray else [("gpen-watch: batch finished", "3 photos restored")])


def test_notify_desktop_false_shows_nothing(tmp_path: Path) -> None:
    desktop, looks = Desktop(), Looks()
    cfg = Config(notify=NotifyConfig(desktop=False))
    n = Notifier(
        lambda: cfg,
        looks,
        desktop=desktop,
        tray_shows=lambda: False,
        journal_path=tmp_path / "j.db",
        poll_s=0.02,
    )
    assert n.webhook is None
    n.deliver(notices.Notice("t", "m", NoticeKind.PROBLEM), looks.status)
    assert desktop.shown == []


def test_the_notice_thread_follows_notify_settings_changed_by_a_reload(hook: Hook, tmp_path: Path) -> None:
    """The service's settings change in place with a reload: a webhook set then gets the next
    notice, and notify.desktop = false stops the desktop's, with no restart."""
    desktop, looks = Desktop(), Looks()
    settings = {"now": Config(notify=NotifyConfig())}
    n = Notifier(
        lambda: settings["now"],
        looks,
        desktop=desktop,
        tray_shows=lambda: False,
        journal_path=tmp_path / "j.db",
        poll_s=0.02,
    )
    n.start()
    try:
        wait_for(looks.read.is_set, "a first look")
        looks.batch(1)
        wait_for(lambda: desktop.shown, "the desktop notice")
        assert n.webhook is None
        settings["now"] = Config(notify=NotifyConfig(desktop=False, webhook=hook.url))
        wait_for(lambda: n.webhook is not None, "the webhook set")
        looks.batch(4)  # three more this run: the next batch
        wait_for(lambda: hook.bodies, "the webhook's post")
    finally:
        n.close()
    assert [b["restored"] for b in hook.bodies] == [3]
    assert desktop.shown == [("gpen-watch: batch finished", "1 photo restored")]
