"""Each worker says which engine and provider run its networks, and why not the one asked for:
in the Ready message, the pool's rows, `gpen-watch status`, the dashboard's Overview and the tray.

The service tests share one real service whose stand-in engine (tests/fake_restorer.py) says an
engine and a note, as the real one does where restore.provider names a provider not installed.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from dashboard_client import Dashboard, served_dashboard
from fake_restorer import FakeRestorer
from service_harness import write_atomic

from gpen_watch.config import WorkerConfig
from gpen_watch.dispatch import protocol as P
from gpen_watch.dispatch.devices import WorkerSlot
from gpen_watch.dispatch.policy import FaultPolicy
from gpen_watch.dispatch.worker_main import ready_message
from gpen_watch.service.notices import PROBLEM_TITLES, NoticeKind, NoticeTracker, facts_of
from gpen_watch.service.status import Status, from_json
from gpen_watch.tray import model

ENGINE = "ONNX Runtime 1.32.0, CPU provider, fp32"
NOTE = (
    "restore.provider = directml: ONNX Runtime's DmlExecutionProvider is not installed, so the CPU "
    "provider runs instead (pip install onnxruntime-directml in place of onnxruntime to have it)."
)
SLOT = WorkerSlot("cpu#0", "cpu", "cpu", None, 1)


# --- the message and the pool, without processes ------------------------------------------------


def test_ready_carries_the_engine_and_its_note_over_the_wire(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_ENGINE", ENGINE)
    monkeypatch.setenv("FAKE_ENGINE_NOTE", NOTE)
    msg = ready_message(FakeRestorer(None, "cpu"), SLOT, 123)
    back = pickle.loads(pickle.dumps(msg))  # as the pipe frames it
    assert (back.engine, back.engine_note) == (ENGINE, NOTE)
    # A stand-in that says nothing: nothing to show, nothing to warn of.
    monkeypatch.delenv("FAKE_ENGINE")
    monkeypatch.delenv("FAKE_ENGINE_NOTE")
    quiet = ready_message(FakeRestorer(None, "cpu"), SLOT, 123)
    assert (quiet.engine, quiet.engine_note) == ("", "")


def _policy() -> FaultPolicy:
    cfg = WorkerConfig(image_timeout=60.0, images_in_flight=2, max_attempts=3)
    return FaultPolicy([SLOT], cfg, clock=lambda: 1000.0, start_timeout=300.0, silence_timeout=60.0)


def _ready(policy: FaultPolicy, pid: int, note: str = NOTE) -> None:
    policy.spawned(0, pid)
    policy.on_message(0, P.Ready(pid=pid, device="cpu", threads=1, engine=ENGINE, engine_note=note), [])


def test_the_pool_keeps_each_workers_engine_and_logs_a_note_once(caplog: pytest.LogCaptureFixture) -> None:
    policy = _policy()
    policy.start()
    with caplog.at_level(logging.WARNING, logger="gpen_watch.dispatch.pool"):
        _ready(policy, 100)
        row = policy.snapshot()[0]
        assert (row["engine"], row["engine_note"]) == (ENGINE, NOTE)
        policy.on_exit(0, "exit signal 9, SIGKILL", [], clean=False)
        # A worker that is not running says nothing of an engine.
        assert (policy.snapshot()[0]["engine"], policy.snapshot()[0]["engine_note"]) == ("", "")
        _ready(policy, 101)  # restarted, saying the same again: not logged again
        assert policy.snapshot()[0]["engine_note"] == NOTE
        other = (
            "restore.provider = cuda: ONNX Runtime's CUDAExecutionProvider is installed but did not start."
        )
        policy.on_exit(0, "exit signal 9, SIGKILL", [], clean=False)
        _ready(policy, 102, other)  # a new note is news
    said = [r.getMessage() for r in caplog.records if "restore.provider" in r.getMessage()]
    assert said == [f"worker cpu#0: {NOTE}", f"worker cpu#0: {other}"]


# --- a real service -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dash(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    root = tmp_path_factory.mktemp("engine")
    env = {"FAKE_ENGINE": ENGINE, "FAKE_ENGINE_NOTE": NOTE}
    with served_dashboard(root, env=env) as d:
        # The worker killed from outside: it comes back, saying the same note again.
        pid = d.status()["workers"][0]["pid"]
        os.kill(pid, signal.SIGKILL)
        d.wait(
            lambda s: s["workers"][0]["restarts"] == 1 and s["workers"][0]["state"] in ("idle", "busy"),
            what="the worker back after its restart",
        )
        write_atomic(d.svc.inbox / "family.jpg", b"\xff\xd8 the stand-in restores any bytes")
        d.wait(lambda s: s["queue"]["done"] >= 1, what="the photo done")
        yield d


def test_status_names_each_workers_engine_and_its_note(dash: Dashboard) -> None:
    out = dash.cli("status", "--json")
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)
    w = s["workers"][0]
    assert w["restarts"] == 1
    assert (w["engine"], w["engine_note"]) == (ENGINE, NOTE)
    # Told as the service's other problems are: said once, however many workers say it.
    assert {"about": "engine", "text": NOTE, "short": ""} in s["problems"]
    assert s["problem"].count("pip install onnxruntime-directml") == 1

    text = dash.cli("status").stdout
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("  cpu#0"))
    assert f"  cpu#0  cpu ({ENGINE})  idle  " in lines[at]
    assert lines[at + 1].strip() == f"note: {NOTE}"


def test_the_parent_logs_the_note_once_across_a_restart(dash: Dashboard) -> None:
    log = Path(dash.status()["log_file"]).read_text()
    assert log.count("ready on") >= 2  # the worker's first start and its restart
    assert log.count(NOTE) == 1, log[-3000:]


def test_the_overview_shows_the_engine_and_warns_with_the_note(dash: Dashboard) -> None:
    html = dash.get("/").text
    assert f'<span class="engine" title="Engine: what runs its networks">{ENGINE}</span>' in html
    note = NOTE.replace("'", "&#39;")  # as Jinja escapes it
    # A warning among the problems at the top, where the page says what needs the user; said
    # once, not again under the worker.
    problems, _, workers = html.partition("<h2>Workers</h2>")
    assert f'<p class="banner warn engine-note">{note}</p>' in problems
    assert html.count("onnxruntime-directml in place of") == 1
    assert ENGINE in workers


def test_the_tray_names_the_engine_beside_the_device(dash: Dashboard) -> None:
    status = from_json(Status, dash.status())
    view = model.view_from_status(status)
    lines = [e.text for e in model.menu(view)]
    devices = lines.index("CPU mode (no NVIDIA GPU)")
    assert lines[devices + 1] == f"Engine: {ENGINE}"
    assert view.state == "error" and view.problem == NOTE
    # Its desktop notice, once, titled for what it is.
    tracker = NoticeTracker()
    first = [n for n in tracker.update(facts_of(status)) if n.kind == NoticeKind.PROBLEM]
    assert [(n.title, n.message) for n in first] == [(PROBLEM_TITLES["engine"], NOTE)]
    assert not [n for n in tracker.update(facts_of(status)) if n.kind == NoticeKind.PROBLEM]


def test_engine_lines_keep_to_the_menus_width() -> None:
    view = model.TrayView("idle", 0, engines=("PyTorch 2.14.1", ENGINE + ", and more words" * 3))
    line = model.engine_line(view)
    assert line is not None and line.startswith("Engines: PyTorch 2.14.1; ONNX Runtime")
    assert len(line) <= model.MAX_LINE
    assert model.engine_line(model.TrayView("idle", 0)) is None


# A cluster node's actor sends its Ready through the same ready_message: on a real local Ray
# instance, in a process of its own so that Ray's state stays out of the test's.
_RAY_READY = """
import ray
from gpen_watch.cluster.actor import RestorerActor
from gpen_watch.config import RestoreConfig

ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
env = {"FAKE_ENGINE": "ENGINE", "FAKE_ENGINE_NOTE": "NOTE"}
actor = ray.remote(RestorerActor).remote(RestoreConfig(), "fake_restorer:FakeRestorer", 1, env)
msg = ray.get(actor.ready.remote(), timeout=120)
print(repr((msg.engine, msg.engine_note)))
ray.shutdown()
"""


@pytest.mark.slow
def test_a_cluster_nodes_actor_says_its_engine_too() -> None:
    pytest.importorskip("ray")
    tests = Path(__file__).resolve().parent
    out = subprocess.run(
        [sys.executable, "-c", _RAY_READY],
        capture_output=True,
        text=True,
        timeout=240,
        # The actor's process imports the stand-in from tests/, as a node's worker does.
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tests), str(tests.parent)])},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == repr(("ENGINE", "NOTE"))
