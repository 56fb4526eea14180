"""The tray's notices: decided in ``service.notices`` (the one home of that decision, which the
headless service's notice thread uses too), fed the tray's view; re-exported here for the tray."""

from __future__ import annotations

from gpen_watch.service.notices import (
    PROBLEM_TITLES,
    Notice,
    NoticeKind,
    NoticeTracker,
    batch_message,
    burst_message,
    problem_kind,
)

__all__ = [
    "PROBLEM_TITLES",
    "Notice",
    "NoticeKind",
    "NoticeTracker",
    "batch_message",
    "burst_message",
    "problem_kind",
]
