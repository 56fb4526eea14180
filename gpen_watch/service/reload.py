"""New settings for a running service (the ``reload`` control command): which changed, and the
workers' graceful restart when they need one.

What a changed setting needs is config.applies.applies (one table). The service loop applies the
rest: a new watcher for watch.*, and output.* by holding the new config, read for the next photo.
A worker restart is a stop of the old pool, as on a service stop (the photos being restored get
the stop grace to finish, the others go back to the queue), then a new pool on the new settings.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpen_watch.config import Config, InboxConfig
from gpen_watch.config.applies import Applies, applies
from gpen_watch.dispatch.pool import Pool
from gpen_watch.service.running import Running, WorkerRestart

RESTARTED = "the workers restarted for new settings"


@dataclass(frozen=True)
class Plan:
    """What the new settings change, by when each applies."""

    changed: tuple[str, ...]

    def of(self, when: Applies) -> list[str]:
        return [name for name in self.changed if applies(name) is when]

    @property
    def watcher(self) -> bool:
        return bool(self.of(Applies.WATCHER))

    @property
    def workers(self) -> bool:
        return bool(self.of(Applies.WORKERS))


def changed(old: Config, new: Config) -> list[str]:
    """The dotted settings whose values differ. The inboxes are compared as watch.inboxes (their
    folders and options) and as their profiles, watch.inboxes.restore and watch.inboxes.output."""
    names: list[str] = []
    for section in dataclasses.fields(Config):
        a, b = getattr(old, section.name), getattr(new, section.name)
        for f in dataclasses.fields(a):
            name = f"{section.name}.{f.name}"
            if name == "watch.inboxes":
                names += _inbox_changes(a.inboxes, b.inboxes)
            elif getattr(a, f.name) != getattr(b, f.name):
                names.append(name)
    return names


def _inbox_changes(old: list[InboxConfig], new: list[InboxConfig]) -> list[str]:
    plain = [(i.path, i.recursive, i.outbox) for i in old] != [(i.path, i.recursive, i.outbox) for i in new]
    out = ["watch.inboxes"] if plain else []
    for part in ("restore", "output"):
        if [getattr(i, part) for i in old] != [getattr(i, part) for i in new]:
            out.append(f"watch.inboxes.{part}")
    return out


def kept_running(old: Config, new: Config, *, pool_fixed: bool) -> Config:
    """``new`` with the sections that only a service restart applies left as they run, so that
    the service's config says what it does. ``pool_fixed``: the workers cannot restart here (a
    cluster's pool is its membership's), so restore.* and workers.* stay too."""
    out = dataclasses.replace(new, cluster=old.cluster, dashboard=old.dashboard)
    if pool_fixed:
        # workers.schedule and pause_on_battery are the service loop's, which applies them here too.
        workers = dataclasses.replace(
            old.workers, schedule=new.workers.schedule, pause_on_battery=new.workers.pause_on_battery
        )
        # The terms the user said yes to are the model gate's (this machine's downloads), not the pool's.
        restore = dataclasses.replace(old.restore, accepted_terms=new.restore.accepted_terms)
        out = dataclasses.replace(out, restore=restore, workers=workers)
    return out


def apply(
    run: Running,
    old: Config,
    new: Config,
    *,
    new_watcher: Callable[[Config], None],
    fresh_pool: Callable[[Config], Pool],
    grace: float,
) -> tuple[Config, dict[str, Any]]:
    """Put ``new`` in effect over ``old`` in a running service: the config it now runs on, and the
    ``reload`` reply (what changed, whether the workers restart, what waits for a service restart).
    ``new_watcher`` watches the (new) inboxes; ``fresh_pool`` makes the pool of a worker restart;
    ``grace``: the seconds the photos being restored get to finish, as on a stop."""
    plan = Plan(tuple(changed(old, new)))
    pool_fixed = run.cluster is not None
    later = plan.of(Applies.SERVICE) + (plan.of(Applies.WORKERS) if pool_fixed else [])
    new = kept_running(old, new, pool_fixed=pool_fixed)
    run.cfg = run.originals.cfg = new  # output.* and the inboxes' profiles: from the next photo
    run.presence.configure(new)
    restarting = plan.workers and not pool_fixed
    if plan.watcher:
        new_watcher(new)
    if restarting:
        begin_restart(run, lambda: fresh_pool(new), grace)
    elif "restore.accepted_terms" in plan.changed and run.gate is not None:
        run.gate.accept(new.restore.accepted_terms)  # the downloads it allows start now
    run.maybe_queued = True
    return new, {"ok": True, "changed": list(plan.changed), "workers_restart": restarting, "later": later}


def summary(reply: dict[str, Any]) -> str:
    """A ``reload`` reply in words, for the log and `gpen-watch reload`."""
    changed_names = [str(n) for n in reply.get("changed") or []]
    later = [str(n) for n in reply.get("later") or []]
    line = ", ".join(changed_names) or "nothing changed"
    if reply.get("workers_restart"):
        line += "; the workers restart"
    if later:
        line += f"; {', '.join(later)} apply after a restart of the service"
    return line


def begin_restart(run: Running, make_pool: Callable[[], Pool], grace: float) -> None:
    if run.restart is None:
        run.pool.begin_stop()
        run.restart = WorkerRestart(make_pool, time.monotonic() + grace)
    else:
        run.restart.make_pool = make_pool


def restart_step(run: Running) -> bool:
    """The new pool, once the old one is done or out of time; True when it was swapped."""
    r = run.restart
    if r is None or (run.pool.alive() and time.monotonic() < r.deadline):
        return False
    run.requeue(run.pool.kill_all(), RESTARTED)
    run.pool = r.make_pool()
    run.restart = None
    if run.workers_started:
        run.pool.start()
    else:
        run.pool.hold_for_models()  # the new settings' model files are not all there yet
    if run.paused or run.standby.on:
        run.pool.pause()
    run.maybe_queued = True
    return True
