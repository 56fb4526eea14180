"""Per-inbox profiles in the config: an inbox's own restore.* and output.* settings over the global
ones, in both TOML forms, validated with the inbox named, reachable from the command line, and
written back by ``to_toml``."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_outbox import Env

from gpen_watch import config
from gpen_watch.base.errors import ConfigError
from gpen_watch.config import Config, InboxConfig
from gpen_watch.journal import hash_file
from gpen_watch.outbox import commit
from gpen_watch.restore.api import FileResult

TABLES = """\
[restore]
strength = 0.5
min_face = 10

[output]
jpeg_quality = 80

[[watch.inboxes]]
path = "~/Scans/old"
restore = { model = "GPEN-BFR-512", strength = 0.8 }
output = { format = "tiff" }

[[watch.inboxes]]
path = "~/Phone"
restore = { model = "GPEN-BFR-256" }
"""

INLINE = """\
[restore]
strength = 0.5
min_face = 10

[output]
jpeg_quality = 80

[watch]
inboxes = [
    { path = "~/Scans/old", restore = { model = "GPEN-BFR-512", strength = 0.8 }, output = { format = "tiff" } },
    { path = "~/Phone", restore = { model = "GPEN-BFR-256" } },
]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def refusal(path: Path, overrides: dict | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        config.load(path, overrides)
    return str(info.value)


@pytest.mark.parametrize("text", [TABLES, INLINE], ids=["array-of-tables", "inline-array"])
def test_both_forms_give_each_inbox_its_own_settings_over_the_global_ones(
    isolated_user_dirs: Path, tmp_path: Path, text: str
) -> None:
    cfg = config.load(write(tmp_path, text))
    old, phone = cfg.watch.inboxes
    assert old.path == isolated_user_dirs / "Scans" / "old"
    assert old.restore == {"model": "GPEN-BFR-512", "strength": 0.8}
    assert old.output == {"format": "tiff"}
    assert phone.restore == {"model": "GPEN-BFR-256"} and phone.output == {}

    eff_old, eff_phone = (config.inbox_config(cfg, i) for i in (old, phone))
    assert (eff_old.restore.model, eff_old.restore.strength, eff_old.output.format) == (
        "GPEN-BFR-512",
        0.8,
        "tiff",
    )
    # What an inbox does not set comes from [restore] / [output].
    assert (eff_phone.restore.model, eff_phone.restore.strength) == ("GPEN-BFR-256", 0.5)
    assert eff_old.restore.min_face == eff_phone.restore.min_face == 10
    assert eff_old.output.jpeg_quality == eff_phone.output.jpeg_quality == 80
    assert eff_phone.output.format == "same"
    # The global settings themselves are untouched by the profiles.
    assert (cfg.restore.model, cfg.restore.strength, cfg.output.format) == ("GPEN-BFR-512", 0.5, "same")
    # A job whose inbox is no longer configured gets the global settings.
    assert config.inbox_config(cfg, InboxConfig(tmp_path / "gone")) == cfg


def test_the_note_says_what_an_inbox_gets_that_the_global_settings_would_not(
    isolated_user_dirs: Path, tmp_path: Path
) -> None:
    cfg = config.load(write(tmp_path, TABLES))
    old, phone = cfg.watch.inboxes
    # model GPEN-BFR-512 is the global one too: not news.
    assert config.profile_note(cfg, old) == "strength 0.8, format tiff (inbox ~/Scans/old)"
    assert config.profile_note(cfg, phone) == "model GPEN-BFR-256 (inbox ~/Phone)"
    assert config.profile_note(cfg, InboxConfig(tmp_path)) == ""


@pytest.mark.parametrize(
    ("profile", "message"),
    [
        (
            "restore = { strength = 1.5 }",
            "watch.inboxes[1] (~/Phone): restore.strength: must be between 0 (leave faces as they are) and 1",
        ),
        (
            'output = { format = "gif" }',
            "watch.inboxes[1] (~/Phone): output.format: must be one of same, jpeg, png, webp, tiff, got 'gif'",
        ),
        (
            'restore = { model = "GPEN-BFR-9000" }',
            "watch.inboxes[1] (~/Phone): restore.model: must be one of",
        ),
        (
            "restore = { strenght = 0.5 }",
            "watch.inboxes[1] (~/Phone): restore.strenght: unknown setting; did you mean restore.strength?",
        ),
        (
            'output = { name_template = "{stem}-{nope}{ext}" }',
            "watch.inboxes[1] (~/Phone): output.name_template: unknown field {nope}",
        ),
        ("restore = 3", "watch.inboxes[1] (~/Phone): restore: expected a table, got 3"),
        (
            # Fine globally (upscale 1), wrong for this inbox's factor.
            'restore = { upscale = 2, upscale_model = "RealESRGAN-x4plus" }',
            "watch.inboxes[1] (~/Phone): restore.upscale_model: RealESRGAN-x4plus upscales x4",
        ),
    ],
)
def test_a_bad_profile_setting_names_the_file_the_inbox_and_the_setting(
    isolated_user_dirs: Path, tmp_path: Path, profile: str, message: str
) -> None:
    path = write(
        tmp_path, f'[[watch.inboxes]]\npath = "/a"\n\n[[watch.inboxes]]\npath = "~/Phone"\n{profile}\n'
    )
    got = refusal(path)
    assert got.startswith(f"{path}: {message}"), got


@pytest.mark.parametrize(
    "key",
    [
        "restore.device",
        "restore.memory_mb",
        "restore.model_dir",
        "restore.precision",
        "restore.channels_last",
        "restore.face_batch",
        "restore.max_megapixels",
    ],
)
def test_settings_one_worker_holds_for_every_inbox_are_refused_per_inbox(
    isolated_user_dirs: Path, tmp_path: Path, key: str
) -> None:
    section, name = key.split(".")
    path = write(tmp_path, f'[[watch.inboxes]]\npath = "~/Phone"\n{section} = {{ {name} = "x" }}\n')
    got = refusal(path)
    assert got.startswith(f"{path}: watch.inboxes[0] (~/Phone): {key}: cannot be set per inbox: "), got
    assert f"set it in [{section}]" in got
    # On the command line too.
    got = refusal(tmp_path / "none.toml", {f"watch.inboxes[0].{key}": "1"})
    assert "cannot be set per inbox" in got and key in got


def test_the_command_line_reaches_an_inbox_settings_by_its_place(
    isolated_user_dirs: Path, tmp_path: Path
) -> None:
    path = write(tmp_path, TABLES)
    cfg = config.load(
        path,
        {
            "watch.inboxes[1].restore.strength": "0.25",
            "watch.inboxes[0].output.format": "png",
            "watch.inboxes[0].output.jpeg_quality": "70",
            "watch.inboxes[1].recursive": "false",
        },
    )
    old, phone = cfg.watch.inboxes
    assert phone.restore == {"model": "GPEN-BFR-256", "strength": 0.25}
    assert old.output == {"format": "png", "jpeg_quality": 70}
    assert phone.recursive is False
    # An override's problem is the command line's, not the file's: no file name before it.
    assert refusal(path, {"watch.inboxes[1].restore.strength": "2"}).startswith(
        "watch.inboxes[1] (~/Phone): restore.strength: must be between"
    )
    assert "did you mean restore.strength?" in refusal(path, {"watch.inboxes[1].restore.strenth": "1"})
    assert "there is no inbox 2; watch.inboxes has 2" in refusal(
        path, {"watch.inboxes[2].restore.strength": "1"}
    )
    assert "expected a number" in refusal(path, {"watch.inboxes[0].restore.strength": "lots"})


def test_to_toml_writes_the_profiles_back(isolated_user_dirs: Path, tmp_path: Path) -> None:
    cfg = config.load(write(tmp_path, TABLES))
    cfg.watch.inboxes[1].output["archive_dir"] = tmp_path / 'we"ird'
    text = config.to_toml(cfg)
    assert 'restore = {model = "GPEN-BFR-256"}' in text
    again = tmp_path / "again.toml"
    again.write_text(text, encoding="utf-8")
    assert config.load(again) == cfg
    assert config.load(write(tmp_path, config.to_toml(Config()))) == Config()


def test_the_model_gate_needs_every_model_an_inbox_names_and_says_which_inbox(
    isolated_user_dirs: Path, tmp_path: Path
) -> None:
    """A model only one inbox names is needed like the global ones: its absence holds the workers
    (they would fail on that inbox's first photo) and the message names the inbox."""
    import torch

    from gpen_watch.catalog import registry
    from gpen_watch.modelstore import messages, needs
    from gpen_watch.service.model_gate import GateState, ModelGate

    models = tmp_path / "models"
    models.mkdir()
    mine = tmp_path / "my-gpen.pth"
    for spec in (registry.get_spec("GPEN-BFR-512"), registry.detector_spec("retinaface_mobile0.25")):
        torch.save({"w": torch.zeros(4)}, models / spec.filename)
    path = write(
        tmp_path,
        f'[restore]\nmodel_dir = "{models}"\ndetector = "retinaface_mobile0.25"\nuse_parse = false\n\n'
        f'[[watch.inboxes]]\npath = "/a"\n\n[[watch.inboxes]]\npath = "~/Phone"\nrestore = {{ model = "{mine}" }}\n',
    )
    cfg = config.load(path)
    profiles = config.inbox_profiles(cfg)
    assert [label for label, _ in profiles] == ["watch.inboxes[1] (~/Phone)"]
    # The global settings alone have everything they need.
    assert needs.check(cfg.restore).ready
    result = needs.check(cfg.restore, profiles=profiles)
    assert [(f.need.role, f.state.value, f.need.owner) for f in result.files] == [
        ("generator", "present", ""),
        ("detector", "present", ""),
        ("generator", "missing", "watch.inboxes[1] (~/Phone)"),
    ]
    assert messages.missing_block(result).startswith(
        f"model file missing\n  {mine} (watch.inboxes[1] (~/Phone): restore.model: no such file)\n"
    )
    gate = ModelGate(cfg.restore, lambda: None, profiles=profiles)
    try:
        assert gate.start() is False
        assert gate.state is GateState.WAITING
        problem = gate.problem() or ""
        assert "watch.inboxes[1] (~/Phone): restore.model: no such file" in problem
        torch.save({"w": torch.zeros(4)}, mine)
        # Looked at again on the gate's next check: the workers may start.
        assert needs.check(cfg.restore, profiles=profiles).ready
    finally:
        gate.close()


def test_a_jobs_inbox_decides_its_output_settings_and_a_removed_inbox_falls_back(tmp_path: Path) -> None:
    """The output settings are applied where the service applies them (prepare, commit, the
    original's disposal), looked up from the job's inbox in the journal."""
    env = Env(tmp_path, originals="archive")
    phone = tmp_path / "Phone"
    phone.mkdir()
    env.cfg.watch.inboxes.append(
        InboxConfig(
            phone,
            restore={"strength": 0.25},
            output={"format": "png", "name_template": "{stem}-phone{ext}", "originals": "keep"},
        )
    )
    config.validate(env.cfg)
    plain = env.drop("a.jpg")
    st_path = phone / "b.jpg"
    st_path.write_bytes(b"another photo")
    st = st_path.stat()
    own = env.journal.add(st_path, phone, "b.jpg", st.st_size, st.st_mtime, hash_file(st_path)).job.id
    env.journal.claim_batch(2, "w0")
    a = commit.file_job(env.journal, plain, env.cfg)
    b = commit.file_job(env.journal, own, env.cfg)
    assert (a.format, a.restore, a.note) == ("same", None, "")
    assert (b.format, b.restore is not None and b.restore.strength, b.note) == (
        "png",
        0.25,
        f"strength 0.25, format png, name_template {{stem}}-phone{{ext}}, originals keep (inbox {phone})",
    )
    assert b.restore is not None and b.restore.model == env.cfg.restore.model  # the rest: global
    assert b.dst.name.startswith(".b-phone.png")
    for fj in (a, b):
        fj.dst.write_bytes(b"restored")

    out_b = commit.commit(env.journal, own, FileResult(b.src, True, b.dst, format="PNG"), env.cfg)
    assert out_b.output is not None and out_b.output.name == "b-phone.png"
    assert out_b.original is not None and out_b.original.action == "kept"
    # The inbox was removed from the config before A's photo was done: the global settings.
    env.cfg.watch.inboxes[:] = [InboxConfig(phone, output={"originals": "keep"})]
    out_a = commit.commit(env.journal, plain, FileResult(a.src, True, a.dst, format="JPEG"), env.cfg)
    assert out_a.original is not None and out_a.original.action == "archived"


def test_models_fetch_and_list_include_the_models_an_inbox_names(
    isolated_user_dirs: Path, tmp_path: Path
) -> None:
    """`gpen-watch models fetch` (no names) gets what the configuration needs, for an offline
    machine's setup: an inbox's own model is part of that."""
    import os
    import subprocess
    import sys

    import torch

    from gpen_watch.catalog import registry

    models = tmp_path / "models"
    models.mkdir()
    for name in ("GPEN-BFR-512", "GPEN-BFR-256", "RetinaFace-R50", "ParseNet"):
        torch.save({"w": torch.zeros(4)}, models / registry.get_spec(name).filename)
    mine = tmp_path / "mine.pth"
    path = write(
        tmp_path,
        f'[restore]\nmodel_dir = "{models}"\n\n[[watch.inboxes]]\npath = "/a"\n\n'
        f'[[watch.inboxes]]\npath = "~/Phone"\nrestore = {{ model = "GPEN-BFR-256" }}\n\n'
        f'[[watch.inboxes]]\npath = "/c"\nrestore = {{ model = "{mine}" }}\n',
    )
    repo = Path(__file__).resolve().parents[1]
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(repo), os.environ.get("PYTHONPATH")) if p)
    )

    def models_cli(*args: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-m", "gpen_watch", "models", *args, "--config", str(path)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    fetched = models_cli("fetch", "--no-progress")
    assert f"GPEN-BFR-256: present at {models / registry.get_spec('GPEN-BFR-256').filename}" in fetched
    assert (
        f"generator: watch.inboxes[2] (/c): restore.model is the file {mine} (MISSING); not downloaded"
        in fetched
    )
    listed = models_cli("list")
    assert "GPEN-BFR-256 (used by the configuration)" in listed


def test_inbox_on_the_command_line_keeps_the_profile_the_file_gives_that_folder(
    isolated_user_dirs: Path, tmp_path: Path
) -> None:
    from gpen_watch import cli
    from gpen_watch.cli import run as run_cli

    phone = Path.home() / "Phone"
    phone.mkdir(parents=True)
    # The same folder by another spelling: through a link, and with a detour.
    link = tmp_path / "phone-link"
    link.symlink_to(phone)
    new = tmp_path / "new"
    path = write(tmp_path, TABLES)
    args = cli.build_parser().parse_args(
        ["run", "--inbox", str(link), "--inbox", str(new), "--inbox", str(phone / ".." / "Phone")]
    )
    cfg = config.load(path, run_cli.overrides(args))
    linked, fresh, detour = cfg.watch.inboxes
    assert linked.restore == detour.restore == {"model": "GPEN-BFR-256"}
    assert config.inbox_config(cfg, linked).restore.model == "GPEN-BFR-256"
    # A folder the file does not list gets the global settings; ~/Scans/old, not named, is not watched.
    assert fresh == InboxConfig(new)
    assert config.inbox_config(cfg, fresh).restore == cfg.restore
    assert len(cfg.watch.inboxes) == 3
    # An inbox written out in full on the command line is taken as written.
    cfg = config.load(path, {"watch.inboxes": f'[{{path = "{phone}", restore = {{strength = 0.1}}}}]'})
    assert cfg.watch.inboxes[0].restore == {"strength": 0.1}


def test_a_bad_setting_of_a_profile_kept_for_inbox_names_the_file(
    isolated_user_dirs: Path, tmp_path: Path
) -> None:
    path = write(
        tmp_path,
        '[[watch.inboxes]]\npath = "~/Scans/old"\noutput = { format = "tiff" }\n\n'
        '[[watch.inboxes]]\npath = "~/Phone"\nrestore = { strength = 2.0 }\n',
    )
    # ~/Phone is the file's second inbox, and the first (the only one) of the command line's: the
    # setting is still the file's.
    got = refusal(path, {"watch.inboxes": str(Path.home() / "Phone")})
    assert got.startswith(f"{path}: watch.inboxes[0] (~/Phone): restore.strength: must be between"), got
    # Set on the command line instead: the command line's, not the file's.
    got = refusal(
        path, {"watch.inboxes": str(Path.home() / "Phone"), "watch.inboxes[0].restore.strength": "3"}
    )
    assert got.startswith("watch.inboxes[0] (~/Phone): restore.strength: must be between"), got
