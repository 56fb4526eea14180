"""The Settings page's words: every setting has a label a person reads beside its key, and every
section a heading and a line, so a setting added to the schema cannot go unlabelled."""

from __future__ import annotations

from gpen_watch.config import edit
from gpen_watch.dashboard import setting_labels
from gpen_watch.dashboard.settings_page import SECTIONS


def test_every_setting_has_a_label_and_every_section_its_words() -> None:
    names = list(edit.global_fields()) + [
        f"watch.inboxes.{key}" for key in edit.inbox_fields() if "." not in key
    ]
    missing = [name for name in names if name not in setting_labels.LABELS]
    assert missing == []
    assert set(setting_labels.LABELS) == set(names)  # and none for a setting that is gone
    assert set(setting_labels.SECTIONS) == set(SECTIONS)


def test_an_inboxs_own_setting_is_labelled_as_the_global_one() -> None:
    assert setting_labels.label("watch.inboxes[2].restore.strength") == "Strength"
    assert setting_labels.label("watch.inboxes[0].path") == "Folder"
    assert setting_labels.label("watch.settle_seconds") == "Wait before taking a file (s)"
