"""The one typed configuration: TOML file, dotted overrides, validation, `gpen-watch config`.

Every refusal must name the setting and say what is allowed; one caused by the file must also name
the file, since that is what the user has to open. The CLI runs as a real subprocess with the user
folders redirected by conftest's autouse isolated_user_dirs fixture.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpen_watch import config
from gpen_watch.base.errors import ConfigError
from gpen_watch.config import Config, InboxConfig
from gpen_watch.platform import paths

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]


def write(tmp_path: Path, text: str, name: str = "config.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def refusal(path: Path, overrides: dict | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        config.load(path, overrides)
    return str(info.value)


# --- defaults -----------------------------------------------------------------------------------


def test_defaults_validate_and_load_without_a_file(isolated_user_dirs: Path, tmp_path: Path) -> None:
    cfg = Config()
    assert config.validate(cfg) is cfg
    # No file: the defaults, validated.
    assert config.load(tmp_path / "missing.toml") == cfg
    assert cfg.restore.face_batch == 0
    assert cfg.workers.images_in_flight == 0
    assert cfg.workers.devices == ["auto"]
    assert cfg.workers.cpu_workers == 1
    assert cfg.restore.precision == "auto"
    assert cfg.output.format == "same"
    assert cfg.output.originals == "archive"
    assert cfg.output.jpeg_quality == 95
    assert cfg.restore.model == "GPEN-BFR-512"
    assert cfg.restore.model_dir is None
    # Small faces as upstream GPEN treats them: all restored, those under 100 px smoothed.
    assert cfg.restore.min_face == 0
    assert cfg.restore.smooth_below == 100
    # The default folders are the (isolated) user's, never a path relative to the current directory.
    assert cfg.watch.outbox.is_absolute()
    assert cfg.watch.outbox.is_relative_to(isolated_user_dirs)
    assert [i.path.name for i in cfg.watch.inboxes] == ["inbox"]


def test_load_without_a_path_reads_the_users_config_file(isolated_user_dirs: Path) -> None:
    path = paths.config_file()
    assert path.is_relative_to(isolated_user_dirs / "config")
    assert config.load() == Config()
    path.parent.mkdir(parents=True)
    path.write_text("[restore]\nface_batch = 12\n", encoding="utf-8")
    assert config.load().restore.face_batch == 12


# --- a full file --------------------------------------------------------------------------------

FULL = """
[watch]
outbox = "~/results"
settle_seconds = 2          # an int where a float is expected
polling = true
poll_interval = 0.5
rescan_seconds = 30

[[watch.inboxes]]
path = "~/in/a"

[[watch.inboxes]]
path = "/srv/share/b"
recursive = false
outbox = "~/out/b"

[restore]
model = "GPEN-BFR-256"
detector = "retinaface_mobile0.25"
use_parse = false
detect_threshold = 0.75
detect_max_side = 800
min_face = 24
face_batch = 16
max_side = 0
precision = "bf16"
channels_last = false
device = "cuda:1"
model_dir = "~/models"
max_megapixels = 50

[output]
format = "png"
jpeg_quality = 80
name_template = "{date}-{stem}{ext}"
originals = "keep"
archive_dir = "~/originals"

[workers]
devices = ["cuda:0", "cuda:1"]
workers_per_device = 2
cpu_workers = 3
images_in_flight = 8
image_timeout = 30
max_attempts = 5
"""


def test_a_file_with_every_section_loads_into_the_right_types(
    isolated_user_dirs: Path, tmp_path: Path
) -> None:
    home = isolated_user_dirs
    cfg = config.load(write(tmp_path, FULL))
    w, r, o, wk = cfg.watch, cfg.restore, cfg.output, cfg.workers

    assert w.outbox == home / "results"  # ~ expanded against $HOME
    assert w.inboxes == [
        InboxConfig(home / "in" / "a", recursive=True, outbox=None),
        InboxConfig(Path("/srv/share/b"), recursive=False, outbox=home / "out" / "b"),
    ]
    assert type(w.settle_seconds) is float
    assert w.settle_seconds == 2.0
    assert w.polling == "always"  # an older file's true
    assert w.poll_interval == 0.5
    assert w.rescan_seconds == 30.0

    assert (r.model, r.detector) == ("GPEN-BFR-256", "retinaface_mobile0.25")
    assert r.use_parse is False
    assert r.channels_last is False
    assert r.detect_threshold == 0.75
    assert (r.detect_max_side, r.min_face, r.face_batch, r.max_side) == (800, 24, 16, 0)
    assert r.precision == "bf16"
    assert r.device == "cuda:1"
    assert r.model_dir == home / "models"
    assert type(r.max_megapixels) is float
    assert r.max_megapixels == 50.0

    assert (o.format, o.jpeg_quality, o.originals) == ("png", 80, "keep")
    assert o.name_template == "{date}-{stem}{ext}"
    assert o.archive_dir == home / "originals"

    assert wk.devices == ["cuda:0", "cuda:1"]
    assert (wk.workers_per_device, wk.cpu_workers, wk.images_in_flight, wk.max_attempts) == (2, 3, 8, 5)
    assert type(wk.image_timeout) is float
    assert wk.image_timeout == 30.0
    for value in (r.face_batch, wk.images_in_flight, o.jpeg_quality):
        assert type(value) is int


def test_inboxes_may_be_plain_paths(isolated_user_dirs: Path, tmp_path: Path) -> None:
    cfg = config.load(write(tmp_path, '[watch]\ninboxes = ["~/a", "/b"]\n'))
    assert cfg.watch.inboxes == [InboxConfig(isolated_user_dirs / "a"), InboxConfig(Path("/b"))]


def test_a_partial_file_keeps_the_other_defaults(tmp_path: Path) -> None:
    cfg = config.load(write(tmp_path, '[output]\nformat = "jpeg"\n'))
    expected = Config()
    expected.output.format = "jpeg"
    assert cfg == expected


@pytest.mark.parametrize(
    "text",
    [
        "[restore]\nface_batch = 0\n",  # 0 = pick from free memory
        "[workers]\nimages_in_flight = 0\n",  # 0 = what the engine asks for
        "[workers]\ncpu_workers = 1\nworkers_per_device = 1\nmax_attempts = 1\n",
        "[restore]\nmax_side = 0\n",  # 0 = never pre-scale
        "[restore]\nmax_side = 256\ndetect_max_side = 64\ndetect_threshold = 1.0\n",
        "[watch]\nsettle_seconds = 0\n",
        "[output]\njpeg_quality = 1\n",
        "[output]\njpeg_quality = 100\n",
        '[restore]\nmodel = "/models/my-gpen.pth"\ndevice = "cpu"\n',
        '[workers]\ndevices = ["auto", "cpu", "cuda", "cuda:3"]\n',
        "[restore]\nface_batch = 8.0\n",  # a whole number written as a float
    ],
)
def test_boundary_values_are_accepted(tmp_path: Path, text: str) -> None:
    config.load(write(tmp_path, text))


# --- refusals -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key", "allowed"),
    [
        # unknown names
        ("[nosuch]\nx = 1\n", "nosuch", "known: watch, restore, output, workers"),
        ("face_batch = 4\n", "face_batch", "known: watch, restore"),
        ("[restore]\nface_bach = 4\n", "restore.face_bach", "did you mean restore.face_batch?"),
        ('[[watch.inboxes]]\npath = "/a"\nrecursve = false\n', "watch.inboxes[0].recursve", "recursive"),
        # wrong types
        ("watch = 5\n", "watch", "expected a table"),
        ('[restore]\nface_batch = "lots"\n', "restore.face_batch", "expected a number"),
        ("[restore]\nface_batch = 1.5\n", "restore.face_batch", "whole number"),
        ("[restore]\nface_batch = true\n", "restore.face_batch", "expected a number"),
        ("[restore]\nuse_parse = 1\n", "restore.use_parse", "expected true or false"),
        ("[restore]\nmodel = 512\n", "restore.model", "expected text"),
        ("[watch]\noutbox = 5\n", "watch.outbox", "expected a path"),
        ("[workers]\ndevices = [0]\n", "workers.devices[0]", "expected text"),
        ("[workers]\ndevices = 0\n", "workers.devices", "expected a list"),
        ("[[watch.inboxes]]\nrecursive = false\n", "watch.inboxes[0].path", "required"),
        # bad choices
        ('[restore]\nprecision = "fp8"\n', "restore.precision", "auto, fp32, fp16, bf16"),
        ('[output]\nformat = "gif"\n', "output.format", "same, jpeg, png, webp, tiff"),
        ('[output]\noriginals = "move"\n', "output.originals", "archive, keep, delete"),
        ('[restore]\ndetector = "yolo"\n', "restore.detector", "retinaface_resnet50"),
        ('[restore]\nmodel = "GPEN-BFR-4096"\n', "restore.model", ".pth"),
        ('[restore]\ndevice = "gpu"\n', "restore.device", "auto, cpu, cuda, cuda:N or mps"),
        ('[workers]\ndevices = ["cuda:x"]\n', "workers.devices", "auto, cpu, cuda or cuda:N"),
        ('[output]\nname_template = "{path}"\n', "output.name_template", "date, ext, model, name, stem"),
        ('[output]\nname_template = "../{name}"\n', "output.name_template", "file name"),
        # out of range
        ("[workers]\nimages_in_flight = -1\n", "workers.images_in_flight", "0 (auto) or a positive"),
        ("[restore]\nface_batch = -1\n", "restore.face_batch", "0 (auto) or a positive"),
        ("[restore]\nmin_face = -1\n", "restore.min_face", "0 (restore every face)"),
        ("[restore]\nsmooth_below = -5\n", "restore.smooth_below", "0 (never smooth)"),
        ("[workers]\ncpu_workers = 0\n", "workers.cpu_workers", "at least 1"),
        ("[workers]\nworkers_per_device = 0\n", "workers.workers_per_device", "at least 1"),
        ("[workers]\nmax_attempts = 0\n", "workers.max_attempts", "at least 1"),
        ("[workers]\nimage_timeout = 0\n", "workers.image_timeout", "positive"),
        ("[workers]\ndevices = []\n", "workers.devices", "at least one device"),
        ("[output]\njpeg_quality = 101\n", "output.jpeg_quality", "between 1 and 100"),
        ("[output]\njpeg_quality = 0\n", "output.jpeg_quality", "between 1 and 100"),
        ("[restore]\ndetect_threshold = 0\n", "restore.detect_threshold", "(0, 1]"),
        ("[restore]\ndetect_threshold = nan\n", "restore.detect_threshold", "(0, 1]"),
        ("[restore]\nmax_side = 100\n", "restore.max_side", "0 (off) or at least 256"),
        ("[restore]\ndetect_max_side = 10\n", "restore.detect_max_side", "at least 64"),
        ("[restore]\nmax_megapixels = 0\n", "restore.max_megapixels", "positive"),
        ("[restore]\nmemory_mb = 100\n", "restore.memory_mb", "0 (auto) or at least 256"),
        ("[restore]\nstrength = 1.2\n", "restore.strength", "between 0 (leave faces as they are) and 1"),
        ("[restore]\nstrength = -0.1\n", "restore.strength", "between 0"),
        ("[restore]\nmax_faces = -1\n", "restore.max_faces", "0 (no limit) or a positive"),
        ('[restore]\nfaces = "biggest"\n', "restore.faces", "all, largest, center"),
        ("[watch]\nsettle_seconds = -1\n", "watch.settle_seconds", "not be negative"),
        ("[watch]\npoll_interval = 0\n", "watch.poll_interval", "positive"),
        ("[watch]\ninboxes = []\n", "watch.inboxes", "at least one folder"),
    ],
)
def test_a_bad_file_names_the_file_the_setting_and_what_is_allowed(
    tmp_path: Path, text: str, key: str, allowed: str
) -> None:
    path = write(tmp_path, text)
    message = refusal(path)
    assert message.startswith(f"{path}: {key}: "), message
    assert allowed in message, message


def test_a_toml_syntax_error_names_the_file_and_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, '[restore]\nface_batch = 4\nprecision = "fp16\n')
    message = refusal(path)
    assert str(path) in message, message
    assert "line 3" in message, message


def test_an_unreadable_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(b'[restore]\nmodel = "\xff\xfe"\n')
    assert str(path) in refusal(path)
    folder = tmp_path / "a-folder.toml"
    folder.mkdir()
    assert str(folder) in refusal(folder)


# --- overrides (--set and the named options) ----------------------------------------------------


@pytest.mark.parametrize(
    ("key", "text", "expected"),
    [
        ("restore.face_batch", "16", 16),
        ("restore.face_batch", " 0 ", 0),
        ("workers.images_in_flight", "0", 0),
        ("restore.detect_threshold", "0.5", 0.5),
        ("restore.max_megapixels", "50", 50.0),
        ("workers.image_timeout", "90", 90.0),
        ("restore.use_parse", "false", False),
        ("restore.use_parse", "No", False),
        ("restore.use_parse", "0", False),
        ("watch.polling", "on", "always"),
        ("watch.polling", "TRUE", "always"),
        ("watch.polling", "false", "auto"),
        ("watch.polling", "never", "never"),
        ("workers.devices", "cpu", ["cpu"]),
        ("workers.devices", "cuda:0, cuda:1", ["cuda:0", "cuda:1"]),
        ("workers.devices", '["cuda:0","cuda:1"]', ["cuda:0", "cuda:1"]),
        ("workers.devices", '[ "cpu" ]', ["cpu"]),
        ("output.format", "webp", "webp"),
        ("output.originals", "delete", "delete"),
        ("restore.precision", "fp16", "fp16"),
        ("restore.model_dir", "none", None),
        ("restore.model_dir", "/opt/models", Path("/opt/models")),
    ],
)
def test_overrides_are_converted_from_text(tmp_path: Path, key: str, text: str, expected: object) -> None:
    cfg = config.load(tmp_path / "missing.toml", {key: text})
    section, name = key.split(".")
    value = getattr(getattr(cfg, section), name)
    assert value == expected
    assert type(value) is type(expected)


def test_override_paths_expand_home(isolated_user_dirs: Path, tmp_path: Path) -> None:
    cfg = config.load(
        tmp_path / "missing.toml",
        {
            "watch.inboxes": "~/a, /b",
            "watch.outbox": "~/out",
            "output.archive_dir": "~/orig",
        },
    )
    assert cfg.watch.inboxes == [InboxConfig(isolated_user_dirs / "a"), InboxConfig(Path("/b"))]
    assert cfg.watch.outbox == isolated_user_dirs / "out"
    assert cfg.output.archive_dir == isolated_user_dirs / "orig"
    # A TOML list of inbox tables works too.
    cfg = config.load(tmp_path / "missing.toml", {"watch.inboxes": '[{path = "/c", recursive = false}]'})
    assert cfg.watch.inboxes == [InboxConfig(Path("/c"), recursive=False)]


def test_overrides_apply_after_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, '[restore]\nface_batch = 4\nmin_face = 20\n[workers]\ndevices = ["cuda:0"]\n')
    cfg = config.load(path, {"restore.face_batch": "8", "workers.devices": "cpu"})
    assert cfg.restore.face_batch == 8
    assert cfg.workers.devices == ["cpu"]
    assert cfg.restore.min_face == 20  # the file's other settings stay
    # A value the file gets wrong is fine once the command line replaces it...
    bad = write(tmp_path, "[workers]\ncpu_workers = 0\n", "bad.toml")
    assert config.load(bad, {"workers.cpu_workers": 2}).workers.cpu_workers == 2
    # ...and a bad override is not blamed on a file that did not set it.
    message = refusal(path, {"workers.images_in_flight": "-3"})
    assert message.startswith("workers.images_in_flight: ")
    assert str(path) not in message


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("restore.face_bach", "did you mean restore.face_batch?"),
        ("worker.cpu_workers", "did you mean workers.cpu_workers?"),
        ("restore.strenght", "did you mean restore.strength?"),
        # Nothing close: no unrelated setting of the same section offered, the known ones listed.
        ("restore.nonsense", "; known: watch.inboxes, "),
        ("watch.colour", "; known: watch.inboxes, "),
        ("restore", "no such setting"),
        ("restore.", "no such setting"),
        ("nosection.x", "known: watch.inboxes"),
        ("__eq__.x", "no such setting"),  # a method of Config, not a section
        ("__class__.x", "no such setting"),
        ("watch.inboxes.0", "no such setting"),
    ],
)
def test_an_unknown_override_names_the_key(tmp_path: Path, key: str, expected: str) -> None:
    message = refusal(tmp_path / "missing.toml", {key: "1"})
    assert message.startswith(f"{key}: no such setting"), message
    assert expected in message, message
    if "did you mean" not in expected:
        assert "did you mean" not in message, message


@pytest.mark.parametrize(
    ("key", "text", "allowed"),
    [
        ("restore.face_batch", "lots", "expected a number"),
        ("restore.face_batch", "1.5", "expected a number"),
        ("restore.face_batch", "-1", "0 (auto) or a positive"),
        ("workers.images_in_flight", "-1", "0 (auto) or a positive"),
        ("workers.cpu_workers", "0", "at least 1"),
        ("restore.use_parse", "maybe", "expected true or false"),
        ("restore.precision", "FP16", "auto, fp32, fp16, bf16"),
        ("output.format", "gif", "same, jpeg, png, webp, tiff"),
        ("output.originals", "move", "archive, keep, delete"),
        ("workers.devices", "", "at least one device"),
        ("workers.devices", "gpu", "auto, cpu, cuda or cuda:N"),
        ("workers.devices", '["cuda:0",', "expected a list"),
    ],
)
def test_a_bad_override_names_the_key_and_what_is_allowed(
    tmp_path: Path, key: str, text: str, allowed: str
) -> None:
    message = refusal(tmp_path / "missing.toml", {key: text})
    assert message.startswith(f"{key}"), message
    assert allowed in message, message


def test_set_value_changes_one_setting_in_place() -> None:
    cfg = Config()
    config.set_value(cfg, "workers.cpu_workers", "4")
    config.set_value(cfg, "restore.device", "cuda:1")
    assert cfg.workers.cpu_workers == 4
    assert cfg.restore.device == "cuda:1"
    expected = Config()
    expected.workers.cpu_workers, expected.restore.device = 4, "cuda:1"
    assert cfg == expected
    with pytest.raises(ConfigError, match=re.escape("restore.nope")):
        config.set_value(cfg, "restore.nope", "1")
    assert cfg == expected  # a refused setting changes nothing


# --- writing ------------------------------------------------------------------------------------


def test_to_toml_loads_back_to_the_same_config(tmp_path: Path) -> None:
    cfg = config.load(write(tmp_path, FULL))
    # Paths with the characters TOML must escape.
    cfg.watch.outbox = Path('/data/we"ird\\name\nwith\tcontrol\x7f')
    cfg.restore.model_dir = None
    text = config.to_toml(cfg)
    assert config.load(write(tmp_path, text, "again.toml")) == cfg
    defaults = config.to_toml(Config())
    assert config.load(write(tmp_path, defaults, "defaults.toml")) == Config()


# --- `gpen-watch config` ------------------------------------------------------------------------


def gpen_watch(*args: str) -> subprocess.CompletedProcess:
    # os.environ already points HOME and XDG_* at temp folders (conftest's autouse fixture).
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-m", "gpen_watch", "config", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_cli_config_path_prints_the_users_config_file(isolated_user_dirs: Path) -> None:
    proc = gpen_watch("path")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(isolated_user_dirs / "config" / "gpen-watch" / "config.toml")
    assert Path(proc.stdout.strip()) == paths.config_file()


@pytest.mark.slow
def test_cli_config_init_writes_defaults_that_load_back_and_show_reflects_edits() -> None:
    path = paths.config_file()
    assert not path.exists()
    proc = gpen_watch("show")  # no file yet: the defaults
    assert proc.returncode == 0, proc.stderr
    assert tomllib.loads(proc.stdout)["restore"]["face_batch"] == 0
    assert not path.exists()  # showing writes nothing

    proc = gpen_watch("init")
    assert proc.returncode == 0, proc.stderr
    assert str(path) in proc.stdout
    assert config.load(path) == Config()

    # An existing file is never overwritten without --force.
    path.write_text(
        path.read_text(encoding="utf-8").replace("face_batch = 0", "face_batch = 16"), encoding="utf-8"
    )
    edited = path.read_text(encoding="utf-8")
    proc = gpen_watch("init")
    assert proc.returncode == 2  # the same form and status as every other command's refusal
    assert proc.stdout == ""
    assert proc.stderr == f"gpen-watch: error: {path} exists; use --force to overwrite it\n"
    assert path.read_text(encoding="utf-8") == edited

    proc = gpen_watch("show")
    assert proc.returncode == 0, proc.stderr
    assert "face_batch = 16" in proc.stdout
    shown = config.load(write(path.parent, proc.stdout, "shown.toml"))
    assert shown == config.load(path)
    assert shown.restore.face_batch == 16

    proc = gpen_watch("init", "--force")
    assert proc.returncode == 0, proc.stderr
    assert config.load(path) == Config()


@pytest.mark.slow
def test_cli_config_honours_an_explicit_config_file(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "mine.toml"
    assert gpen_watch("path", "--config", str(path)).stdout.strip() == str(path)
    proc = gpen_watch("init", "--config", str(path))
    assert proc.returncode == 0, proc.stderr
    assert config.load(path) == Config()
    assert not paths.config_file().exists()  # the user's own file was left alone
    path.write_text('[output]\nformat = "png"\n', encoding="utf-8")
    proc = gpen_watch("show", "--config", str(path))
    assert proc.returncode == 0, proc.stderr
    assert tomllib.loads(proc.stdout)["output"]["format"] == "png"


def test_cli_config_show_refuses_a_bad_file_with_its_name_and_the_setting(tmp_path: Path) -> None:
    path = write(tmp_path, '[output]\noriginals = "move"\n')
    proc = gpen_watch("show", "--config", str(path))
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"gpen-watch: error: {path}: output.originals: "), proc.stderr
    assert "archive, keep, delete" in proc.stderr


def test_cli_config_init_reports_an_unwritable_place_without_a_traceback(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder", encoding="utf-8")
    proc = gpen_watch("init", "--config", str(blocker / "config.toml"))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert (
        f"gpen-watch: error: {blocker / 'config.toml'}: cannot write config: {blocker} is a file, not a folder"
        in proc.stderr
    ), proc.stderr


@pytest.mark.parametrize(
    "command", [["run", "--no-tray"], ["restore", "photo.jpg", "-o", "out"], ["models", "path"]]
)
def test_a_config_file_named_on_the_command_line_must_exist(tmp_path: Path, command: list[str]) -> None:
    """A typo in --config must not run the service (or a batch) on defaults without a word."""
    missing = tmp_path / "typo.toml"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "gpen_watch", *command, "--config", str(missing)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert f"{missing}: config file not found" in proc.stderr
    # Without --config a missing default file still means the defaults.
    assert config.load(tmp_path / "absent.toml") == Config()


# --- the commented file ------------------------------------------------------------------------


def _uncommented(text: str) -> list[str]:
    return [line[2:] if line.startswith("# ") else line for line in text.splitlines()]


def test_config_init_writes_notes_and_every_line_stays_valid_uncommented(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    proc = gpen_watch("init", "--config", str(path))
    assert proc.returncode == 0, proc.stderr
    text = path.read_text(encoding="utf-8")
    assert config.load(path) == Config()
    for i, line in enumerate(_uncommented(text), 1):
        try:
            tomllib.loads(line)
        except tomllib.TOMLDecodeError as exc:
            raise AssertionError(f"line {i} with '# ' removed is not TOML: {line!r} ({exc})") from None
    # All of it uncommented at once still loads, to the same defaults.
    assert config.load(write(tmp_path, "\n".join(_uncommented(text)), "all.toml")) == Config()
    # Every setting has its note above it.
    lines = text.splitlines()
    for section in ("watch", "restore", "output", "workers"):
        for f in dataclasses.fields(getattr(Config(), section)):
            if f.name == "inboxes":
                continue
            at = next(i for i, line in enumerate(lines) if line.lstrip("# ").startswith(f"{f.name} = "))
            assert lines[at - 1].startswith("## "), (section, f.name)


def test_config_show_stays_valid_uncommented(tmp_path: Path) -> None:
    proc = gpen_watch("show")
    assert proc.returncode == 0, proc.stderr
    assert '# model_dir = ""' in proc.stdout
    assert config.load(write(tmp_path, "\n".join(_uncommented(proc.stdout)))) == Config()
