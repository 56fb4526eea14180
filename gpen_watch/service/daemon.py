"""`gpen-watch run`: inbox watcher -> journal -> restorer pool -> outbox, until told to stop.

One thread, the service loop, owns the pool and drives every job from claim to commit, so the
order of journal writes and file moves is simple to reason about. Other threads only hand things
to it: the watcher's threads queue arrivals, the control channel queues requests, signal handlers
set the stop flag; each then wakes the loop through the pool's wake pipe.

This process never imports torch (workers do): it stays small and starts fast, and a CUDA fault
cannot take it down. ``status`` reports ``torch_loaded`` so tests can check.
"""

from __future__ import annotations

import logging
import os
import queue
import sys
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpen_watch import __version__
from gpen_watch.config import Config
from gpen_watch.dispatch import devices
from gpen_watch.dispatch import protocol as P
from gpen_watch.dispatch.pool import DONE, GAVE_UP, RETRY, Pool, PoolEvent, Task
from gpen_watch.errors import OutputError
from gpen_watch.fsutil import remove_quietly
from gpen_watch.journal import Journal, hash_file
from gpen_watch.journal.states import JobState
from gpen_watch.outbox import commit, failed, naming, originals, recovery
from gpen_watch.service import control
from gpen_watch.service.model_gate import ModelGate
from gpen_watch.service.originals_watch import OriginalsWatch
from gpen_watch.service.status import ErrorEntry, QueueStatus, Status, Throughput, WorkerStatus, from_json
from gpen_watch.watch.watcher import Arrival, Watcher

if TYPE_CHECKING:
    from gpen_watch.imaging.errors import ImageInputError

log = logging.getLogger(__name__)

# After the outbox refuses a write (full, read-only, gone), wait this long before trying again.
# The same for originals the archive or failed/ folder refused to take (they wait in the inbox).
OUTBOX_RETRY_S = 30.0
# Longest sleep of the loop when nothing happens (deadlines inside the pool wake it earlier).
IDLE_TICK_S = 5.0
# Arrivals recorded per turn of the loop, so a thousand dropped files do not hold up results.
MAX_ARRIVALS_PER_TURN = 200
# Files the engine would refuse from their header alone are set aside on arrival (see _refusal).
# Those rules are the real engine's: a stand-in restorer (tests' GPEN_WATCH_RESTORER) restores any
# bytes, so it gets them only when this variable is "1".
HEADER_CHECKS_ENV = "GPEN_WATCH_HEADER_CHECKS"


@dataclass
class _Throughput:
    started: float = field(default_factory=time.monotonic)
    images: int = 0
    faces: int = 0
    failed: int = 0
    recent: deque[float] = field(default_factory=deque)  # completion times, last 60 s
    busy_s: float = 0.0
    busy_since: float | None = None

    def record(self, faces: int) -> None:
        now = time.monotonic()
        self.images += 1
        self.faces += faces
        self.recent.append(now)

    def busy(self, is_busy: bool) -> None:
        now = time.monotonic()
        if is_busy and self.busy_since is None:
            self.busy_since = now
        elif not is_busy and self.busy_since is not None:
            self.busy_s += now - self.busy_since
            self.busy_since = None

    def summary(self) -> Throughput:
        now = time.monotonic()
        while self.recent and now - self.recent[0] > 60.0:
            self.recent.popleft()
        busy = self.busy_s + (now - self.busy_since if self.busy_since is not None else 0.0)
        return Throughput(
            images=self.images,
            faces=self.faces,
            failed=self.failed,
            images_per_min=len(self.recent),
            images_per_s=round(self.images / busy, 3) if busy > 0 and self.images else 0.0,
        )


class Service:
    """The watch service. ``run()`` blocks until ``request_stop()`` (from any thread or a signal)."""

    def __init__(
        self,
        cfg: Config,
        *,
        factory: str = P.DEFAULT_FACTORY,
        child_env: dict[str, str] | None = None,
        stop_grace: float = 10.0,
        journal_path: Path | None = None,
        check_models: bool | None = None,
    ) -> None:
        self.cfg = cfg
        # The model files are the real engine's; a substitute restorer (tests, benchmarks) brings its own.
        self.check_models = factory == P.DEFAULT_FACTORY if check_models is None else check_models
        self._gate: ModelGate | None = None
        self._workers_started = False
        self.factory = factory
        self.child_env = child_env or {}
        self.stop_grace = stop_grace
        self.journal_path = journal_path
        self._header_checks = factory == P.DEFAULT_FACTORY or os.environ.get(HEADER_CHECKS_ENV) == "1"
        self._arrivals: queue.Queue[Arrival | Path] = queue.Queue()
        self._requests: queue.Queue[tuple[dict[str, Any], Future[dict[str, Any]]]] = queue.Queue()
        self._stop = threading.Event()
        self._closed = threading.Event()  # the loop no longer answers requests
        self._stop_deadline: float | None = None
        self._pool: Pool | None = None
        self._journal: Journal | None = None
        self._watcher: Any = None
        self._paused = False
        # Whether a claim may find queued jobs; saves a write transaction on every idle wake-up.
        self._maybe_queued = True
        self._hold_until = 0.0  # no new claims before this (outbox trouble)
        self._problem: str | None = None
        self._originals = OriginalsWatch(cfg, OUTBOX_RETRY_S)
        self._started = time.monotonic()
        self._tp = _Throughput()
        self.ready = threading.Event()  # set once everything is up (tests, tray)

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
        if cmd not in ("status", "pause", "resume"):
            return {"ok": False, "error": f"unknown command {cmd!r}; use status, pause, resume or stop"}
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
        if self._pool is not None:
            self._pool.wake()

    # --- life -----------------------------------------------------------------------------------

    def run(self) -> int:
        lock = control.InstanceLock().acquire()
        server: control.ControlServer | None = None
        try:
            self._prepare_folders()
            self._journal = Journal.open(self.journal_path)
            rec = recovery.recover(self._journal, self.cfg)
            for outcome in rec.left:
                self._originals.note(outcome)
            if rec.finished or rec.requeued or rec.originals or rec.temps_removed:
                log.info(
                    "recovered from the last run: %d finished, %d requeued, %d originals handled, "
                    "%d temp files removed",
                    len(rec.finished),
                    rec.requeued,
                    rec.originals,
                    rec.temps_removed,
                )
            slots = devices.resolve_slots(self.cfg.workers)
            self._pool = Pool(
                slots,
                self.cfg.restore,
                self.cfg.workers,
                factory=self.factory,
                child_env=self.child_env,
                log_level=logging.getLogger().getEffectiveLevel(),
            )
            if self.check_models:
                self._gate = ModelGate(self.cfg.restore, self._wake)
            if self._gate is None or self._gate.start():
                self._start_workers()
            server = control.ControlServer(self.control)
            server.start()
            self._watcher = self._start_watcher()
            log.info(
                "gpen-watch %s running (pid %d): watching %s -> %s%s",
                __version__,
                os.getpid(),
                ", ".join(str(i.path) for i in self.cfg.watch.inboxes),
                self.cfg.watch.outbox,
                "" if self._workers_started else "; photos wait in the queue until the model files are there",
            )
            self.ready.set()
            self._loop()
            self._shutdown()
        finally:
            self._closed.set()
            if self._gate is not None:
                self._gate.close()
            self._refuse_requests()
            if self._watcher is not None:
                self._stop_watcher()
            if self._pool is not None and self._pool.alive():
                self._requeue(self._pool.kill_all(), "the service stopped before this job finished")
            if server is not None:
                server.close()
            if self._journal is not None:
                self._journal.close()
            lock.release()
        log.info("gpen-watch stopped")
        return 0

    def _prepare_folders(self) -> None:
        for folder in [i.path for i in self.cfg.watch.inboxes] + [self.cfg.watch.outbox]:
            if not folder.is_dir():
                folder.mkdir(parents=True, exist_ok=True)
                log.info("created %s", folder)

    def _loop(self) -> None:
        assert self._pool is not None and self._journal is not None
        while not self._stop.is_set():
            self._take_arrivals()
            self._answer_requests()
            self._feed()
            self._watch_models()
            self._originals.retry(self._journal, self._stop)
            self._tp.busy(self._pool.in_flight() > 0)
            for event in self._pool.poll(self._tick()):
                self._on_event(event)
            stranded = self._pool.take_back_stranded()
            if stranded:
                self._requeue(stranded, "no worker can run it: " + (self._pool.problem() or "no worker"))

    def _tick(self) -> float:
        idle = IDLE_TICK_S if self._gate is None else min(IDLE_TICK_S, self._gate.due_in())
        if self._hold_until and self._arrivals.empty():
            return max(0.0, min(idle, self._hold_until - time.monotonic()))
        return 0.0 if not self._arrivals.empty() or not self._requests.empty() else idle

    def _start_workers(self) -> None:
        assert self._pool is not None
        self._workers_started = True
        self._maybe_queued = True
        self._pool.start()

    def _watch_models(self) -> None:
        """Start the held workers once the model files are there (see model_gate)."""
        assert self._pool is not None
        if self._gate is None or self._stop.is_set():
            return
        if self._workers_started and self._pool.stopped_for_models():
            self._gate.workers_failed()
        if self._gate.poll():
            if self._workers_started:
                self._maybe_queued = True
                self._pool.retry_model_errors()
            else:
                self._start_workers()

    def _shutdown(self) -> None:
        """Finish or hand back the work in flight within stop_grace seconds."""
        assert self._pool is not None
        log.info(
            "stopping: %d image(s) in flight get up to %g s to finish",
            self._pool.in_flight(),
            self.stop_grace,
        )
        self._stop_watcher()
        self._pool.begin_stop()
        self._stop_deadline = time.monotonic() + self.stop_grace
        while self._pool.alive() and time.monotonic() < (self._stop_deadline or 0):
            self._answer_requests()
            for event in self._pool.poll(min(0.5, max(0.0, (self._stop_deadline or 0) - time.monotonic()))):
                self._on_event(event)
        leftover = self._pool.kill_all()
        self._requeue(leftover, "the service stopped before this job finished")
        self._take_arrivals(limit=1 << 30)  # record what arrived meanwhile (queued for the next start)

    def _requeue(self, tasks: list[Task], reason: str) -> None:
        assert self._journal is not None
        self._maybe_queued = True
        for t in tasks:
            remove_quietly(t.job.dst)
            self._journal.requeue(t.key, reason)
        if tasks:
            log.info("%d job(s) handed back to the queue", len(tasks))

    # --- watcher --------------------------------------------------------------------------------

    def _start_watcher(self) -> Any:
        w = Watcher.from_config(self.cfg, self.arrived, on_gone=self.vanished)
        w.start()  # its first act is the start-up scan: files dropped while we were down
        return w

    def _stop_watcher(self) -> None:
        if self._watcher is not None:
            try:
                self._watcher.stop()
            except Exception:
                log.exception("stopping the watcher failed")
            self._watcher = None

    def _take_arrivals(self, limit: int = MAX_ARRIVALS_PER_TURN) -> None:
        assert self._journal is not None
        for _ in range(limit):
            try:
                item = self._arrivals.get_nowait()
            except queue.Empty:
                return
            try:
                if isinstance(item, Arrival):
                    self._add(item)
                else:
                    for job in self._journal.active_for_source(item):
                        if self._journal.mark_gone(job.id):
                            log.info("%s: removed from the inbox before it was processed", item)
            except Exception:
                log.exception("could not record %s", item)

    def _add(self, a: Arrival) -> None:
        assert self._journal is not None
        try:
            sha = hash_file(a.path)
        except OSError as exc:
            log.debug("%s: not taken (%s)", a.path, exc)
            return
        added = self._journal.add(a.path, a.inbox.path, a.rel, a.size, a.mtime, sha)
        if added.status == "known":
            return
        if added.status == "duplicate":
            log.info("%s: %s", a.path, added.message)
            self._originals.note(originals.dispose_original(self._journal, added.job.id, self.cfg))
            return
        if not a.supported:
            why = (
                f"unsupported file type ({a.path.suffix or 'no extension'}): not a photo gpen-watch can read"
            )
            self._originals.note(
                failed.fail(self._journal, added.job.id, why, self.cfg, kind=JobState.UNSUPPORTED)
            )
            log.warning("%s: set aside: %s", a.path, why)
            return
        refusal = self._refusal(a.path)
        if refusal is not None:
            # What the worker would answer, wording and kind included, without waiting for one.
            kind = JobState.UNSUPPORTED if refusal.kind == "unsupported" else JobState.FAILED
            self._tp.failed += 1
            self._originals.note(
                failed.fail(self._journal, added.job.id, refusal.reason, self.cfg, kind=kind)
            )
            log.warning("%s: %s: %s", a.path, kind, refusal.reason)
            return
        self._maybe_queued = True
        log.info("queued %s", a.path)

    def _refusal(self, path: Path) -> ImageInputError | None:
        """The engine's refusal of ``path`` from its header (an ImageInputError), or None."""
        if not self._header_checks:
            return None
        # Pillow and OpenCV load here on the first arrival, not at start (torch never does).
        from gpen_watch.imaging.load import header_refusal

        try:
            return header_refusal(path, self.cfg.restore.max_megapixels)
        except Exception:
            log.exception("%s: could not check the header; queued for a worker", path)
            return None

    # --- work -----------------------------------------------------------------------------------

    def _feed(self) -> None:
        """Claim as many queued jobs as the workers can take and hand them over."""
        assert self._pool is not None and self._journal is not None
        if self._paused or self._stop.is_set():
            return
        if self._hold_until:
            if time.monotonic() < self._hold_until:
                return
            self._hold_until = 0.0
        n = self._pool.capacity()
        if n <= 0 or not self._maybe_queued:
            return
        batch = self._journal.claim_batch(n, "pool")
        for dup in batch.duplicates:
            # A twin that waited for the same photo dropped at the same moment: now a duplicate of
            # it, handled exactly as a drop after the first was done.
            log.info("%s: %s", dup.job.source, dup.message)
            try:
                self._originals.note(originals.dispose_original(self._journal, dup.job.id, self.cfg))
            except Exception:
                log.exception(
                    "%s: could not dispose of the original (the next start tries again)", dup.job.source
                )
        claimed = batch.jobs
        # Held twins are claimed (or found duplicates) once a job ends: see _job_ended.
        self._maybe_queued = len(claimed) == n
        tasks: list[Task] = []
        for job in claimed:
            if not os.path.lexists(job.source):
                self._journal.requeue(job.id, "file missing")
                self._journal.mark_gone(job.id)
                self._job_ended()
                log.info("%s: gone from the inbox before it was processed", job.source)
                continue
            try:
                tasks.append(Task(job.id, commit.file_job(self._journal, job.id, self.cfg)))
            except (OutputError, OSError) as exc:
                if not _environmental(exc):
                    # Something about this one file (its output name): it fails, the rest go on.
                    self._originals.note(failed.fail(self._journal, job.id, str(exc), self.cfg))
                    self._job_ended()
                    continue
                self._journal.requeue(job.id, f"outbox: {exc}")
                self._outbox_trouble(str(exc))
        if tasks:
            self._pool.submit(tasks)
            if self._problem and self._problem.startswith("outbox"):
                self._problem = None

    def _outbox_trouble(self, message: str) -> None:
        self._maybe_queued = True
        self._problem = f"outbox: {message}; retrying every {OUTBOX_RETRY_S:g} s"
        self._hold_until = time.monotonic() + OUTBOX_RETRY_S
        log.error("%s", self._problem)

    def _job_ended(self) -> None:
        # A queued job with the same content as this one may be held back (Journal.claim_batch):
        # the next claim takes it, or ends it as a duplicate if this one was done.
        self._maybe_queued = True

    def _on_event(self, ev: PoolEvent) -> None:
        assert self._journal is not None
        if ev.kind in (DONE, GAVE_UP):
            self._job_ended()
        try:
            if ev.kind == DONE:
                self._on_result(ev)
            elif ev.kind == GAVE_UP:
                self._tp.failed += 1
                log.error("%s: %s", ev.task.job.src, ev.message)
                self._originals.note(
                    failed.fail(self._journal, ev.task.key, ev.message, self.cfg, tmp=ev.task.job.dst)
                )
            elif ev.kind == RETRY:
                self._journal.log_event(ev.task.key, "retry", ev.message, ev.worker)
                log.warning("%s: %s", ev.task.job.src, ev.message)
        except OutputError as exc:
            # Disk full, outbox read-only or gone: the original stays in the inbox and the job
            # waits; new work is held back until the outbox takes writes again.
            remove_quietly(ev.task.job.dst)
            if self._journal.requeue(ev.task.key, f"outbox: {exc}"):
                self._outbox_trouble(str(exc))
        except Exception as exc:
            # One job's bookkeeping must not stop the service; the job is retried later.
            log.exception("%s: could not record the result", ev.task.job.src)
            remove_quietly(ev.task.job.dst)
            if self._journal.requeue(ev.task.key, f"internal error: {exc}"):
                self._maybe_queued = True
                self._hold_until = time.monotonic() + OUTBOX_RETRY_S

    def _on_result(self, ev: PoolEvent) -> None:
        assert self._journal is not None and ev.result is not None
        res, task = ev.result, ev.task
        if res.ok:
            outcome = commit.commit(self._journal, task.key, res, self.cfg)
            if outcome.output is None:
                return  # the job had already ended another way
            self._originals.note(outcome.original)
            self._tp.record(res.faces)
            notes = f" ({'; '.join(res.notes)})" if res.notes else ""
            if res.faces:
                log.info("restored %s -> %s, %d face(s)%s", task.job.src, outcome.output, res.faces, notes)
            else:  # done, but not "restored": counted apart in status as well
                log.info("no face in %s; written to %s%s", task.job.src, outcome.output, notes)
            return
        if res.error_kind == "outbox":
            # The outbox refused the write (full, read-only, gone): not this photo's fault. It waits
            # in the inbox, queued, and new work is held back until the outbox takes writes again.
            remove_quietly(res.dst or task.job.dst)
            if self._journal.requeue(task.key, f"outbox: {res.error}"):
                self._outbox_trouble(res.error or "cannot write")
            return
        kind = JobState.UNSUPPORTED if res.error_kind == "unsupported" else JobState.FAILED
        reason = res.error or "unknown error"
        self._tp.failed += 1
        self._originals.note(
            failed.fail(self._journal, task.key, reason, self.cfg, kind=kind, tmp=res.dst or task.job.dst)
        )
        log.warning("%s: %s: %s", task.job.src, kind, reason)

    # --- control --------------------------------------------------------------------------------

    def _answer_requests(self) -> None:
        while True:
            try:
                request, fut = self._requests.get_nowait()
            except queue.Empty:
                return
            try:
                fut.set_result(self._command(request["cmd"]))
            except Exception as exc:
                log.exception("control command failed")
                fut.set_result({"ok": False, "error": f"{type(exc).__name__}: {exc}"})

    def _refuse_requests(self) -> None:
        while True:
            try:
                _request, fut = self._requests.get_nowait()
            except queue.Empty:
                return
            fut.set_result({"ok": False, "error": "the service is stopping"})

    def _command(self, cmd: str) -> dict[str, Any]:
        assert self._pool is not None
        if cmd == "pause":
            self._paused = True
            self._pool.pause()
            log.info("paused: no new work; %d image(s) in flight finish", self._pool.in_flight())
            return {"ok": True, "in_flight": self._pool.in_flight()}
        if cmd == "resume":
            self._paused = False
            self._maybe_queued = True
            self._hold_until = 0.0  # the user says the outbox is fixed: try it now, not at the next retry
            self._originals.retry_soon()  # the same for originals waiting for their folder
            self._pool.resume()
            if self._gate is not None:
                self._gate.retry_now()
            log.info("resumed")
            return {"ok": True}
        return {"ok": True, **self.status().to_json()}

    def status(self) -> Status:
        """The status now (service loop only)."""
        assert self._pool is not None and self._journal is not None
        counts = self._journal.counts()
        restored_today, no_face_today, faces_today = self._journal.today()
        errors = tuple(
            ErrorEntry(
                when=time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(j.finished or j.created)),
                file=str(j.source),
                error=j.error or "",
            )
            for j in self._journal.recent_errors(5)
        )
        outbox = self.cfg.watch.outbox
        gate = self._gate
        problems = (
            self._problem or self._pool.problem(),
            gate.problem() if gate is not None else None,
            self._originals.problem(),
        )
        notices = (gate.notice() if gate is not None else None, self._originals.notice())
        rss, rss_peak = _rss_mb()
        return Status(
            version=__version__,
            pid=os.getpid(),
            uptime_s=round(time.monotonic() - self._started, 1),
            paused=self._paused,
            stopping=self._stop.is_set(),
            problem="; ".join(p for p in problems if p) or None,
            notice="; ".join(n for n in notices if n) or None,
            originals_waiting=self._originals.waiting_count,
            originals_left=self._originals.left_count,
            queue=from_json(QueueStatus, {**counts, "in_flight": self._pool.in_flight()}),
            done_today=restored_today + no_face_today,
            restored_today=restored_today,
            no_face_today=no_face_today,
            faces_today=faces_today,
            settling=self._watcher.pending if self._watcher is not None else 0,
            throughput=self._tp.summary(),
            # The pool (dispatch/) still reports plain dicts: typed here, at the one border.
            workers=tuple(from_json(WorkerStatus, w) for w in self._pool.snapshot()),
            models=gate.status() if gate is not None else None,
            last_errors=errors,
            inboxes=tuple(str(i.path) for i in self.cfg.watch.inboxes),
            outbox=str(outbox),
            failed=str(naming.failed_root(outbox)),
            torch_loaded="torch" in sys.modules,
            rss_mb=rss,
            rss_peak_mb=rss_peak,
        )


def _environmental(exc: BaseException) -> bool:
    """An error of the outbox as a whole (the OS refused a write), not of one file's name."""
    return isinstance(exc, OSError) or isinstance(exc.__cause__, OSError)


def _rss_mb() -> tuple[float | None, float | None]:
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
    # kB on Linux, bytes on macOS.
    return None, round(peak / (1 << 20) if sys.platform == "darwin" else peak / 1024, 1)
