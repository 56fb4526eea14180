"""What a running service shows after `gpen-watch reload` is what it runs with: a photo's page names
the settings its run really used (recorded with its result), never a copy of the settings the
dashboard, the tray or the notice thread started with."""

from __future__ import annotations

import dataclasses
import html
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from dashboard_client import Dashboard, served_dashboard
from service_harness import write_atomic

from gpen_watch.config import RestoreConfig, SettingsUsed

SETTINGS = """\
[watch]
outbox = "{outbox}"
settle_seconds = 0.2

[[watch.inboxes]]
path = "{inbox}"

[restore]
model = "{model}"
model_dir = "{model_dir}"
detector = "retinaface_mobile0.25"
use_parse = false
device = "cpu"
face_batch = 4
strength = {strength}
"""


def notes(d: Dashboard, job_id: int) -> dict[str, str]:
    """The photo page's notes, label -> value (the first of each label)."""
    page = d.get(f"/photo/{job_id}")
    assert page.status == 200, page.text[:2000]
    block = page.text.split('<dl class="notes">', 1)[1].split("</dl>", 1)[0]
    found: dict[str, str] = {}
    for label, value in re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", block, re.S):
        found.setdefault(html.unescape(label), html.unescape(re.sub(r"<[^>]+>", "", value)).strip())
    return found


def done_job(d: Dashboard, name: str) -> dict[str, Any]:
    d.wait(
        lambda s: any(p["name"] == name for p in d.get("/api/results").json()["photos"]),
        60,
        f"{name} done",
    )
    (photo,) = [p for p in d.get("/api/results").json()["photos"] if p["name"] == name]
    assert photo["state"] == "done", photo
    return photo


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_photo_page_names_the_model_a_run_used_after_a_reload(
    tmp_path: Path, tiny_models: Any, grace_hopper_path: Path
) -> None:
    # Two model files: the reload names the second; the page of each run names its own.
    first = tiny_models.gpen
    second = tmp_path / "other-gpen-64.pth"
    shutil.copyfile(first, second)
    path = tmp_path / "settings.toml"

    def write(model: Path, strength: float) -> None:
        path.write_text(
            SETTINGS.format(
                inbox=tmp_path / "inbox",
                outbox=tmp_path / "outbox",
                model=model,
                model_dir=tiny_models.model_dir,
                strength=strength,
            ),
            encoding="utf-8",
        )

    write(first, 0.5)
    photo = grace_hopper_path.read_bytes()
    with served_dashboard(tmp_path, "--config", str(path), restorer=None) as d:
        write_atomic(d.svc.inbox / "before.jpg", photo)
        before = done_job(d, "before.jpg")
        assert notes(d, before["id"])["Model"] == first.name

        write(second, 0.8)
        pids = {w["pid"] for w in d.status()["workers"]}
        reloaded = d.cli("reload")
        assert reloaded.returncode == 0, reloaded.stderr
        d.wait(
            lambda s: (
                bool(s["workers"])
                and all(w["state"] in ("idle", "busy") for w in s["workers"])
                and not pids & {w["pid"] for w in s["workers"]}
            ),
            120,
            "the workers on the new settings",
        )
        # Other bytes (a trailer after the JPEG's end): the same content would be a copy of the first.
        write_atomic(d.svc.inbox / "after.jpg", photo + b"another photo")
        after = done_job(d, "after.jpg")
        said = notes(d, after["id"])
        assert said["Model"] == second.name, said
        assert said["Strength"] == "0.8", said
        # ...as the log and the status say the workers loaded it.
        assert f"restorer ready: {second.name}" in Path(d.status()["log_file"]).read_text()
        # The first photo's very bytes again: no copy of the result the old settings made.
        write_atomic(d.svc.inbox / "again.jpg", photo)
        again = done_job(d, "again.jpg")
        assert notes(d, again["id"])["Model"] == second.name
        log = Path(d.status()["log_file"]).read_text()
        assert (
            "that one was restored with settings changed since: restored with the settings in effect now"
            in log
        )
        # The first run's page still names what that run used.
        assert notes(d, before["id"])["Model"] == first.name
        assert notes(d, before["id"])["Strength"] == "0.5"


def test_a_result_key_is_the_settings_a_photo_depends_on() -> None:
    base = RestoreConfig(model="GPEN-BFR-512")
    key = SettingsUsed.of(base).key
    # A worker's own settings (its device, number formats, folders) leave a photo as it is...
    assert SettingsUsed.of(dataclasses.replace(base, device="cpu", face_batch=3, precision="fp32")).key == key
    # ...the model, the strength, the detector and the output's format do not.
    assert SettingsUsed.of(dataclasses.replace(base, model="GPEN-BFR-256")).key != key
    assert SettingsUsed.of(dataclasses.replace(base, strength=0.5)).key != key
    assert SettingsUsed.of(dataclasses.replace(base, detector="retinaface_mobile0.25")).key != key
    assert SettingsUsed.of(base, "png").key != key
    used = SettingsUsed.of(base).written_as("JPEG")
    assert SettingsUsed.from_json(used.to_json()) == used
    # A record this version cannot read is no record, not a made-up one.
    assert SettingsUsed.from_json({"model": "GPEN-BFR-512"}) is None
    assert SettingsUsed.from_json({}) is None
