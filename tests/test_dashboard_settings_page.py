"""The dashboard's Settings page: the form edits the service's own TOML file through tomlkit
(comments and order kept), the file's own checks refuse a bad value with the file's sentence, and
the service reads the file again (``reload``) and restarts its workers when a setting needs it.

The first tests call config.edit and the page's classification in-process; the rest run a real
`gpen-watch run` with its dashboard and the stand-in restorer (slow)."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest
from dashboard_client import Dashboard, Reply, served_dashboard, wait_for
from service_harness import ServiceProcess, write_atomic

from gpen_watch import config
from gpen_watch.base.errors import ConfigError
from gpen_watch.config import applies, docs, edit
from gpen_watch.service import reload

USER_FILE = """\
# My gpen-watch settings: phone photos are softer.
[watch]
# results for the family album
outbox = "{outbox}"
settle_seconds = 0.2  # the copier is quick

[[watch.inboxes]]
path = "{inbox}"  # the phone's folder
restore = {{strength = 0.9}}

[restore]
# the small model is quick on this laptop
model = "GPEN-BFR-512"
"""


def user_file(root: Path) -> tuple[Path, str]:
    path = root / "my-settings.toml"
    text = USER_FILE.format(inbox=root / "inbox", outbox=root / "outbox")
    path.write_text(text, encoding="utf-8")
    return path, text


# --- in-process -----------------------------------------------------------------------------------


def test_settings_page_classification_covers_every_setting() -> None:
    names = docs.setting_names()
    assert {applies.applies(n) for n in names} == set(applies.Applies)
    for name in names:
        applies.applies(name)  # a KeyError here: a section without its line in applies.APPLIES
    assert applies.applies("watch.inboxes[2].restore.strength") is applies.Applies.WORKERS
    assert applies.applies("watch.inboxes[0].output.format") is applies.Applies.AT_ONCE
    assert applies.applies("dashboard.port") is applies.Applies.SERVICE
    # Every setting the form shows has its one-line description.
    assert set(edit.global_fields()) <= set(docs.DESCRIPTIONS)
    assert {f"watch.inboxes.{k}" for k in edit.inbox_fields() if "." not in k} <= set(docs.DESCRIPTIONS)


def test_a_setting_that_applies_otherwise_than_its_section_says_so_on_its_row() -> None:
    from gpen_watch.dashboard.settings_page import SettingsPage, Shown

    cfg = config.Config()
    page = SettingsPage(site=None, source=None, current=lambda: cfg)  # type: ignore[arg-type]
    (workers,) = [s for s in page.sections(cfg, Shown()) if s.title == "workers"]
    assert workers.applies == applies.Applies.WORKERS.value
    rows = {r.name: r for r in workers.rows}
    # Quiet hours and the battery are read before each claim: no worker restarts for them.
    assert rows["workers.schedule"].applies == applies.Applies.AT_ONCE.value
    assert rows["workers.pause_on_battery"].applies == applies.Applies.AT_ONCE.value
    assert rows["workers.devices"].applies == ""


def test_settings_page_edit_keeps_comments_order_and_leaves_defaults_out(tmp_path: Path) -> None:
    _, text = user_file(tmp_path)
    form = {
        "restore.strength": "0.5",
        "restore.model": "GPEN-BFR-512",  # in the file: stays, unchanged
        "restore.detector": "retinaface_resnet50",  # the default, not in the file: not added
        "output.jpeg_quality": "95",  # the default: not added
        "watch.inboxes[0].restore.strength": "0.3",
        "watch.inboxes[0].output.format": "png",
    }
    new = edit.apply_form(text, form, inboxes=1)
    for line in text.splitlines():
        if "strength = 0.9" not in line:
            assert line in new  # every comment and setting line of the user's is still there
    assert "detector" not in new and "jpeg_quality" not in new
    assert "restore = {strength = 0.3, output = " not in new
    cfg = config.from_text(new, tmp_path / "x.toml")
    assert cfg.restore.strength == 0.5
    assert cfg.watch.inboxes[0].restore == {"strength": 0.3}
    assert cfg.watch.inboxes[0].output == {"format": "png"}
    # A blank profile value: the inbox follows the global setting again.
    back = edit.apply_form(new, {"watch.inboxes[0].restore.strength": ""}, inboxes=1)
    assert config.from_text(back, tmp_path / "x.toml").watch.inboxes[0].restore == {}


def test_settings_page_edit_of_no_file_and_of_a_list_of_paths(tmp_path: Path) -> None:
    # No file yet (the default one): only what differs from the defaults is written.
    assert edit.apply_form("", {"restore.strength": "0.5", "restore.faces": "all"}, inboxes=1) == (
        "[restore]\nstrength = 0.5\n"
    )
    # Adding to the default inbox keeps it: the file lists both.
    both = config.from_text(edit.add_inbox("", str(tmp_path / "scans")), tmp_path / "x.toml")
    assert [i.path for i in both.watch.inboxes] == [config.default_inbox(), tmp_path / "scans"]
    # Inboxes written as a list of paths become tables where one is given settings of its own.
    listed = f'[watch]\ninboxes = ["{tmp_path / "a"}", "{tmp_path / "b"}"]  # two\n'
    new = edit.apply_form(listed, {"watch.inboxes[1].output.format": "png"}, inboxes=2)
    cfg = config.from_text(new, tmp_path / "x.toml")
    assert [i.path for i in cfg.watch.inboxes] == [tmp_path / "a", tmp_path / "b"]
    assert cfg.watch.inboxes[1].output == {"format": "png"} and cfg.watch.inboxes[0].output == {}
    gone = config.from_text(edit.remove_inbox(listed, 0, inboxes=2), tmp_path / "x.toml")
    assert [i.path for i in gone.watch.inboxes] == [tmp_path / "b"]


def page_form(inboxes: list[str], changed: dict[str, str] | None = None) -> dict[str, str]:
    """Every field the Settings page sends for ``inboxes`` left as they are (the path shown, the
    other fields blank or at the value shown), with ``changed`` on top."""
    form: dict[str, str] = {}
    for i, path in enumerate(inboxes):
        form.update({f"watch.inboxes[{i}].{key}": "" for key in edit.inbox_fields()})
        form[f"watch.inboxes[{i}].path"] = path
        form[f"watch.inboxes[{i}].recursive"] = "true"
    form.update(changed or {})
    return form


def test_settings_page_save_writes_no_inbox_the_user_left_as_it_was(tmp_path: Path) -> None:
    default = config.short_path(config.default_inbox())
    # No file yet, or one without inboxes: the default inbox stays implied, not written out.
    assert edit.apply_form("", page_form([default], {"restore.strength": "0.5"}), inboxes=1) == (
        "[restore]\nstrength = 0.5\n"
    )
    own = f'[watch]\noutbox = "{tmp_path / "out"}"\n'
    assert edit.apply_form(own, page_form([default]), inboxes=1) == own
    # Inboxes listed as paths stay a list of paths.
    listed = f'[watch]\ninboxes = ["{tmp_path / "a"}", "{tmp_path / "b"}"]  # two\n'
    assert edit.apply_form(listed, page_form([str(tmp_path / "a"), str(tmp_path / "b")]), inboxes=2) == listed
    # A change to the default inbox does write it, with that change alone.
    changed = edit.apply_form("", page_form([default], {"watch.inboxes[0].restore.strength": "0.3"}), 1)
    cfg = config.from_text(changed, tmp_path / "x.toml")
    assert [i.path for i in cfg.watch.inboxes] == [config.default_inbox()]
    assert cfg.watch.inboxes[0].restore == {"strength": 0.3}


@pytest.mark.parametrize(
    ("form", "said"),
    [
        ({"restore.nonsense": "1"}, "'restore.nonsense' is not a setting this page can change"),
        ({"watch.inboxes[7].restore.strength": "1"}, "'watch.inboxes[7].restore.strength' is not a setting"),
        ({"restore.device.x": "1"}, "not a setting this page can change"),
        ({"watch.inboxes[0].restore.device": "cpu"}, "not a setting this page can change"),
        ({"restore[0]": "1"}, "not a setting this page can change"),
        ({"restore.model_dir": "/tmp/../etc"}, "restore.model_dir: '/tmp/../etc' is not a whole path"),
        ({"watch.outbox": "relative/out"}, "watch.outbox: 'relative/out' is not a whole path"),
        ({"output.name_template": "x" * 5000}, "a setting takes at most 4096"),
        ({"output.name_template": "a\nb"}, "contains a control character"),
    ],
)
def test_settings_page_edit_refuses_a_hostile_form(tmp_path: Path, form: dict[str, str], said: str) -> None:
    _, text = user_file(tmp_path)
    with pytest.raises(ConfigError, match=re.escape(said)):
        edit.apply_form(text, form, inboxes=1)


def test_settings_page_reload_plan_names_what_changed() -> None:
    old = config.Config()
    new = config.from_text(
        '[output]\nformat = "png"\n[restore]\nstrength = 0.5\n[dashboard]\nport = 1234\n', Path("x.toml")
    )
    plan = reload.Plan(tuple(reload.changed(old, new)))
    assert plan.of(applies.Applies.AT_ONCE) == ["output.format"]
    assert plan.of(applies.Applies.WORKERS) == ["restore.strength"]
    assert plan.of(applies.Applies.SERVICE) == ["dashboard.port"]
    assert plan.workers and not plan.watcher
    kept = reload.kept_running(old, new, pool_fixed=False)
    assert kept.dashboard.port == old.dashboard.port and kept.restore.strength == 0.5


def test_settings_page_reload_summary_says_what_applies_when() -> None:
    reply = {
        "changed": ["restore.strength", "dashboard.port"],
        "workers_restart": True,
        "later": ["dashboard.port"],
    }
    assert reload.summary(reply) == (
        "restore.strength, dashboard.port; the workers restart; dashboard.port apply after a restart of the service"
    )
    assert reload.summary({"ok": True, "changed": []}) == "nothing changed"


# --- through the real service ----------------------------------------------------------------------


def post_form(dash: Dashboard, path: str, fields: dict[str, str]) -> Reply:
    body = urlencode(fields).encode()
    return dash.post(path, {"Content-Type": "application/x-www-form-urlencoded"}, body)


def post_form_bytes(dash: Dashboard, body: bytes) -> Reply:
    return dash.post("/settings", {"Content-Type": "application/x-www-form-urlencoded"}, body)


def inbox_form(reply: Reply, index: int) -> str:
    return reply.text.split(f'id="inbox-{index}"')[1].split("</fieldset>")[0]


def page_error(reply: Reply) -> str:
    found = re.search(r'id="settings-error">(.*?)</p>', reply.text, re.S)
    assert found, reply.text[:2000]
    return html.unescape(found[1]).strip()


@pytest.fixture
def dash(tmp_path: Path) -> Iterator[tuple[Dashboard, Path]]:
    path, _ = user_file(tmp_path)
    with served_dashboard(tmp_path, "--config", str(path)) as d:
        yield d, path


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_settings_page_saves_keeping_comments_and_refuses_a_bad_value_with_the_files_sentence(
    dash: tuple[Dashboard, Path],
) -> None:
    d, path = dash
    shown = d.get("/settings")
    assert shown.status == 200
    assert (
        'name="restore.strength"' in shown.text and 'name="watch.inboxes[0].restore.strength"' in shown.text
    )
    assert docs.DESCRIPTIONS["restore.strength"].note in html.unescape(shown.text)
    assert "the workers restart" in shown.text and "after a restart of the service" in shown.text
    # --inbox and --outbox on the service's command line: the page says they win over the file.
    assert "The service&#39;s command line sets this" in inbox_form(shown, 0)
    outbox_row = shown.text.split('name="watch.outbox"')[1].split('class="setting')[0]
    assert "The service&#39;s command line sets this" in outbox_row
    assert (
        "command line sets this"
        not in shown.text.split('name="restore.strength"')[1].split('class="setting')[0]
    )

    before = path.read_text(encoding="utf-8")
    bad = post_form(d, "/settings", {"restore.strength": "1.5"})
    assert bad.status == 400
    assert path.read_text(encoding="utf-8") == before  # nothing written
    # The sentence the file itself would get with that value:
    path.write_text(before.replace('model = "GPEN-BFR-512"', 'model = "GPEN-BFR-512"\nstrength = 1.5'))
    with pytest.raises(ConfigError) as from_file:
        config.load(path)
    path.write_text(before)
    assert page_error(bad) == str(from_file.value)
    # What was typed stays in the form, marked, so that it can be corrected.
    typed = bad.text.split('name="restore.strength"')[1].split(">")[0]
    assert 'value="1.5"' in typed and 'aria-invalid="true"' in typed
    assert '<a href="#f-restore-strength" class="to-setting">' in bad.text

    not_a_number = post_form(d, "/settings", {"watch.inboxes[0].restore.strength": "soft"})
    typed = not_a_number.text.split('name="watch.inboxes[0].restore.strength"')[1].split(">")[0]
    assert 'value="soft"' in typed and 'aria-invalid="true"' in typed
    assert not_a_number.status == 400 and "restore.strength: expected a number, got 'soft'" in page_error(
        not_a_number
    )
    hostile = post_form(
        d, "/settings", {"restore.strength": "0.5", "cluster.token_file": "/x/../../etc/passwd"}
    )
    assert hostile.status == 400 and "not a whole path" in page_error(hostile)
    assert path.read_text(encoding="utf-8") == before

    # The guard's rules hold for the page: no cross-site post, no body over 64 kB.
    form = urlencode({"restore.strength": "0.5"}).encode()
    kind = {"Content-Type": "application/x-www-form-urlencoded"}
    assert d.raw("POST", "/settings", {"Origin": "http://evil.example", **kind}, form).status == 403
    assert d.raw("POST", "/settings", {"Origin": "null", **kind}, form).status == 403
    huge = urlencode({"output.name_template": "x" * (70 << 10)}).encode()
    assert post_form_bytes(d, huge).status == 413
    assert d.raw("GET", "/settings", signed_in=False).status == 401
    assert path.read_text(encoding="utf-8") == before

    ok = post_form(d, "/settings", {"output.jpeg_quality": "80", "restore.model": "GPEN-BFR-512"})
    assert ok.status == 200, ok.text[:2000]
    after = path.read_text(encoding="utf-8")
    assert after == before.replace(
        'model = "GPEN-BFR-512"\n', 'model = "GPEN-BFR-512"\n\n[output]\njpeg_quality = 80\n'
    )
    assert config.load(path).output.jpeg_quality == 80

    # The command line still wins after the service read the file again: --set watch.settle_seconds=0.2.
    slower = post_form(d, "/settings", {"watch.settle_seconds": "5"})
    assert slower.status == 200 and "settle_seconds = 5  # the copier is quick" in path.read_text(
        encoding="utf-8"
    )
    row = slower.text.split('name="watch.settle_seconds"')[1].split('class="setting')[0]
    assert 'value="5.0"' in row and "The service&#39;s command line sets this to 0.2" in row

    # A file whose [restore] is no table: its own sentence, and the file left as it is.
    broken = '# mine\nrestore = "soft"\n'
    path.write_text(broken, encoding="utf-8")
    refused = post_form(d, "/settings", {"restore.strength": "0.5"})
    assert refused.status == 400
    assert (
        page_error(refused)
        == f"{path}: restore: expected a table, got 'soft'; fix the file in an editor, then save again"
    )
    assert path.read_text(encoding="utf-8") == broken


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_settings_page_inbox_strength_restarts_the_workers_and_the_next_photo_uses_it(
    dash: tuple[Dashboard, Path],
) -> None:
    d, path = dash
    pids = {w["pid"] for w in d.status()["workers"]}
    ok = post_form(d, "/settings", {"watch.inboxes[0].restore.strength": "0.3"})
    assert ok.status == 200, ok.text[:2000]
    assert "The workers restart" in ok.text
    assert "restore = {strength = 0.3}" in path.read_text(encoding="utf-8")
    d.wait(
        lambda s: (
            bool(s["workers"])
            and all(w["state"] in ("idle", "busy") for w in s["workers"])
            and not pids & {w["pid"] for w in s["workers"]}
        ),
        60,
        "new workers",
    )
    # The same command from the CLI's control channel: the file did not change since.
    assert d.control("reload") == {"ok": True, "changed": [], "workers_restart": False, "later": []}
    write_atomic(d.svc.inbox / "after-save.png", b"any bytes")
    d.wait(lambda s: s["queue"]["done"] >= 1, 60, "the photo done")
    photos = d.get("/api/results").json()["photos"]
    assert "strength=0.3" in photos[0]["notes"], photos[0]


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_settings_page_worker_restart_lets_the_photo_in_flight_finish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = tmp_path / "started"
    started.mkdir()
    monkeypatch.setenv("FAKE_SLOW", "3")
    monkeypatch.setenv("FAKE_SLOW_STARTED", str(started))
    path, _ = user_file(tmp_path)
    with served_dashboard(tmp_path, "--config", str(path)) as d:
        write_atomic(d.svc.inbox / "slow-portrait.png", b"any bytes")
        wait_for(lambda: (started / "slow-portrait.png").exists(), 30, "the slow photo started")
        ok = post_form(d, "/settings", {"restore.strength": "0.6"})
        assert ok.status == 200 and "The workers restart" in ok.text, ok.text[:2000]
        s = d.wait(lambda s: s["queue"]["done"] >= 1, 60, "the photo in flight done")
        assert s["queue"]["failed"] == 0
        first = d.get("/api/results").json()["photos"][0]
        assert first["name"] == "slow-portrait.png" and "strength=0.9" in first["notes"]  # the old settings
        write_atomic(d.svc.inbox / "next.png", b"other bytes")
        d.wait(lambda s: s["queue"]["done"] >= 2, 60, "the next photo done")
        photos = {p["name"]: p for p in d.get("/api/results").json()["photos"]}
        # The inbox's own 0.9 still wins over the new global 0.6: the restart kept the profile.
        assert "strength=0.9" in photos["next.png"]["notes"]


class FolderlessService(ServiceProcess):
    """The service with no --inbox on its command line: its inboxes come from the file alone."""

    def command(self) -> list[str]:
        cmd = super().command()
        at = cmd.index("--inbox")
        return cmd[:at] + cmd[at + 2 :]


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_settings_page_adds_and_removes_an_inbox(tmp_path: Path) -> None:
    path, before = user_file(tmp_path)
    second = tmp_path / "scanner"
    with served_dashboard(tmp_path, "--config", str(path), service=FolderlessService) as d:
        assert "command line sets this" not in inbox_form(d.get("/settings"), 0)  # the file's own inboxes
        refused = post_form(d, "/settings/inbox/add", {"path": "scans/../../x"})
        assert refused.status == 400 and "not a whole path" in page_error(refused)
        # The outbox as an inbox: the sentence `gpen-watch run` would give, before anything is saved.
        own_outbox = post_form(d, "/settings/inbox/add", {"path": str(d.svc.outbox)})
        assert own_outbox.status == 400 and "is both an inbox and the outbox" in page_error(own_outbox)
        assert path.read_text(encoding="utf-8") == before
        added = post_form(d, "/settings/inbox/add", {"path": str(second)})
        assert added.status == 200, added.text[:2000]
        text = path.read_text(encoding="utf-8")
        assert "# the phone's folder" in text and f'path = "{second}"' in text
        d.wait(lambda s: str(second) in s["inboxes"], 30, "the new inbox watched")
        write_atomic(second / "scanned.png", b"any bytes")
        d.wait(lambda s: s["queue"]["done"] >= 1, 60, "the scanned photo done")

        removed = post_form(d, "/settings/inbox/remove", {"index": "1"})
        assert removed.status == 200, removed.text[:2000]
        assert str(second) not in path.read_text(encoding="utf-8")
        d.wait(lambda s: str(second) not in s["inboxes"], 30, "the inbox no longer watched")
        assert second.is_dir()  # its folder stays
        write_atomic(second / "ignored.png", b"any bytes")
        write_atomic(d.svc.inbox / "still-watched.png", b"any bytes")
        d.wait(lambda s: s["queue"]["done"] >= 2, 60, "the first inbox's photo done")
        assert (second / "ignored.png").exists()

        last = post_form(d, "/settings/inbox/remove", {"index": "0"})
        assert last.status == 400 and "watch.inboxes: needs at least one folder" in page_error(last)
