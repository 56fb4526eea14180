"""`gpen-watch run`: inbox watcher -> journal -> restorer pool -> outbox, until told to stop.

One thread, the service loop, owns the pool and drives every job from claim to commit, so the
order of journal writes and file moves is simple to reason about. Other threads only hand things
to it: the watcher's threads queue arrivals, the control channel queues requests, signal handlers
set the stop flag; each then wakes the loop through the pool's wake pipe.

This module is the service's life (start, loop, stop) and the control channel's way into the loop;
what exists only while it runs is ``running.Running``, and the loop's steps are ``intake``
(arrivals into the journal), ``jobs`` (claims, results), ``report`` (the status), ``requests``
(the control commands' replies) and ``reload`` (new settings).

This process never imports torch (workers do): it stays small and starts fast, and a CUDA fault
cannot take it down. ``status`` reports ``torch_loaded`` so tests can check.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from gpen_watch import __version__
from gpen_watch.base.errors import GpenWatchError
from gpen_watch.config import Config, inbox_profiles
from gpen_watch.config.source import ConfigSource
from gpen_watch.dispatch import devices
from gpen_watch.dispatch import protocol as P
from gpen_watch.dispatch.pool import Pool
from gpen_watch.journal import Journal, default_path
from gpen_watch.outbox import recovery
from gpen_watch.service import control, intake, jobs, notifier, reload, requests, submit
from gpen_watch.service.folders import check_service_folders, prepare_service_folders
from gpen_watch.service.model_gate import ModelGate
from gpen_watch.service.running import Running
from gpen_watch.service.views import ViewsKeeper
from gpen_watch.watch.events import InboxState
from gpen_watch.watch.watcher import Arrival, Watcher

log = logging.getLogger(__name__)

# Longest sleep of the loop when nothing happens (deadlines inside the pool wake it earlier).
IDLE_TICK_S = 5.0
# Development hook: the restorer factory workers load ("module:attr"); tests and benchmarks use a
# stand-in (engine_from_environ).
RESTORER_ENV = "GPEN_WATCH_RESTORER"
# Files the engine would refuse from their header alone are set aside on arrival (intake.refusal).
# Those rules are the real engine's: a stand-in restorer restores any bytes, so it gets them only
# when this variable is "1".
HEADER_CHECKS_ENV = "GPEN_WATCH_HEADER_CHECKS"
STOPPED_EARLY = "the service stopped before this run finished"
# How often the loop looks whether the old pool of a worker restart is done.
RESTART_TICK_S = 0.2


REAL_ENGINE = P.EngineChoice()
# Control commands the service loop answers (``ping`` and ``stop`` are answered at once).
QUEUED_COMMANDS = (
    "status",
    "pause",
    "resume",
    "reload",
    "redo",
    "retry",
    "dismiss",
    "keep",
    "mark",
    "bulk",
    *submit.COMMANDS,
)


def engine_from_environ(environ: Mapping[str, str]) -> P.EngineChoice:
    """The real engine, or the stand-in that ``GPEN_WATCH_RESTORER`` names (tests, benchmarks)."""
    factory = environ.get(RESTORER_ENV, "")
    if not factory:
        return REAL_ENGINE
    return P.EngineChoice.stand_in(factory, header_rules=environ.get(HEADER_CHECKS_ENV) == "1")


class Service:
    """The watch service. ``run()`` blocks until ``request_stop()`` (from any thread or a signal)."""

    def __init__(
        self,
        cfg: Config,
        *,
        engine: P.EngineChoice = REAL_ENGINE,
        child_env: dict[str, str] | None = None,
        stop_grace: float = 10.0,
        journal_path: Path | None = None,
        source: ConfigSource | None = None,
    ) -> None:
        self.cfg = cfg
        # The settings file and command line this service's config came from (``reload``).
        self.source = source
        self.engine = engine
        self.child_env = child_env or {}
        self.stop_grace = stop_grace
        self.journal_path = journal_path
        self._arrivals: queue.Queue[Arrival | Path] = queue.Queue()
        self._requests: queue.Queue[tuple[dict[str, Any], Future[dict[str, Any]]]] = queue.Queue()
        self._stop = threading.Event()
        self._closed = threading.Event()  # the loop no longer answers requests
        self._stop_deadline: float | None = None
        # Set while run() runs; other threads read it only to wake the loop.
        self._run: Running | None = None
        self._inbox_states: dict[Path, InboxState] = {}  # the watcher's latest, before a Running exists
        self.ready = threading.Event()  # set once everything is up (tests, tray)
        # Where the dashboard serves, or why it does not (it runs beside the service: cli.run).
        self.dashboard_url = ""
        self.dashboard_problem: str | None = None
        # Where the API listens for other machines (api.address), its certificate's SHA-256
        # fingerprint, or why it does not.
        self.api_url = ""
        self.api_fingerprint = ""
        self.api_problem: str | None = None
        # The tray shows the desktop notices itself (tray.app sets it once its icon is up).
        self.tray_notices = False
        self._notices: notifier.Notifier | None = None

    @property
    def journal_file(self) -> Path:
        return self.journal_path or default_path()

    # --- thread-safe entry points ---------------------------------------------------------------

    def request_stop(self) -> None:
        """Graceful stop; a second request cuts the grace period short."""
        if self._stop.is_set():
            self._stop_deadline = time.monotonic()
        self._stop.set()
        self._wake()

    def arrived(self, arrival: Arrival) -> None:
        """Called by the watcher (any thread) for each settled file."""
        self._arrivals.put(arrival)
        self._wake()

    def inbox_state(self, state: InboxState) -> None:
        """Called by the watcher (its thread) when an inbox went away, came back or is watched
        another way; kept on the Running for the status and the job side."""
        self._inbox_states[state.root] = state
        run = self._run
        if run is not None:
            run.inbox_states[state.root] = state
        self._wake()

    def vanished(self, path: Path) -> None:
        """Called by the watcher (any thread) when a file in an inbox was deleted or moved away."""
        self._arrivals.put(Path(path))
        self._wake()

    def control(self, request: dict[str, Any]) -> dict[str, Any]:
        """Control channel handler (runs on the channel's threads)."""
        cmd = request["cmd"]
        if cmd == "ping":
            return {"ok": True, "pid": os.getpid()}
        if cmd == "stop":
            self.request_stop()
            return {"ok": True, "pid": os.getpid()}
        if cmd not in QUEUED_COMMANDS:
            return {
                "ok": False,
                "error": f"unknown command {cmd!r}; use status, pause, resume, reload or stop",
            }
        if self._closed.is_set():
            return {"ok": False, "error": "the service is stopping"}
        fut: Future[dict[str, Any]] = Future()
        self._requests.put((request, fut))
        self._wake()
        try:
            return fut.result(timeout=15.0)
        except TimeoutError:
            return {"ok": False, "error": "the service is busy; try again"}

    def _wake(self) -> None:
        run = self._run
        if run is not None:
            run.pool.wake()

    # --- life -----------------------------------------------------------------------------------

    def run(self) -> int:
        with control.InstanceLock():
            try:
                prepare_service_folders(self.cfg)
                with Journal.open(self.journal_path) as journal:
                    cluster = self.cfg.cluster
                    local = cluster.local_workers or not cluster.address
                    pool = self._make_pool(self.cfg, local)
                    gate = None
                    if self.engine.model_files:
                        profiles = inbox_profiles(self.cfg)
                        gate = ModelGate(self.cfg.restore, self._wake, profiles=profiles)
                    run = Running(
                        self.cfg, journal, pool, gate, self._stop, header_checks=self.engine.header_rules
                    )
                    run.views = ViewsKeeper.for_config(self.cfg, self.journal_path or default_path(), journal)
                    if cluster.address:
                        from gpen_watch.cluster.membership import Membership

                        run.cluster = Membership(
                            self.cfg, pool, factory=self.engine.factory, env=self.child_env
                        )
                    run.inbox_states.update(self._inbox_states)
                    self._run = run
                    try:
                        self._serve(run)
                    finally:
                        self._run = None
            finally:
                self._closed.set()
                self._refuse_requests()
        log.info("gpen-watch stopped")
        return 0

    def _make_pool(self, cfg: Config, local: bool = True) -> Pool:
        return Pool(
            devices.resolve_slots(cfg.workers) if local else [],
            cfg.restore,
            cfg.workers,
            factory=self.engine.factory,
            child_env=self.child_env,
            log_level=logging.getLogger().getEffectiveLevel(),
        )

    def _serve(self, run: Running) -> None:
        server: control.ControlServer | None = None
        try:
            _recover(run)
            submit.finish_uploads(run)  # before the watcher's first scan
            if run.gate is None or run.gate.start():
                run.start_workers()
            else:
                run.pool.hold_for_models()
            server = control.ControlServer(self.control)
            server.start()
            run.watcher = self._start_watcher()
            log.info(
                "gpen-watch %s running (pid %d): watching %s -> %s%s",
                __version__,
                os.getpid(),
                ", ".join(str(i.path) for i in self.cfg.watch.inboxes),
                self.cfg.watch.outbox,
                "" if run.workers_started else "; photos wait in the queue until the model files are there",
            )
            self.ready.set()
            self._notices = notifier.start_for(self)  # a thread beside the loop (desktop, webhook)
            self._loop(run)
            self._shutdown(run)
        finally:
            self._closed.set()
            if run.gate is not None:
                run.gate.close()
            self._refuse_requests()
            _stop_watcher(run)
            if run.pool.alive():
                run.requeue(run.pool.kill_all(), STOPPED_EARLY)
            if run.cluster is not None:
                run.cluster.close()
            run.batches.close()
            if server is not None:
                server.close()
            if self._notices is not None:
                self._notices.close()
                self._notices = None

    def _loop(self, run: Running) -> None:
        while not self._stop.is_set():
            reload.restart_step(run)
            pool = run.pool  # a new one after a worker restart
            intake.take_arrivals(run, self._arrivals)
            self._answer_requests(run)
            jobs.feed(run)
            _watch_models(run)
            run.originals.retry(run.journal, self._stop)
            if run.cluster is not None:
                run.cluster.poll()
            run.tp.busy(pool.in_flight() > 0)
            for event in pool.poll(self._tick(run)):
                jobs.on_event(run, event)
            stranded = pool.take_back_stranded()
            if stranded:
                run.requeue(stranded, "no worker can run it: " + (pool.problem() or "no worker"))

    def _tick(self, run: Running) -> float:
        idle = IDLE_TICK_S if run.gate is None else min(IDLE_TICK_S, run.gate.due_in())
        if run.restart is not None:
            idle = min(idle, RESTART_TICK_S)  # the old pool's end is no event of the new one
        if run.hold_until and self._arrivals.empty():
            return max(0.0, min(idle, run.hold_until - time.monotonic()))
        return 0.0 if not self._arrivals.empty() or not self._requests.empty() else idle

    def _shutdown(self, run: Running) -> None:
        """Finish or hand back the work in flight within stop_grace seconds."""
        pool = run.pool
        log.info(
            "%s",
            stopping_line(
                pool.restoring(), pool.in_flight() - pool.restoring() + pool.pending(), self.stop_grace
            ),
        )
        _stop_watcher(run)
        pool.begin_stop()
        deadline = self._stop_deadline = time.monotonic() + self.stop_grace
        while pool.alive() and time.monotonic() < (self._stop_deadline or deadline):
            self._answer_requests(run)
            for event in pool.poll(min(0.5, max(0.0, (self._stop_deadline or deadline) - time.monotonic()))):
                jobs.on_event(run, event)
        run.requeue(pool.kill_all(), STOPPED_EARLY)
        # Record what arrived meanwhile (queued for the next start).
        intake.take_arrivals(run, self._arrivals, limit=1 << 30)

    def _start_watcher(self, cfg: Config | None = None) -> Watcher:
        w = Watcher.from_config(
            cfg or self.cfg, self.arrived, on_gone=self.vanished, on_inbox_state=self.inbox_state
        )
        w.start()  # its first act is the start-up scan: files dropped while we were down
        return w

    # --- control --------------------------------------------------------------------------------

    def _answer_requests(self, run: Running) -> None:
        waiting: list[tuple[dict[str, Any], Future[dict[str, Any]]]] = []
        while True:
            try:
                waiting.append(self._requests.get_nowait())
            except queue.Empty:
                break
        # The photos sent through the API that wait are taken together (one flush of the journal
        # for all of them: service.submit.take_all), before the turn's other commands.
        sent = [(request, fut) for request, fut in waiting if request["cmd"] == "submit"]
        if sent:
            try:
                replies = submit.take_all(run, [request for request, _ in sent])
            except Exception as exc:
                log.exception("taking photos sent through the API failed")
                replies = [{"ok": False, "error": f"{type(exc).__name__}: {exc}"}] * len(sent)
            for (_, fut), reply in zip(sent, replies, strict=True):
                fut.set_result(reply)
        for request, fut in waiting:
            if request["cmd"] == "submit":
                continue
            try:
                cmd = request["cmd"]
                if cmd == "reload":
                    reply = self._reload(run)
                elif cmd in submit.COMMANDS:
                    reply = submit.answer(run, request)
                else:
                    reply = requests.answer(run, request)
                if cmd == "status":
                    reply.update(
                        dashboard=self.dashboard_url,
                        dashboard_problem=self.dashboard_problem,
                        api=self.api_url,
                        api_fingerprint=self.api_fingerprint,
                        api_problem=self.api_problem,
                    )
                fut.set_result(reply)
            except Exception as exc:
                log.exception("control command failed")
                fut.set_result({"ok": False, "error": f"{type(exc).__name__}: {exc}"})

    def _reload(self, run: Running) -> dict[str, Any]:
        """Read the settings again as at start and apply what changed (service.reload)."""
        if self.source is None:
            return {"ok": False, "error": "this service has no settings file to read again; restart it"}
        if self._stop.is_set():
            return {"ok": False, "error": "the service is stopping"}
        try:
            new = self.source.load()
            check_service_folders(new)
        except GpenWatchError as exc:
            return {"ok": False, "error": str(exc)}

        def new_watcher(cfg: Config) -> None:
            _stop_watcher(run)
            try:
                prepare_service_folders(cfg)  # checked above: only a race can fail here
            except GpenWatchError as exc:
                log.error("%s", exc)
            run.watcher = self._start_watcher(cfg)

        self.cfg, reply = reload.apply(
            run,
            self.cfg,
            new,
            new_watcher=new_watcher,
            fresh_pool=lambda cfg: self._fresh_pool(run, cfg),
            grace=self.stop_grace,
        )
        log.info("settings read again from %s: %s", self.source.path, reload.summary(reply))
        return reply

    def _fresh_pool(self, run: Running, cfg: Config) -> Pool:
        """The pool of a worker restart; with the real engine, its model files are checked again
        for the new settings first (a new model may have to be fetched: the workers then wait for
        it, as at start)."""
        if run.gate is not None:
            run.gate.close()
            run.gate = ModelGate(cfg.restore, self._wake, profiles=inbox_profiles(cfg))
            run.workers_started = run.gate.start()
        return self._make_pool(cfg)

    def _refuse_requests(self) -> None:
        while True:
            try:
                _request, fut = self._requests.get_nowait()
            except queue.Empty:
                return
            fut.set_result({"ok": False, "error": "the service is stopping"})


def _recover(run: Running) -> None:
    """Finish what the last run left half done (see outbox.recovery) before anything new starts."""
    rec = recovery.recover(run.journal, run.cfg, run.presence.away)
    for outcome in rec.left:
        run.originals.note(outcome)
    if rec.finished or rec.requeued or rec.originals or rec.temps_removed:
        log.info(
            "recovered from the last run: %d finished, %d requeued, %d originals handled, %d temp files removed",
            len(rec.finished),
            rec.requeued,
            rec.originals,
            rec.temps_removed,
        )


def _watch_models(run: Running) -> None:
    """Start the held workers once the model files are there (see model_gate)."""
    gate = run.gate
    if gate is None or run.stop.is_set() or run.restart is not None:
        return  # (a worker restart checks the files again for the new settings: _fresh_pool)
    if run.workers_started and run.pool.stopped_for_models():
        gate.workers_failed()
        run.pool.hold_for_models()  # until a needed file changes
    if gate.poll():
        if run.workers_started:
            run.maybe_queued = True
            run.pool.retry_model_errors()
        else:
            run.start_workers()


def _stop_watcher(run: Running) -> None:
    if run.watcher is not None:
        try:
            run.watcher.stop()
        except Exception:
            log.exception("stopping the watcher failed")
        run.watcher = None


def stopping_line(restoring: int, not_started: int, grace: float) -> str:
    """What a stop does with the photos in hand: those being restored get the grace period, the
    rest (in a worker but not started, or waiting for one) go back to the queue at once; the
    "handed back" line that follows counts the second group, and any of the first left unfinished."""
    line = f"stopping: {restoring} image(s) being restored get up to {grace:g} s to finish"
    if not_started:
        line += f"; {not_started} not started go back to the queue"
    return line
