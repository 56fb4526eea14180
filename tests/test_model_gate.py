"""The service's model gate in-process: downloads with progress from a loopback HTTP server (the
network's stand-in), the problem when they fail, and starting once the files are there.

The gate's clock is a counter the test moves, so the periodic checks run without waiting.
"""

from __future__ import annotations

import dataclasses
import functools
import http.server
import io
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from gpen_watch.catalog import model_spec, registry
from gpen_watch.config import RestoreConfig
from gpen_watch.modelstore import messages, needs
from gpen_watch.modelstore.fetcher import BackgroundFetch, FetchProgress
from gpen_watch.platform import paths, program
from gpen_watch.service import model_gate
from gpen_watch.service.model_gate import GateState, ModelGate

GPEN256 = registry.get_spec("GPEN-BFR-256")
MOBILE = registry.get_spec("RetinaFace-MobileNet0.25")


def weights_bytes(n_floats: int) -> bytes:
    """A real torch.save zip of about n_floats*4 bytes (the architecture is the workers' to check)."""
    buf = io.BytesIO()
    torch.save({"w": torch.zeros(n_floats)}, buf)
    return buf.getvalue()


RELEASE = threading.Event()  # lets a /half/ download finish


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path.startswith("/half/"):
            # Sends the first half of the file, then waits: a download in progress.
            body = (Path(self.directory) / self.path[len("/half/") :]).read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            RELEASE.wait(30)
            self.wfile.write(body[len(body) // 2 :])
            return
        super().do_GET()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "www"
    root.mkdir()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", root
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def local_registry(server: tuple[str, Path], monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every model's URL on the loopback server (nothing served yet); returns the folder it serves."""
    base, root = server
    local = tuple(
        dataclasses.replace(s, url=f"{base}/{s.filename}", mirrors=(), size_bytes=None, sha256=None)
        for s in registry.all_specs()
    )
    monkeypatch.setattr(registry, "MODELS", local)
    return root


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def config(models: Path, accepted: tuple[str, ...] = ("GPEN",)) -> RestoreConfig:
    """GPEN-BFR-256 and the small detector; GPEN's terms accepted unless ``accepted`` says otherwise."""
    return RestoreConfig(
        model="GPEN-BFR-256",
        detector="retinaface_mobile0.25",
        use_parse=False,
        model_dir=models,
        accepted_terms=list(accepted),
    )


def poll_until(gate: ModelGate, clock: Clock, cond: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}; status {gate.status()}"
        clock.now += model_gate.CHECK_EVERY_S
        gate.poll()
        time.sleep(0.02)


def test_fetch_reports_progress_and_logs_each_tenth(
    local_registry: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    body = weights_bytes(3 << 18)  # 3 MiB: three 1 MiB chunks
    (local_registry / GPEN256.filename).write_bytes(body)
    spec = registry.get_spec(GPEN256.name)
    seen: list[FetchProgress | None] = []
    done = threading.Event()
    caplog.set_level(logging.INFO, logger="gpen_watch.modelstore.fetcher")
    fetch = BackgroundFetch([spec], tmp_path / "models", done.set, accepted=["GPEN"])
    fetch.start()
    while not done.wait(0.001):
        seen.append(fetch.progress())
    assert fetch.failures() == {}
    assert fetch.fetched() == [GPEN256.name]
    assert (paths.model_cache_dir() / GPEN256.filename).read_bytes() == body
    lines = [r.getMessage() for r in caplog.records]
    full = f"downloading GPEN-BFR-256: 100 % ({len(body) / 1e6:.1f} of {model_spec.mb(len(body))})"
    assert full in lines, lines
    assert len([line for line in lines if "downloading GPEN-BFR-256: " in line]) <= 11  # not per chunk
    assert any(line.startswith("downloading GPEN-BFR-256: 33 %") for line in lines), lines
    assert fetch.progress() is None  # cleared at the end
    text = FetchProgress("GPEN-BFR-512", "GPEN-BFR-512.pth", 122_200_000, 284_085_738).text()
    assert text == "downloading GPEN-BFR-512: 43 % (122.2 of 284.1 MB)"


def test_gate_downloads_what_is_missing_then_lets_the_workers_start(
    local_registry: Path, tmp_path: Path
) -> None:
    for spec in (GPEN256, MOBILE):
        (local_registry / spec.filename).write_bytes(weights_bytes(1000))
    clock = Clock()
    woken = threading.Event()
    gate = ModelGate(config(tmp_path / "models"), woken.set, clock=clock)
    try:
        assert gate.start() is False
        assert gate.state is GateState.WAITING
        assert woken.wait(30), "the fetch never finished"
        poll_until(gate, clock, lambda: gate.state is GateState.READY, "ready")
        assert gate.problem() is None
        assert gate.notice() is None
        assert {f.state for f in gate.status().files} == {"present"}
        assert sorted(p.name for p in paths.model_cache_dir().iterdir()) == sorted(
            [GPEN256.filename, MOBILE.filename]
        )
    finally:
        gate.close()


def test_gate_problem_when_downloads_fail_and_recovers_when_the_network_comes_back(
    local_registry: Path, tmp_path: Path
) -> None:
    clock = Clock()
    woken = threading.Event()
    models = tmp_path / "models"
    gate = ModelGate(config(models), woken.set, clock=clock)
    try:
        assert gate.start() is False
        assert woken.wait(30)
        poll_until(gate, clock, lambda: gate.problem() is not None, "the problem")
        problem = gate.problem()
        assert problem is not None
        for spec in (GPEN256, MOBILE):
            assert spec.filename in problem
            assert registry.get_spec(spec.name).url in problem
        assert "HTTP 404" in problem
        assert str(models) in problem
        assert str(paths.model_cache_dir()) in problem
        assert gate.state is GateState.WAITING
        # A block whose first line is the short one the tray shows: every file failed the same way.
        line = gate.problem_line()
        assert line is not None and problem.splitlines()[0] == line
        assert line == "model files missing: " + messages.failure_headline(
            gate.status().files[0].reason or ""
        )
        assert "\n" not in line and len(line) <= 44

        # The server has the files now (the network came back): the next retry gets them.
        for spec in (GPEN256, MOBILE):
            (local_registry / spec.filename).write_bytes(weights_bytes(1000))
        woken.clear()
        clock.now += model_gate.FETCH_RETRY_S
        poll_until(gate, clock, lambda: gate.state is GateState.READY, "ready after the retry")
        assert gate.problem() is None
    finally:
        gate.close()


def test_header_check_tells_corrupt_from_whole(tmp_path: Path) -> None:
    good = tmp_path / "good.pth"
    good.write_bytes(weights_bytes(100))
    assert needs.header_problem(good) is None
    cut = tmp_path / "cut.pth"
    cut.write_bytes(good.read_bytes()[:300])
    assert "truncated" in (needs.header_problem(cut) or "")
    page = tmp_path / "page.pth"
    page.write_bytes(b"<!DOCTYPE html><html>Not Found</html>")
    assert "HTML page" in (needs.header_problem(page) or "")
    empty = tmp_path / "empty.pth"
    empty.write_bytes(b"")
    assert needs.header_problem(empty) == "empty (0 bytes)"
    legacy = tmp_path / "legacy.pth"
    torch.save({"w": torch.zeros(3)}, legacy, _use_new_zipfile_serialization=False)
    assert needs.header_problem(legacy) is None


def test_status_shows_the_download_in_progress_as_a_notice_not_a_problem(
    local_registry: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = weights_bytes(1 << 20)  # 4.2 MB: the first half arrives, then the server waits
    (local_registry / GPEN256.filename).write_bytes(body)
    (local_registry / MOBILE.filename).write_bytes(weights_bytes(1000))
    slow = tuple(
        dataclasses.replace(s, url=s.url.replace(s.filename, f"half/{s.filename}"))
        if s.name == GPEN256.name
        else s
        for s in registry.MODELS
    )
    monkeypatch.setattr(registry, "MODELS", slow)
    RELEASE.clear()
    clock = Clock()
    gate = ModelGate(config(tmp_path / "models"), lambda: None, clock=clock)
    try:
        assert gate.start() is False
        # The first half holds two whole 1 MiB chunks; the third waits for the rest.
        pct = (2 << 20) * 100 // len(body)
        poll_until(gate, clock, lambda: f"{pct} %" in (gate.notice() or ""), "half downloaded")
        assert gate.notice() == f"downloading GPEN-BFR-256: {pct} % (2.1 of {model_spec.mb(len(body))})"
        assert gate.problem() is None  # news, not a fault
        status = gate.status()
        assert status.state == "waiting"
        assert status.download is not None
        assert status.download.percent == pct
        assert status.download.file == GPEN256.filename
        RELEASE.set()
        poll_until(gate, clock, lambda: gate.state is GateState.READY, "ready")
        assert gate.notice() is None
        assert gate.status().download is None
    finally:
        RELEASE.set()
        gate.close()


def test_a_download_that_is_not_weights_is_removed_and_not_retried_until_resume(
    local_registry: Path, tmp_path: Path
) -> None:
    (local_registry / GPEN256.filename).write_bytes(b"<!DOCTYPE html><html>rate limited</html>")
    (local_registry / MOBILE.filename).write_bytes(weights_bytes(1000))
    clock = Clock()
    woken = threading.Event()
    gate = ModelGate(config(tmp_path / "models"), woken.set, clock=clock)
    try:
        assert gate.start() is False
        assert woken.wait(30)
        poll_until(gate, clock, lambda: gate.problem() is not None, "the problem")
        problem = gate.problem() or ""
        assert "HTML page" in problem
        assert "removed" in problem
        assert GPEN256.filename in problem
        assert sorted(p.name for p in paths.model_cache_dir().iterdir()) == [MOBILE.filename]
        # Not fetched again on the retry timer (it would be the same page each time)...
        (local_registry / GPEN256.filename).write_bytes(weights_bytes(1000))
        clock.now += model_gate.FETCH_RETRY_MAX_S
        gate.poll()
        time.sleep(0.5)
        clock.now += model_gate.CHECK_EVERY_S
        gate.poll()
        assert gate.state is GateState.WAITING
        # ...but at once on resume.
        gate.retry_now()
        poll_until(gate, clock, lambda: gate.state is GateState.READY, "ready after resume")
    finally:
        gate.close()


def test_missing_custom_generator_file_says_where_to_put_it(tmp_path: Path) -> None:
    mine = tmp_path / "my-gpen.pth"
    cfg = RestoreConfig(
        model=str(mine), detector="retinaface_mobile0.25", use_parse=False, model_dir=tmp_path
    )
    (tmp_path / MOBILE.filename).write_bytes(weights_bytes(10))
    result = needs.check(cfg)
    assert [f.state.value for f in result.files] == ["missing", "present"]
    message = messages.missing_block(result)
    assert message.splitlines()[:3] == [
        "model file missing",
        f"  {mine} (restore.model: no such file)",
        f"  put your own file at {mine} (it is read from that exact path only),",
    ]
    # No download brings the user's own file, and no folder is searched for it.
    assert "models fetch" not in message and "folders" not in message


def test_a_missing_custom_file_is_never_told_to_be_downloaded(tmp_path: Path) -> None:
    """The user's own generator and a registry detector both missing: the advice to download and
    copy into the cache folders is for the registry file alone, and names --model-dir and
    GPEN_WATCH_MODEL_DIR as `models fetch` does; the own file is said missing at its exact path."""
    mine = tmp_path / "studio" / "my-gpen.pth"
    cfg = RestoreConfig(
        model=str(mine), detector="retinaface_mobile0.25", use_parse=False, model_dir=tmp_path
    )
    result = needs.check(cfg)
    assert [f.state.value for f in result.files] == ["missing", "missing"]
    message = messages.missing_block(result)
    assert message.startswith(
        f"model files missing\n  {mine} (restore.model: no such file)\n  {MOBILE.filename} ("
    )
    own, downloads = message.split("  to get it, run:\n")
    assert f"put your own file at {mine} (it is read from that exact path only)" in own
    assert str(mine) not in downloads  # only the registry file is to be downloaded and copied in
    assert f"    {program.command('models fetch ' + MOBILE.name)}\n" in downloads
    assert "--model-dir" in downloads and "GPEN_WATCH_MODEL_DIR" in downloads


def test_files_copied_in_during_a_download_end_it_and_leave_no_partial_file(
    local_registry: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (local_registry / GPEN256.filename).write_bytes(weights_bytes(1 << 20))
    slow = tuple(
        dataclasses.replace(s, url=s.url.replace(s.filename, f"half/{s.filename}")) for s in registry.MODELS
    )
    monkeypatch.setattr(registry, "MODELS", slow)
    RELEASE.clear()
    clock = Clock()
    models = tmp_path / "models"
    gate = ModelGate(config(models), lambda: None, clock=clock)
    try:
        assert gate.start() is False
        poll_until(gate, clock, lambda: "downloading GPEN-BFR-256" in (gate.notice() or ""), "downloading")
        models.mkdir()
        for spec in (GPEN256, MOBILE):
            (models / spec.filename).write_bytes(weights_bytes(10))
        poll_until(gate, clock, lambda: gate.state is GateState.READY, "ready")
        RELEASE.set()  # the next chunk arrives; the cancelled download stops there
        deadline = time.monotonic() + 30
        cache = paths.model_cache_dir()
        while any(cache.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert list(cache.iterdir()) == []  # neither the file nor its .part
    finally:
        RELEASE.set()
        gate.close()


def test_a_corrupt_file_that_turns_up_is_logged_once_with_its_path_and_what_to_do(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The user copies the missing file in, cut short: status shows it, and the log says it too
    (the log is all a service started at login has), once, not at every check."""
    mine = tmp_path / "my-gpen.pth"
    cfg = RestoreConfig(
        model=str(mine), detector="retinaface_mobile0.25", use_parse=False, model_dir=tmp_path
    )
    (tmp_path / MOBILE.filename).write_bytes(weights_bytes(10))
    clock = Clock()
    gate = ModelGate(cfg, lambda: None, clock=clock)
    caplog.set_level(logging.INFO, logger="gpen_watch.service.model_gate")
    try:
        assert gate.start() is False
        mine.write_bytes(weights_bytes(1000)[:300])  # a zip without its directory
        poll_until(gate, clock, lambda: "corrupt" in (gate.problem() or ""), "the corrupt file in status")
        for _ in range(3):  # later checks see the same file: nothing more in the log
            clock.now += model_gate.CHECK_EVERY_S
            gate.poll()
        said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("corrupt")]
        assert len(said) == 1, said
        lines = said[0].splitlines()
        assert lines[0] == "corrupt model file: my-gpen.pth"
        assert lines[1].startswith(f"  {mine} (restore.model): truncated or damaged archive")
        assert "  replace it with a good copy" in lines
        assert gate.problem_line() == "corrupt model file: my-gpen.pth"
        assert [r.levelname for r in caplog.records if r.getMessage().startswith("corrupt")] == ["ERROR"]
    finally:
        gate.close()


def retry_round(gate: ModelGate, clock: Clock, woken: threading.Event) -> None:
    """Let the retry timer run out, and wait for that round of downloads to end."""
    woken.clear()
    clock.now += model_gate.FETCH_RETRY_MAX_S
    gate.poll()  # starts the downloads again
    assert woken.wait(30), "the retry never ended"
    clock.now += model_gate.CHECK_EVERY_S
    gate.poll()  # takes in how they ended


def test_first_run_log_says_the_missing_files_once_in_short_lines_and_a_retry_only_what_changed(
    local_registry: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A first run offline: the log names every missing file once, a line each with its URL and
    why it failed, then where to put them; a retry that changes nothing adds nothing, and one that
    got a file adds one line for what is still missing (the service's log is all a service started
    at login has, and it runs for weeks)."""
    models = tmp_path / "models"
    clock = Clock()
    woken = threading.Event()
    gate = ModelGate(config(models), woken.set, clock=clock)
    caplog.set_level(logging.INFO, logger="gpen_watch")
    try:
        assert gate.start() is False
        assert woken.wait(30), "the first downloads never ended"
        clock.now += model_gate.CHECK_EVERY_S
        gate.poll()  # takes in how they ended
        said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        # Once: the notice that the downloads start, then the whole report.
        assert len(said) == 2, said
        assert said[0] == f"model files missing: {GPEN256.filename}, {MOBILE.filename}; downloading them"
        report = said[1].splitlines()
        assert report[0] == "model files missing: not on the server"
        for spec in (GPEN256, MOBILE):
            assert f"    from {registry.get_spec(spec.name).url}" in report
        assert (
            sum(line.startswith("    download failed: not on the server (HTTP 404") for line in report) == 2
        )
        # The command on a line of its own, then every folder a copy is found in, one a line.
        fetch = program.command(f"models fetch {GPEN256.name} {MOBILE.name}")
        at = report.index("  to get them, run:")
        assert report[at + 1] == f"    {fetch}"
        assert report[at + 2] == (
            "  or download them on a machine with internet access and copy them into any of these folders:"
        )
        assert report[at + 3 : at + 5] == [
            f"    {models}",
            f"    {paths.model_cache_dir()} (the download cache)",
        ]
        assert report[at + 5].startswith("    a folder of your own, named by --model-dir")
        assert report[-2:] == [
            "  the workers start by themselves as soon as every file is there",
            "  downloads are tried again in 60 s",
        ]
        # Short lines, but for those holding a path, which is as long as it is.
        short = [line for line in report if str(tmp_path) not in line and program.program_name() not in line]
        assert all(len(line) <= 100 for line in short), report

        # Two retries that find the network as it was: nothing more at INFO or above.
        before = len(caplog.records)
        for _ in range(2):
            retry_round(gate, clock, woken)
        assert [r.getMessage() for r in caplog.records[before:]] == []

        # The server has one of the files now: one line says what is still missing.
        (local_registry / GPEN256.filename).write_bytes(weights_bytes(1000))
        before = len(caplog.records)
        retry_round(gate, clock, woken)
        new = [r.getMessage() for r in caplog.records[before:] if r.levelno >= logging.WARNING]
        assert len(new) == 1
        assert new[0].startswith(
            f"model files still missing: {MOBILE.filename}: not on the server (HTTP 404 File not found from "
        )
        assert new[0].endswith("); next try in 480 s")
        assert any(r.getMessage().startswith(f"downloaded {GPEN256.filename} to ") for r in caplog.records)
        assert not any(
            "could not download" in r.getMessage() for r in caplog.records if r.levelno >= logging.INFO
        )
    finally:
        gate.close()
