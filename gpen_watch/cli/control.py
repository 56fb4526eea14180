"""`gpen-watch status | pause | resume | stop | reload`: talk to the running service over the control channel."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence

from gpen_watch.cli.argtypes import seconds
from gpen_watch.cli.exitcodes import NOT_RUNNING
from gpen_watch.platform import program
from gpen_watch.service import control, reload
from gpen_watch.service.notices import flagged_faces
from gpen_watch.service.status import QueueStatus, Status, WorkerStatus
from gpen_watch.tray.model import gpu_line


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    if command == "status":
        parser.add_argument("--json", action="store_true", help="print the raw status as JSON")
    if command == "stop":
        parser.add_argument(
            "--no-wait", action="store_true", help="return at once instead of waiting for the exit"
        )
        parser.add_argument(
            "--timeout", type=seconds, default=60.0, help="seconds to wait for the exit (default: 60)"
        )


def run(args: argparse.Namespace) -> int:
    command = args.command
    if command == "status":
        try:
            reply = control.request("status")
        except control.NotRunning as exc:
            if args.json:
                print(json.dumps({"running": False}))
            else:
                print(str(exc))
            return NOT_RUNNING  # like `systemctl status` for a stopped unit: scripts can tell
        if not reply.get("ok"):
            print(json.dumps(reply) if args.json else f"gpen-watch status: {reply.get('error', 'refused')}")
            return 1
        status = Status.from_json(reply)
        print(json.dumps({"ok": True, **status.to_json()}, indent=2) if args.json else format_status(status))
        return 0
    try:
        reply = control.request(command)
    except control.NotRunning:
        if command != "stop":
            raise  # the exit status of every command that finds no service (cli.exitcodes)
        print("gpen-watch was not running; nothing to stop")
        return 0  # what was asked is so
    if not reply.get("ok"):
        print(f"gpen-watch {command}: {reply.get('error', 'refused')}")
        return 1
    if command == "pause":
        # "said": the service's own words (already paused or not); a service a release older has none.
        print(reply.get("said") or f"paused; {reply.get('in_flight', 0)} image(s) in flight will finish")
    elif command == "resume":
        print(reply.get("said") or "resumed")
    elif command == "reload":
        print(f"settings read again: {reload.summary(reply)}")
    elif command == "stop":
        pid = reply.get("pid")
        if args.no_wait:
            print(f"stopping (pid {pid})")
            return 0
        if _wait_gone(args.timeout):
            print(f"stopped (pid {pid})")
            return 0
        print(f"asked pid {pid} to stop, but it still answers after {args.timeout:g} s")
        return 1
    return 0


def _wait_gone(timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            control.request("ping", timeout=2.0)
        except control.NotRunning:
            return True
        except control.ControlError:
            pass  # shutting down mid-handshake
        time.sleep(0.2)
    return False


def format_status(s: Status) -> str:
    """The status as the lines `gpen-watch status` prints."""
    lines = []
    state = "paused" if s.paused else ("stopping" if s.stopping else s.standby_text or "running")
    lines.append(f"gpen-watch {s.version}: {state} (pid {s.pid}, up {_duration(s.uptime_s)})")
    if s.standby_text and s.paused:  # the user's pause and a standby: resume lifts only the first
        lines.append(f"also {s.standby_text}")
    lines += problem_lines(s)
    if s.notice:
        lines.append(f"note: {s.notice}")
    q = s.queue
    lines.append(
        f"queue: {queue_line(q, len(s.workers))}"
        + (f"; {_count(s.settling, 'file')} settling" if s.settling else "")
    )
    if s.special_files:
        lines.append(
            f"left alone: {_count(s.special_files, 'link, pipe or device file')} in the inboxes "
            "(only regular files are taken; each is named in the log)"
        )
    # Only what is worth saying: an inbox away, polled, or holding photos still to download.
    lines += [line for inbox in s.inbox_states for line in inbox.lines]

    # "done", here as on the dashboard: a photo that ended well (restored, or without a face and
    # copied through), first runs only; a redo restores a done photo again and is counted apart.
    def redos(n: int) -> str:
        return f" (+{_count(n, 'redo')})" if n else ""

    lines.append(
        f"done today: {_count(s.restored_today + s.no_face_today, 'photo')}{redos(s.redos_today)}: "
        f"{s.restored_today} restored ({_count(s.faces_today, 'face')}), {s.no_face_today} without a face"
        + (f"; {flagged_faces(s.flagged_today)}" if s.flagged_today else "")
    )
    lines.append(
        f"all time: {q.done - q.redos} done{redos(q.redos)}, {q.failed} failed, {q.unsupported} unsupported"
        + (f", {q.duplicate} duplicate" if q.duplicate else "")
    )
    if q.failed_by_bug:
        lines.append(f"  {q.failed_by_bug} failed because of a bug in gpen-watch or a library; see the log")
    t = s.throughput
    window = f" (the last {t.window_s / 60:g} min the workers had work)" if t.window_s else ""
    lines.append(
        f"this run: {t.images} done{redos(t.redos)}, {_count(t.faces, 'face')} restored"
        + (f", {t.failed} failed" if t.failed else "")
        + f"; now {t.images_per_min:g} photos/min{window if t.images_per_min else ''}"
    )
    # A worker's count is every photo it finished this run, failures included: named apart from
    # "done" so the two are not read as the same number.
    lines.append("workers (processed this run):")
    lines += worker_lines(s.workers)
    if any(not n.local for n in s.nodes):
        lines.append("nodes (processed this run):")
        for n in s.nodes:
            where = "this machine" if n.local else ("up" if n.up else "away")
            lines.append(
                f"  {n.name} ({where}): {_count(n.workers, 'worker')}, in flight {n.in_flight}, "
                f"processed {n.done}"
            )
            lines += [f"    {gpu_line(g)}" for g in n.gpus]
    if s.last_errors:
        lines.append("last errors:")
        for e in s.last_errors:
            lines.append(f"  {e.when}  {e.file}: {e.error}" + (f" (on {e.node})" if e.node else ""))
    if s.inboxes:
        lines.append(f"inboxes: {', '.join(s.inboxes)}")
    if s.outbox:
        lines.append(f"outbox: {s.outbox}")
    if s.failed:
        lines.append(f"failed: {s.failed}")
    if s.log_file:
        lines.append(f"log: {s.log_file}")
    if s.dashboard:
        lines.append(f"dashboard: {s.dashboard} (`{program.command('dashboard')}` opens it)")
    elif s.dashboard_problem:
        lines.append(f"dashboard: none ({s.dashboard_problem})")
    if s.api:
        lines.append(f"api for other machines: {s.api}")
        lines.append(f"  certificate SHA-256 fingerprint: {s.api_fingerprint}")
    elif s.api_problem:
        lines.append(f"api for other machines: none ({s.api_problem})")
    return "\n".join(lines)


def problem_lines(s: Status) -> list[str]:
    """Each problem: its first line after "PROBLEM:", short, then the rest of its block, if it
    has one (the model files: each file, where it comes from, what to do)."""
    texts = [p.text for p in s.problems] or ([s.problem] if s.problem else [])
    lines = []
    for text in texts:
        head, *rest = text.splitlines()
        lines += [f"PROBLEM: {head}", *rest]
    return lines


def worker_lines(workers: Sequence[WorkerStatus]) -> list[str]:
    """Each worker's line, then what it holds and says under it. Its name, where it runs and its
    state are columns as wide as the widest of them, so several workers line up and one alone
    carries no padding."""
    heads = [(w.name, where_it_runs(w), w.state) for w in workers]
    name_w, where_w, state_w = (max((len(h[i]) for h in heads), default=0) for i in range(3))
    indent = " " * (2 + name_w + 2)  # the lines under a worker start under where it runs
    lines = []
    for w, (name, where, state) in zip(workers, heads, strict=True):
        line = (
            f"  {name:<{name_w}}  {where:<{where_w}}  {state:<{state_w}}  in flight {w.in_flight}"
            f"  processed {w.done}  faces {w.faces}  restarts {w.restarts}"
        )
        lines.append(line + (f"  pid {w.pid}" if w.pid else ""))
        under = [f"note: {w.engine_note}"] if w.engine_note else []
        under += photo_lines(w)
        under += [w.loaded] if w.loaded else []
        under += [f"models: {', '.join(m.text for m in w.model_sets)}"] if w.model_sets else []
        under += [_memory_line(w)] if w.rss_mb else []
        under += [f"error: {w.error}"] if w.error else []
        lines += [indent + text for text in under]
    return lines


def where_it_runs(w: WorkerStatus) -> str:
    """The device, and the engine on it once the worker said which: "cpu (PyTorch 2.13.0)"."""
    return f"{w.device} ({w.engine})" if w.engine else w.device


def photo_lines(w: WorkerStatus) -> list[str]:
    """One line per photo a worker is on; the photos it holds ahead, waiting their turn, in one
    line when there are several (a worker on a GPU reads a dozen ahead)."""
    waiting = [p for p in w.photos if p.stage == "waiting"]
    shown = [p for p in w.photos if p.stage != "waiting" or len(waiting) == 1]
    lines = [p.text for p in shown]
    if len(waiting) > 1:
        lines.append(f"{len(waiting)} more photos waiting their turn")
    return lines


def queue_line(q: QueueStatus, workers: int) -> str:
    """Waiting, handed to the workers, and being restored: a worker holds a few photos ahead of
    the one its restorer works on, and "running" for all of them read as that many at work."""
    waiting = q.queued + max(0, q.running - q.in_flight)  # handed out, not yet sent to a worker
    where = "the workers" if workers > 1 else "the worker"
    return f"{waiting} waiting, {q.in_flight} in {where}, {q.restoring} being restored"


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _memory_line(w: WorkerStatus) -> str:
    """A worker's resident memory as each stage of a photo ended (highest so far) and its budget."""
    rss = w.rss_mb
    stages = ", ".join(
        f"{s} {rss[s]:.0f}" for s in ("decode", "align", "restore", "paste", "encode") if s in rss
    )
    budget = f" of {w.memory_budget_mb} budget" if w.memory_budget_mb else ""
    peak = f"; peak {rss['peak']:.0f} MB{budget}" if "peak" in rss else ""
    return f"memory MB at stage end: {stages}{peak}"


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    h, rest = divmod(seconds, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{sec:02d}s"
