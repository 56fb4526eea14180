"""Each setting is described once: the schema says which settings exist, ``config.docs`` what they
mean, and both ``config init``'s notes and docs/settings.md's table come from there."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from gpen_watch.config import Config, InboxConfig
from gpen_watch.config import docs as config_docs
from gpen_watch.config.template import commented_toml

REPO = Path(__file__).resolve().parents[1]
SETTINGS_PAGE = REPO / "docs" / "settings.md"


def schema_names() -> set[str]:
    names = {
        f"{section.name}.{f.name}"
        for section in dataclasses.fields(Config)
        for f in dataclasses.fields(getattr(Config(), section.name))
    }
    return names | {f"watch.inboxes.{f.name}" for f in dataclasses.fields(InboxConfig)}


def test_every_setting_of_the_schema_has_one_description_and_no_description_names_a_missing_one() -> None:
    described = set(config_docs.DESCRIPTIONS)
    assert sorted(schema_names() - described) == [], "settings without a description"
    assert sorted(described - schema_names()) == [], "descriptions of settings that do not exist"
    assert set(config_docs.setting_names()) == schema_names()
    for name, d in config_docs.DESCRIPTIONS.items():
        assert "\n" not in d.note, f"{name}: config init writes the note on one line"


def test_the_settings_page_holds_exactly_the_table_the_schema_renders() -> None:
    page = SETTINGS_PAGE.read_text(encoding="utf-8")
    assert config_docs.with_table(page) == page, (
        "docs/settings.md's table differs from the schema's: run `python -m gpen_watch.config.docs --write`"
    )
    table = page.split(config_docs.BEGIN, 1)[1].split(config_docs.END, 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == config_docs.setting_names()


def test_the_table_shows_the_schemas_defaults() -> None:
    rows = {
        row.split("`")[1]: row for row in config_docs.settings_table().splitlines() if row.startswith("| `")
    }
    assert "| `GPEN-BFR-512` |" in rows["restore.model"]
    assert "| `0.9` |" in rows["restore.detect_threshold"]
    assert '| `["auto"]` |' in rows["workers.devices"]
    assert "| (unset) |" in rows["restore.model_dir"]
    assert "| `auto` |" in rows["watch.polling"]
    assert '| `""` |' in rows["cluster.address"]


def test_config_init_writes_each_settings_description_above_it() -> None:
    lines = commented_toml(Config()).splitlines()
    for name, d in config_docs.DESCRIPTIONS.items():
        assert f"## {d.note}" in lines, name
    # The note sits right above its own setting.
    at = next(i for i, line in enumerate(lines) if line.startswith("detect_threshold = "))
    assert lines[at - 1] == f"## {config_docs.DESCRIPTIONS['restore.detect_threshold'].note}"


def test_write_replaces_only_the_text_between_the_markers(tmp_path: Path) -> None:
    page = tmp_path / "settings.md"
    page.write_text(f"# Settings\n\nbefore\n\n{config_docs.BEGIN}stale\n{config_docs.END}\nafter\n")
    assert config_docs.main(["--write", str(page)]) == 0
    text = page.read_text()
    assert text.startswith("# Settings\n\nbefore\n\n")
    assert text.endswith(f"{config_docs.END}\nafter\n")
    assert "stale" not in text
    assert config_docs.settings_table() in text
