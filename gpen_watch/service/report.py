"""The running service's ``Status``, assembled from the journal, the pool, the model gate and the
loop's own bookkeeping (service loop only: it reads the pool, which that thread owns)."""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gpen_watch import __version__, config
from gpen_watch import platform as platforms
from gpen_watch.outbox import naming
from gpen_watch.restore.api import ModelKey
from gpen_watch.service.inbox_status import InboxStatus
from gpen_watch.service.jobs import node_name
from gpen_watch.service.running import Running
from gpen_watch.service.status import (
    ClusterStatus,
    ErrorEntry,
    ModelSetStatus,
    ProblemStatus,
    QueueStatus,
    Status,
    WorkerStatus,
    from_json,
    nodes_of,
    to_json,
)
from gpen_watch.watch.events import InboxPresence, InboxState

# Failures listed in the status, newest first.
RECENT_ERRORS = 5


def build_status(run: Running) -> Status:
    journal, pool, gate = run.journal, run.pool, run.gate
    restored_today, no_face_today, faces_today = journal.today()
    flagged_today = journal.flagged_today()
    errors = tuple(
        ErrorEntry(
            when=time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(j.finished or j.created)),
            file=str(j.source),
            error=j.error or "",
            node=j.node or "",
        )
        for j in journal.open_failures(RECENT_ERRORS)
    )
    outbox = run.cfg.watch.outbox
    # In cluster mode without local workers the workers come with the nodes: the cluster says
    # what is missing, not the pool's "no worker configured".
    pool_problem = pool.problem() if run.cluster is None or pool.worker_count() else None
    counts = journal.counts()
    rss, rss_peak = rss_mb()
    # The pool (dispatch/) still reports plain dicts: typed here, at the one border.
    workers = tuple(
        from_json(WorkerStatus, {**w, "model_sets": model_sets_status(run.cfg, w.get("model_sets", []))})
        for w in pool.snapshot()
    )
    problems = _each(
        ("outbox", run.presence.outbox_problem(counts.get("queued", 0) + len(run.held))),
        ("service", run.problem),
        ("workers", None if run.problem else pool_problem),
        (
            "models",
            gate.problem() if gate is not None else None,
            gate.problem_line() if gate is not None else "",
        ),
        ("originals", run.originals.problem()),
        ("cluster", run.cluster.problem if run.cluster is not None else None),
        ("engine", engine_problem(workers)),
    )
    notices = _each(
        ("models", gate.notice() if gate is not None else None), ("originals", run.originals.notice())
    )
    return Status(
        version=__version__,
        pid=os.getpid(),
        uptime_s=round(time.monotonic() - run.started, 1),
        started_at=run.started_at,
        paused=run.paused,
        standby=str(run.standby.reason),
        standby_text=run.standby.text,
        standby_until=run.standby.until,
        stopping=run.stop.is_set(),
        problem="\n".join(p.text for p in problems) or None,
        notice="; ".join(n.text for n in notices) or None,
        problems=problems,
        notices=notices,
        originals_waiting=run.originals.waiting_count,
        originals_left=run.originals.left_count,
        queue=from_json(
            QueueStatus,
            {
                **counts,
                "failed_by_bug": journal.bug_failures(),
                "in_flight": pool.in_flight(),
                "restoring": pool.restoring(),
                "redos": journal.redos_done(),
            },
        ),
        done_today=restored_today + no_face_today,
        restored_today=restored_today,
        no_face_today=no_face_today,
        flagged_today=flagged_today,
        faces_today=faces_today,
        redos_today=journal.redos_today(),
        settling=run.watcher.pending if run.watcher is not None else 0,
        special_files=run.watcher.special_files if run.watcher is not None else 0,
        throughput=run.tp.summary(),
        batch=run.batches.status(counts),
        workers=workers,
        nodes=nodes_of(workers, node_name("")),
        cluster=from_json(ClusterStatus, run.cluster.status()) if run.cluster is not None else None,
        models=gate.status() if gate is not None else None,
        last_errors=errors,
        inboxes=tuple(str(i.path) for i in run.cfg.watch.inboxes),
        inbox_states=inbox_statuses(run.cfg, run.inbox_states.values()),
        outbox=str(outbox),
        failed=str(naming.failed_root(outbox)),
        log_file=log_file(),
        torch_loaded="torch" in sys.modules,
        ray_loaded="ray" in sys.modules,
        rss_mb=rss,
        rss_peak_mb=rss_peak,
    )


def inbox_statuses(cfg: config.Config, states: Iterable[InboxState]) -> tuple[InboxStatus, ...]:
    """The watcher's latest ``states`` in the order of the configured inboxes (one the settings no
    longer name, after a reload, last)."""
    order = {Path(i.path): n for n, i in enumerate(cfg.watch.inboxes)}
    return tuple(
        InboxStatus(
            path=config.short_path(st.root),
            watched=st.presence == InboxPresence.WATCHED,
            away_reason=st.reason,
            mode=st.mode,
            mode_reason=st.mode_reason,
            poll_interval_s=cfg.watch.poll_interval if st.mode == "polling" else 0.0,
            waiting_download=st.waiting_download,
            next_rescan_s=round(st.next_rescan_s, 1),
        )
        for st in sorted(states, key=lambda st: order.get(st.root, len(order)))
    )


def engine_problem(workers: Iterable[WorkerStatus]) -> str | None:
    """What the workers' engines say is not what the settings asked for (a provider that is not
    installed, so the CPU provider runs; a number format the CPU would emulate, so fp32 runs):
    each sentence once, however many workers say it."""
    notes = dict.fromkeys(w.engine_note for w in workers if w.engine_note)
    return " ".join(notes) or None


def _each(*items: tuple[str, str | None] | tuple[str, str | None, str | None]) -> tuple[ProblemStatus, ...]:
    """The problems (or notices) there are, each with what it is about (and its short line, where
    its maker gives one)."""
    return tuple(
        ProblemStatus(item[0], item[1], (item[2] or "") if len(item) > 2 else "") for item in items if item[1]
    )


def log_file() -> str:
    """The file this process logs to (`gpen-watch run` sets it up), or "" when it logs to none."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            return handler.baseFilename
    return ""


def model_sets_status(cfg: config.Config, loaded: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A worker's model sets (ModelKey fields, from the pool) with the inboxes whose settings need
    each: none for the global settings' set, which every inbox without a model of its own uses."""
    own = ModelKey.of(cfg.restore)
    rows = []
    for fields in loaded:
        key = ModelKey(**fields)
        inboxes = [
            config.short_path(inbox.path)
            for inbox in cfg.watch.inboxes
            if key != own and ModelKey.of(config.inbox_config(cfg, inbox).restore) == key
        ]
        rows.append(to_json(ModelSetStatus(key.networks, tuple(inboxes))))
    return rows


def rss_mb() -> tuple[float | None, float | None]:
    """This process's resident memory now and at its peak, in MB.

    Read from /proc where there is one: getrusage's ru_maxrss survives exec on Linux, so a service
    started by a big process (a test runner holding torch) would report that process's peak.
    """
    try:
        fields = dict(
            line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line
        )
        return (
            round(int(fields["VmRSS"].split()[0]) / 1024, 1),
            round(int(fields["VmHWM"].split()[0]) / 1024, 1),
        )
    except (OSError, KeyError, ValueError):
        pass
    try:
        import resource
    except ImportError:  # Windows
        return None, None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return None, round(peak * platforms.current().maxrss_unit / (1 << 20), 1)
