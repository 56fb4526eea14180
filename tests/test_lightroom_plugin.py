"""The Lightroom Classic plug-in (packaging/lightroom/gpen-watch.lrplugin): its Lua compiles with
Debian's luac5.1, and its post-process action, run under a small Lua 5.1 harness that stands in for
Lightroom (LrHttp through curl, the catalog, the dialogs; tests/lightroom/harness.lua), sends
exported photos to a real service, waits, and puts each result beside its original, added to the
catalog stacked above it. Lightroom itself never ran it."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from api_harness import jobs, token
from dashboard_client import Dashboard, served_dashboard

REPO = Path(__file__).resolve().parents[1]
PLUGIN = REPO / "packaging" / "lightroom" / "gpen-watch.lrplugin"
HARNESS = REPO / "tests" / "lightroom" / "harness.lua"

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(
        shutil.which("lua5.1") is None or shutil.which("curl") is None,
        reason="Debian's lua5.1 and curl (the harness's LrHttp) are not installed",
    ),
]


@pytest.fixture(scope="module")
def dash(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    with served_dashboard(tmp_path_factory.mktemp("lightroom")) as d:
        yield d


def test_every_lua_file_compiles_with_luac51() -> None:
    files = [*PLUGIN.glob("*.lua"), HARNESS]
    assert len(files) == 5
    run = subprocess.run(["luac5.1", "-p", *map(str, files)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def export(d: Dashboard, bearer: str, pairs: list[tuple[Path, Path]], strength: str = "") -> list[list[str]]:
    args = ["lua5.1", str(HARNESS), str(PLUGIN), d.url, bearer, strength]
    for original, rendered in pairs:
        args += [str(original), str(rendered)]
    run = subprocess.run(args, capture_output=True, text=True, timeout=150)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = [line.split("\t") for line in run.stdout.splitlines()]
    assert lines[0][:2] == ["INFO", "io.github.gpen-watch.lightroom"] and lines[-1] == ["END"], run.stdout
    return lines


@pytest.fixture
def shoot(tmp_path: Path) -> list[tuple[Path, Path]]:
    """Two catalog photos (a raw file and a JPEG) and the JPEGs the export rendered of them."""
    album, rendered = tmp_path / "Album 2026", tmp_path / "export"
    album.mkdir()
    rendered.mkdir()
    pairs = []
    for original, out in (("IMG_0001.CR2", "IMG_0001.jpg"), ("family portrait.jpg", "family portrait.jpg")):
        (album / original).write_bytes(b"raw or original bytes of " + original.encode())
        (rendered / out).write_bytes(b"\xff\xd8 rendered " + out.encode())
        pairs.append((album / original, rendered / out))
    return pairs


def test_the_action_sends_the_export_and_adds_each_result_beside_its_original(
    dash: Dashboard, shoot: list[tuple[Path, Path]]
) -> None:
    lines = export(dash, token(dash, "lightroom"), shoot, strength="0.6")
    assert [line for line in lines if line[0] == "DIALOG"] == []
    assert [line[1] for line in lines if line[0] == "DONE"] == ["true", "true"]
    added = [line[1:] for line in lines if line[0] == "ADDED"]
    album = shoot[0][0].parent
    assert added == [
        [str(album / "IMG_0001.restored.jpg"), str(album / "IMG_0001.CR2"), "above"],
        [str(album / "family portrait.restored.jpg"), str(album / "family portrait.jpg"), "above"],
    ]
    for original, rendered in shoot:
        result = album / f"{original.stem}.restored.jpg"
        assert result.read_bytes() == rendered.read_bytes()  # the stand-in restorer gives it back as sent
    # The strength of the dialog went with each photo.
    sent = [j for j in jobs(dash) if j.rel.name in ("IMG_0001.jpg", "family portrait.jpg")]
    assert sent and all(j.settings == {"restore.strength": "0.6"} for j in sent)


def test_a_second_export_never_writes_over_a_result(dash: Dashboard, shoot: list[tuple[Path, Path]]) -> None:
    bearer = token(dash, "lightroom-again")
    export(dash, bearer, shoot[:1])
    lines = export(dash, bearer, shoot[:1])
    album = shoot[0][0].parent
    assert [line[1] for line in lines if line[0] == "ADDED"] == [str(album / "IMG_0001.restored (1).jpg")]
    assert (album / "IMG_0001.restored.jpg").exists()


def test_a_token_the_service_refuses_is_said_and_the_export_goes_on(
    dash: Dashboard, shoot: list[tuple[Path, Path]]
) -> None:
    lines = export(dash, "gwt_00000000_" + "A" * 43, shoot)
    [dialog] = [line for line in lines if line[0] == "DIALOG"]
    assert dialog[1] == "gpen-watch: not every photo was restored"
    assert "gpen-watch refused (401): That token is not one of this service's" in dialog[2]
    assert [line[1] for line in lines if line[0] == "DONE"] == ["true", "true"]
    assert not [line for line in lines if line[0] == "ADDED"]


def test_a_token_without_the_submit_scope_is_said(dash: Dashboard, shoot: list[tuple[Path, Path]]) -> None:
    lines = export(dash, token(dash, "lightroom-read", ("read",)), shoot[:1])
    [dialog] = [line for line in lines if line[0] == "DIALOG"]
    assert "lacks the 'submit' scope" in dialog[2]
