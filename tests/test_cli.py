"""The command line as a user meets it: pipes that close early, help text, shared restore options."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpen_watch import cli
from gpen_watch.cli import run as run_cli
from gpen_watch.service import control

# Commands that print without a running service, and with one (the status reply comes from a real
# control server in this process).
COMMANDS = [
    ["--help"],
    ["--version"],
    ["restore", "--help"],
    ["run", "--help"],
    ["models", "list"],
    ["models", "path"],
    ["config", "path"],
    ["config", "show"],
    ["status"],
    ["status", "--json"],
]


@pytest.fixture
def short_runtime_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    # Unix socket paths must stay under ~100 bytes; pytest's tmp_path can be longer.
    import shutil

    d = Path(tempfile.mkdtemp(prefix="gw-"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(d))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _run_into_closed_pipe(args: list[str]) -> subprocess.CompletedProcess[str]:
    """Run the CLI with stdout a pipe whose reader is already gone, as `... | head -0` ends up."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "gpen_watch", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_a_closed_pipe_ends_quietly(args: list[str]) -> None:
    proc = _run_into_closed_pipe(args)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "BrokenPipe" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_status_of_a_running_service_into_a_closed_pipe(short_runtime_dir: Path) -> None:
    status = {
        "ok": True,
        "version": "0.1.0",
        "pid": os.getpid(),
        "uptime_s": 5,
        "queue": {"queued": 1, "running": 0, "done": 3, "failed": 0, "unsupported": 0},
        "workers": [{"name": f"cpu#{i}", "device": "cpu", "state": "idle", "in_flight": 0, "done": 1,
                     "faces": 1, "restarts": 0} for i in range(2000)],
    }  # fmt: skip
    server = control.ControlServer(lambda req: status)
    server.start()
    try:
        for args in (["status"], ["status", "--json"]):
            # Head reads the first line and goes, while the CLI still has most of the text to write.
            shell = f"{sys.executable} -m gpen_watch {' '.join(args)} | head -1"
            proc = subprocess.run(["sh", "-c", shell], capture_output=True, text=True, timeout=120)
            assert proc.stdout.count("\n") == 1
            assert "Traceback" not in proc.stderr, proc.stderr
            assert "BrokenPipe" not in proc.stderr, proc.stderr
            proc = _run_into_closed_pipe(args)
            assert proc.returncode == 0, proc.stderr
            assert "Traceback" not in proc.stderr, proc.stderr
    finally:
        server.close()


# --- help ----------------------------------------------------------------------------------------


def _all_parsers(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield parser.prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from _all_parsers(child)


@pytest.mark.parametrize("columns", [40, 61, 80, 100, 132])
def test_help_never_breaks_a_name_at_its_hyphen(columns: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    seen = 0
    for prog, parser in _all_parsers(cli.build_parser()):
        text = parser.format_help()
        seen += 1
        for line in text.splitlines():
            # A line that ends in a letter or digit and a hyphen was cut inside a name
            # ("GPEN-" / "BFR-256", "--no-" / "parse").
            assert not re.search(r"\w-$", line), f"{prog} at {columns} columns: {line!r}"
        assert "default: None" not in text, prog
    assert seen > 10  # every command and sub-command was looked at


def test_restore_help_explains_precision_and_detector(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    parsers = dict(_all_parsers(cli.build_parser()))
    text = parsers["gpen-watch restore"].format_help()
    precision = re.search(r"--precision \{[^}]*\}\s+(.*)", text)
    detector = re.search(r"--detector \{[^}]*\}\s+(.*)", text)
    assert precision
    assert "fp32 on a CPU" in precision.group(1)
    assert "bf16" in precision.group(1)
    assert detector
    assert "retinaface_mobile0.25" in detector.group(1)
    assert "faster" in detector.group(1)


def _option_strings(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def test_run_takes_the_restore_options_of_restore() -> None:
    parsers = dict(_all_parsers(cli.build_parser()))
    restore, run = parsers["gpen-watch restore"], parsers["gpen-watch run"]
    # restore's own: where results go and how this one process runs; run has its own --device
    # (workers.devices, repeatable) and --config.
    only_restore = {"-o", "--output", "--threads", "--overwrite", "--no-download", "--no-progress"}
    assert _option_strings(restore) - only_restore <= _option_strings(run)
    for flag in ("--detector", "--no-parse", "--precision", "--threshold", "--format", "--quality"):
        assert flag in _option_strings(run)


def test_run_restore_options_become_settings(tmp_path: Path) -> None:
    parser = cli.build_parser()
    args = parser.parse_args(
        [
            "run",
            "--detector",
            "retinaface_mobile0.25",
            "--no-parse",
            "--precision",
            "bf16",
            "--threshold",
            "0.7",
            "--format",
            "png",
            "--quality",
            "80",
            "--model-dir",
            "models",
            "--set",
            "restore.min_face=20",
        ]
    )
    got = run_cli.overrides(args)
    assert got == {
        "restore.detector": "retinaface_mobile0.25",
        "restore.use_parse": False,
        "restore.precision": "bf16",
        "restore.detect_threshold": 0.7,
        "output.format": "png",
        "output.jpeg_quality": 80,
        "restore.model_dir": str(Path("models").absolute()),
        "restore.min_face": "20",
    }
    from gpen_watch import config

    cfg = config.load(tmp_path / "none.toml", got)
    assert cfg.restore.use_parse is False
    assert cfg.restore.detector == "retinaface_mobile0.25"
    # Nothing given: nothing overridden (the config file decides).
    assert run_cli.overrides(parser.parse_args(["run"])) == {}


def test_restore_and_run_parse_restore_options_the_same(tmp_path: Path) -> None:
    from gpen_watch.cli import restore as restore_cli

    parser = cli.build_parser()
    flags = ["--detector", "retinaface_mobile0.25", "--no-parse", "--face-batch", "4", "--max-side", "0"]
    restore = restore_cli._overrides(parser.parse_args(["restore", "x.jpg", "-o", "out", *flags]))
    run = run_cli.overrides(parser.parse_args(["run", *flags]))
    assert restore == run
    assert restore["restore.use_parse"] is False


def test_restore_takes_set_as_run_does_and_it_wins_over_the_named_options(tmp_path: Path) -> None:
    from gpen_watch import config
    from gpen_watch.base.errors import ConfigError
    from gpen_watch.cli import restore as restore_cli

    parser = cli.build_parser()
    flags = [
        "--threshold",
        "0.7",
        "--set",
        "restore.detect_shrink_above=1000",
        "--set",
        "restore.detect_threshold=0.95",
    ]
    restore = restore_cli._overrides(parser.parse_args(["restore", "x.jpg", "-o", "out", *flags]))
    run = run_cli.overrides(parser.parse_args(["run", *flags]))
    assert restore == run == {"restore.detect_threshold": "0.95", "restore.detect_shrink_above": "1000"}
    cfg = config.load(tmp_path / "none.toml", restore).restore
    assert (cfg.detect_shrink_above, cfg.detect_threshold) == (1000, 0.95)
    for bad in ("restore.detect_max_side", "=3"):
        for argv in (["restore", "x.jpg", "-o", "out"], ["run"]):
            with pytest.raises(ConfigError, match=r"expected SECTION\.KEY=VALUE"):
                (restore_cli._overrides if argv[0] == "restore" else run_cli.overrides)(
                    parser.parse_args([*argv, "--set", bad])
                )


def test_restore_set_is_checked_before_any_model_loads(tmp_path: Path) -> None:
    """A --set value the schema refuses stops `restore` with the setting's name, no traceback."""
    photo = tmp_path / "a.png"
    photo.write_bytes(b"")
    cmd = [sys.executable, "-m", "gpen_watch", "restore", str(photo), "-o", str(tmp_path / "out")]
    for setting, reason in [
        ("restore.detect_shrink_above=10", "restore.detect_shrink_above: must be at least 64"),
        ("restore.detect_shrink_abov=2000", "no such setting"),
    ]:
        proc = subprocess.run([*cmd, "--set", setting], capture_output=True, text=True, timeout=120)
        assert proc.returncode != 0
        assert reason in proc.stderr
        assert "Traceback" not in proc.stderr
        assert not (tmp_path / "out").exists()


def test_strength_and_face_choice_options_become_settings_for_restore_and_run(tmp_path: Path) -> None:
    from gpen_watch import config
    from gpen_watch.cli import restore as restore_cli

    parser = cli.build_parser()
    flags = ["--strength", "0.8", "--faces", "largest", "--max-faces", "3"]
    restore = restore_cli._overrides(parser.parse_args(["restore", "x.jpg", "-o", "out", *flags]))
    run = run_cli.overrides(parser.parse_args(["run", *flags]))
    want = {"restore.strength": 0.8, "restore.faces": "largest", "restore.max_faces": 3}
    assert restore == run == want
    cfg = config.load(tmp_path / "none.toml", run).restore
    assert (cfg.strength, cfg.faces, cfg.max_faces) == (0.8, "largest", 3)
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "--faces", "biggest"])
    with pytest.raises(config.ConfigError, match=r"restore\.strength: must be between 0"):
        config.load(tmp_path / "none.toml", {"restore.strength": "1.5"})


@pytest.mark.parametrize(
    "argv",
    [
        ["status"],
        ["status", "--json"],
        ["pause"],
        ["resume"],
        ["reload"],
        ["redo", "IMG_1.jpg", "--strength", "0.5"],
        ["retry", "IMG_1.jpg"],
        ["retry", "--all"],
        ["dashboard", "--url"],
    ],
    ids=lambda argv: " ".join(argv),
)
def test_every_command_that_needs_the_service_ends_with_one_status_without_it(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from gpen_watch.cli import exitcodes

    assert exitcodes.NOT_RUNNING == 3  # documented (docs/getting-started.md): scripts rely on it
    assert cli.main(argv) == exitcodes.NOT_RUNNING
    said = capsys.readouterr()
    assert "not running" in said.out + said.err or said.out == '{"running": false}\n'
    assert "Traceback" not in said.err


def test_stop_without_a_service_is_no_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["stop"]) == 0
    assert capsys.readouterr().out == "gpen-watch was not running; nothing to stop\n"
