"""Every command's misuse, through the real entry point (``cli.main`` in this process): a clear
sentence that names what is wrong, exit status 2, and never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from gpen_watch import cli
from gpen_watch.platform import paths

# (command line, what the sentence must say); "F" is a file, "D" an empty folder, "I" a folder
# with one photo, "BAD" a config that is not TOML, "UTF" one that is not UTF-8, all in the cwd.
MISUSES: list[tuple[str, str]] = [
    ("run --no-tray --inbox F --outbox out", "F: the inbox (--inbox, watch.inboxes) is a file, not a folder"),
    ("run --no-tray --inbox D --outbox F", "F: the outbox (--outbox, watch.outbox) is a file, not a folder"),
    ("run --no-tray --inbox F/sub --outbox out", "F/sub: cannot create the inbox (--inbox, watch.inboxes): "),
    ("run --no-tray --inbox D --outbox D", "D is both an inbox and the outbox"),
    ("run --no-tray --workers many", "argument --workers: invalid int value: 'many'"),
    ("run --no-tray --workers 0", "workers.workers_per_device: must be at least 1"),
    ("run --no-tray --stop-grace -1", "argument --stop-grace: must be 0 or more seconds, got -1"),
    ("run --no-tray --config missing.toml", "missing.toml: config file not found"),
    ("run --no-tray --config BAD", "BAD: cannot read config"),
    ("run --no-tray --config UTF", "UTF: cannot read config"),
    ("run --no-tray --config D", "D: cannot read config"),
    ("run --no-tray --set watch.settle_seconds", "--set 'watch.settle_seconds': expected SECTION.KEY=VALUE"),
    ("run --no-tray --set watch.settle_seconds=soon", "watch.settle_seconds: expected a number, got 'soon'"),
    ("run --no-tray --bogus", "unrecognized arguments: --bogus"),
    ("restore", "the following arguments are required: INPUT, -o/--output"),
    ("restore I", "the following arguments are required: -o/--output"),
    ("restore I -o F", "cannot create output folder: "),
    ("restore missing.jpg -o out", "missing.jpg: no such file or folder"),
    ("restore I -o out --threads 0", "argument --threads: must be at least 1, got 0"),
    ("restore I -o out --threads four", "argument --threads: expected a whole number, got 'four'"),
    ("restore I -o out --strength 7", "restore.strength: must be between 0"),
    ("restore I -o out --device gpu", "restore.device: must be auto, cpu, cuda, cuda:N or mps"),
    ("restore I -o out --config UTF", "UTF: cannot read config"),
    ("status --bogus", "unrecognized arguments: --bogus"),
    ("stop --timeout soon", "argument --timeout: expected a number of seconds, got 'soon'"),
    ("models", "the following arguments are required: ACTION"),
    ("models bogus", "argument ACTION: invalid choice: 'bogus'"),
    ("models fetch GPEN-BFR-999", "unknown model 'GPEN-BFR-999'"),
    ("models list --config BAD", "BAD: cannot read config"),
    ("config", "the following arguments are required: action"),
    ("config show --config UTF", "UTF: cannot read config"),
    ("config init --config F", "F exists; use --force to overwrite it"),
    ("config init --config F/config.toml", "cannot write config: F is a file, not a folder"),
    ("service bogus", "argument action: invalid choice: 'bogus'"),
    ("service install --node bogus", "--node bogus: give a `head` or `join` command"),
    ("cluster", "the following arguments are required: ACTION"),
    ("cluster join", "the following arguments are required: address"),
    ("cluster head --bind 10.0.0.1 --port x", "argument --port: invalid int value: 'x'"),
    ("cluster status --config missing.toml", "missing.toml: config file not found"),
    ("nonsense", "argument COMMAND: invalid choice: 'nonsense'"),
    ("--bogus", "unrecognized arguments: --bogus"),
]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "F").write_text("a note, not a folder\n")
    (tmp_path / "D").mkdir()
    (tmp_path / "I").mkdir()
    Image.new("RGB", (32, 24), (90, 120, 150)).save(tmp_path / "I" / "photo.png")
    (tmp_path / "BAD").write_text("[restore\nstrength =\n")
    (tmp_path / "UTF").write_bytes(b'[restore]\nmodel = "\xff\xfe"\n')
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _main(argv: list[str]) -> int:
    try:
        return cli.main(argv)
    except SystemExit as exc:  # argparse ends the process itself
        return int(exc.code or 0)


@pytest.mark.parametrize(("command", "said"), MISUSES, ids=[c for c, _ in MISUSES])
def test_a_misused_command_says_why_and_exits_2(
    workdir: Path, capsys: pytest.CaptureFixture[str], command: str, said: str
) -> None:
    code = _main(command.split())
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert "Traceback" not in out + err
    assert said in err, err
    assert err.splitlines()[-1].startswith("gpen-watch"), err  # said by gpen-watch, not by Python
    assert not (workdir / "out").exists()  # nothing was started or made


def test_config_init_refusal_leaves_the_file(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = paths.config_file()
    path.parent.mkdir(parents=True)
    path.write_text("# mine\n")
    assert _main(["config", "init"]) == 2
    assert capsys.readouterr().err == f"gpen-watch: error: {path} exists; use --force to overwrite it\n"
    assert path.read_text() == "# mine\n"
