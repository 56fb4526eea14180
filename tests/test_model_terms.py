"""Licences before downloads, in-process: every model carries its publisher's terms and the answer
to "may I use it for paid work?"; a model whose terms do not allow paid work is never downloaded
before the user said yes (restore.accepted_terms), whichever path asks (store.fetch, the model
gate, `restore`'s ensure_all, a restorer's own loads); the refusal names the alternative; a yes
reaches a waiting gate at once; a file already on disk is used, its terms said once.

Downloads come from a loopback HTTP server that counts its requests (the network's stand-in)."""

from __future__ import annotations

import dataclasses
import functools
import http.server
import io
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from gpen_watch import cli, config
from gpen_watch.base.errors import ConfigError, ModelError
from gpen_watch.catalog import licences, registry
from gpen_watch.config import RestoreConfig
from gpen_watch.modelstore import answers, messages, needs, store, terms
from gpen_watch.modelstore.terms import TermsNotAccepted
from gpen_watch.platform import paths, program
from gpen_watch.service.model_gate import GateState, ModelGate

GPEN256 = registry.get_spec("GPEN-BFR-256")
MOBILE = registry.get_spec("RetinaFace-MobileNet0.25")
PARSENET = registry.get_spec("ParseNet")


def weights_bytes() -> bytes:
    buf = io.BytesIO()
    torch.save({"w": torch.zeros(1000)}, buf)
    return buf.getvalue()


class _Counting(http.server.SimpleHTTPRequestHandler):
    asked: list[str]

    def do_GET(self) -> None:
        self.asked.append(self.path)
        super().do_GET()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, list[str]]]:
    """Every model's URL on a loopback server serving a small weights file for each; yields the
    folder it serves and the paths it was asked for."""
    root = tmp_path / "www"
    root.mkdir()
    asked: list[str] = []
    handler = type("Handler", (_Counting,), {"asked": asked})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    body = weights_bytes()
    for spec in registry.all_specs():
        (root / spec.filename).write_bytes(body)
    local = tuple(
        dataclasses.replace(s, url=f"{base}/{s.filename}", mirrors=(), size_bytes=None, sha256=None)
        for s in registry.all_specs()
    )
    monkeypatch.setattr(registry, "MODELS", local)
    try:
        yield root, asked
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_every_model_says_its_terms_and_whether_they_allow_paid_work() -> None:
    paid = {s.name: s.terms.paid_work for s in registry.all_specs()}
    assert paid == {
        "GPEN-BFR-512": False,
        "GPEN-BFR-256": False,
        "GPEN-BFR-1024": False,
        "GPEN-BFR-2048": False,
        "RetinaFace-R50": True,
        "RetinaFace-MobileNet0.25": True,
        "ParseNet": False,
        "GFPGAN-v1.4": True,
        "GFPGAN-v1.3": True,
        "CodeFormer": False,
        "RealESRNet-x2": False,
        "RealESRNet-x4": False,
        "RealESRGAN-x2plus": True,
        "RealESRGAN-x4plus": True,
        "dlib-face-recognition": True,
        "dlib-landmarks-5": True,
    }
    for spec in registry.all_specs():
        assert spec.terms.answer.split(":")[0] in ("Yes", "No", "Not as far as gpen-watch can tell")
        assert spec.terms.answer.startswith("Yes") == spec.terms.paid_work
    assert "S-Lab License 1.0" in registry.get_spec("CodeFormer").terms.answer
    assert "Apache-2.0" in registry.get_spec("GFPGAN-v1.4").terms.title
    assert "BSD-3-Clause" in registry.get_spec("RealESRGAN-x4plus").terms.title
    assert "MIT" in registry.get_spec("RetinaFace-R50").terms.title
    assert licences.ACCEPTABLE == ("GPEN", "GPEN-ModelScope", "PSFR-GAN", "S-Lab-1.0")
    # Each non-commercial model's way out for paid work, and none for those that need none.
    alternatives = {s.name: terms.paid_work_alternative(s) for s in registry.all_specs()}
    assert alternatives["GPEN-BFR-512"] == ("restore.model", "GFPGAN-v1.4")
    assert alternatives["CodeFormer"] == ("restore.model", "GFPGAN-v1.4")
    assert alternatives["ParseNet"] == ("restore.use_parse", "false")
    assert alternatives["RealESRNet-x4"] == ("restore.upscale_model", "RealESRGAN-x4plus")
    assert alternatives["GFPGAN-v1.4"] is None and alternatives["RetinaFace-R50"] is None


def test_a_non_commercial_model_is_refused_before_any_request_and_the_refusal_names_the_alternative(
    served: tuple[Path, list[str]], tmp_path: Path
) -> None:
    _, asked = served
    gpen = registry.get_spec("GPEN-BFR-512")
    with pytest.raises(TermsNotAccepted) as info:
        store.fetch(gpen, tmp_path / "models")
    text = str(info.value)
    lines = text.splitlines()
    assert (
        lines[0] == "GPEN-BFR-512 is downloaded only once you accept its terms: they do not allow paid work"
    )
    assert 'For academic and non-commercial use only."' in text and licences.GPEN.url in text
    assert f"    {program.command('models accept GPEN-BFR-512')}" in lines
    assert "  for paid work, restore with GFPGAN-v1.4 (Apache-2.0) instead:" in lines
    assert f"    {program.command('models paid-work')}" in lines
    assert asked == []  # nothing was asked of the server
    assert not paths.model_cache_dir().exists() or list(paths.model_cache_dir().iterdir()) == []
    # What the engine loads by name knows no answer: never a download of such a file.
    with pytest.raises(TermsNotAccepted):
        store.ensure_model(registry.get_spec("ParseNet"), tmp_path / "models", progress=False)
    assert asked == []
    # A yes, in any case, and it downloads; terms that allow paid work never ask.
    assert store.fetch(gpen, tmp_path / "models", accepted=["gpen"]).is_file()
    assert store.fetch(registry.get_spec(MOBILE.name), tmp_path / "models").is_file()
    assert sorted(asked) == sorted([f"/{gpen.filename}", f"/{MOBILE.filename}"])


def test_a_restorer_that_may_download_fetches_only_what_its_settings_accepted(
    served: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """A cluster node's restorer downloads what it misses: the files whose terms its settings
    accepted (store.fetch_accepted, before its loads), and no other."""
    _, asked = served
    specs = [registry.get_spec(s.name) for s in (GPEN256, PARSENET, MOBILE)]
    store.fetch_accepted(specs, tmp_path, ["GPEN"])
    assert asked == [f"/{GPEN256.filename}"]  # ParseNet's terms were not accepted; MOBILE asks none
    store.fetch_accepted(specs[:1], tmp_path, ["GPEN"])  # there now: nothing asked again
    assert asked == [f"/{GPEN256.filename}"]


def test_restore_names_every_file_waiting_for_a_yes_and_downloads_the_rest(
    served: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """`gpen-watch restore` with the default settings: one message with the terms of both files
    that wait for a yes and the one step for each way on; the detector is downloaded meanwhile."""
    _, asked = served
    cfg = RestoreConfig(model_dir=tmp_path / "models")
    with pytest.raises(TermsNotAccepted) as info:
        messages.ensure_all(cfg, download=True, progress=False)
    text = str(info.value)
    assert text.startswith("GPEN-BFR-512 and ParseNet are downloaded only once you accept their terms")
    assert program.command("models accept GPEN-BFR-512 ParseNet") in text
    assert (
        "restore with GFPGAN-v1.4 (Apache-2.0), without the face parser (its plain paste-back mask)" in text
    )
    assert text.endswith("then run the command again")
    assert asked == ["/detection_Resnet50_Final.pth"]
    accepted = dataclasses.replace(cfg, accepted_terms=["GPEN", "PSFR-GAN"])
    messages.ensure_all(accepted, download=True, progress=False)
    assert needs.check(accepted).ready


def poll_until(gate: ModelGate, cond: object, what: str) -> None:
    deadline = time.monotonic() + 30
    while not cond():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}; status {gate.status()}"
        gate._next_check = 0.0  # the gate's periodic check, now
        gate.poll()
        time.sleep(0.02)


def test_the_gate_waits_for_the_yes_then_downloads_at_once(
    served: tuple[Path, list[str]], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A first run with GPEN-BFR-256: the detector is downloaded, GPEN-BFR-256 is not; the
    problem says why in one short line and in full; the yes (as a reload brings it) starts the
    download, and the workers may start."""
    _, asked = served
    cfg = RestoreConfig(
        model="GPEN-BFR-256", detector="retinaface_mobile0.25", use_parse=False, model_dir=tmp_path / "m"
    )
    woken = threading.Event()
    gate = ModelGate(cfg, woken.set)
    caplog.set_level(logging.INFO, logger="gpen_watch")
    try:
        assert gate.start() is False
        assert woken.wait(30)
        poll_until(gate, lambda: gate._fetch is None, "the detector's download")
        assert asked == [f"/{MOBILE.filename}"]
        assert gate.state is GateState.WAITING
        assert gate.problem_line() == "model terms to accept, or use GFPGAN-v1.4"
        problem = gate.problem() or ""
        assert problem.startswith("GPEN-BFR-256 is downloaded only once you accept its terms")
        assert "models fetch" not in problem  # the download is not what is missing
        files = {f.name: f for f in gate.status().files}
        assert files["GPEN-BFR-256"].terms == "GPEN" and files["GPEN-BFR-256"].state == "missing"
        assert files[MOBILE.name].terms is None and files[MOBILE.name].state == "present"
        # Said in the log once, as a warning, with the terms.
        said = [r.getMessage() for r in caplog.records if "accept its terms" in r.getMessage()]
        assert len(said) == 1 and "GPEN's licence" in said[0]

        woken.clear()
        gate.accept(["GPEN"])
        assert woken.wait(30)
        poll_until(gate, lambda: gate.state is GateState.READY, "ready after the yes")
        assert asked == [f"/{MOBILE.filename}", f"/{GPEN256.filename}"]
        assert gate.problem() is None
    finally:
        gate.close()


def test_a_file_copied_in_by_hand_is_used_and_its_terms_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    models = tmp_path / "models"
    models.mkdir()
    for spec in (GPEN256, MOBILE):
        (models / spec.filename).write_bytes(weights_bytes())
    cfg = RestoreConfig(
        model="GPEN-BFR-256", detector="retinaface_mobile0.25", use_parse=False, model_dir=models
    )
    caplog.set_level(logging.INFO, logger="gpen_watch.service.model_gate")
    gate = ModelGate(cfg, lambda: None)
    try:
        assert gate.start() is True
        lines = [r.getMessage() for r in caplog.records]
        assert lines == [
            "GPEN-BFR-256 is used as found on disk; its terms do not allow paid work (GPEN's licence: "
            f"academic and non-commercial use only); `{program.command('models accept GPEN-BFR-256')}` "
            "records your yes"
        ]
    finally:
        gate.close()
    caplog.clear()
    gate = ModelGate(dataclasses.replace(cfg, accepted_terms=["GPEN"]), lambda: None)
    assert gate.start() is True and caplog.records == []  # accepted: nothing to say
    gate.close()


def test_accepted_terms_are_a_global_setting_of_known_names(tmp_path: Path) -> None:
    cfg = config.from_text('[restore]\naccepted_terms = ["GPEN", "S-Lab-1.0"]\n', tmp_path / "c.toml")
    assert cfg.restore.accepted_terms == ["GPEN", "S-Lab-1.0"]
    with pytest.raises(ConfigError, match="'GFPGAN' is not the terms of a model that asks for a yes"):
        config.from_text('[restore]\naccepted_terms = ["GFPGAN"]\n', tmp_path / "c.toml")
    with pytest.raises(ConfigError, match="cannot be set per inbox"):
        config.from_text(
            f'[[watch.inboxes]]\npath = "{tmp_path}"\nrestore = {{accepted_terms = ["GPEN"]}}\n',
            tmp_path / "c.toml",
        )
    # A yes reaches a running gate without restarting the workers.
    from gpen_watch.config import applies

    assert applies.applies("restore.accepted_terms") is applies.Applies.DOWNLOADS


def test_accept_and_paid_work_edit_the_file_keeping_its_comments(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    text = "# mine\n[restore]\nstrength = 0.8  # softer\n"
    once = answers.accept(text, path, terms.resolve(["GPEN-BFR-512", "parsenet"]))
    assert once.startswith("# mine\n[restore]\nstrength = 0.8  # softer\n")
    assert config.from_text(once, path).restore.accepted_terms == ["GPEN", "PSFR-GAN"]
    assert answers.accept(once, path, terms.resolve(["GPEN"])) == once  # a second yes: no change
    with pytest.raises(ModelError, match="'nonsense' is neither a model nor the name of its terms"):
        terms.resolve(["nonsense"])
    paid, changes = answers.for_paid_work(once, path)
    assert changes == {"restore.model": "GFPGAN-v1.4", "restore.use_parse": "false"}
    cfg = config.from_text(paid, path)
    assert (cfg.restore.model, cfg.restore.use_parse, cfg.restore.strength) == ("GFPGAN-v1.4", False, 0.8)
    assert answers.for_paid_work(paid, path) == (paid, {})


def test_the_cli_accept_persists_in_the_settings_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["models", "accept", "CodeFormer"]) == 0
    out = capsys.readouterr().out
    assert "S-Lab-1.0: CodeFormer's S-Lab License 1.0: non-commercial use only" in out
    assert "You accepted S-Lab-1.0's terms" in out and "No service is running" in out
    # Read again as at the next start: still accepted.
    assert config.load(paths.config_file()).restore.accepted_terms == ["S-Lab-1.0"]
    assert cli.main(["models", "accept", "GFPGAN-v1.4"]) == 0
    assert "Nothing to accept" in capsys.readouterr().out
    assert cli.main(["models", "list"]) == 0
    out = capsys.readouterr().out
    assert "accepted: yes (restore.accepted_terms has S-Lab-1.0)" in out
    assert f"accepted: no (not downloaded until `{program.command('models accept GPEN-BFR-512')}`)" in out
    assert cli.main(["models", "paid-work"]) == 0
    out = capsys.readouterr().out
    assert "restore.model = GFPGAN-v1.4 (was GPEN-BFR-512)" in out
    assert config.load(paths.config_file()).restore.model == "GFPGAN-v1.4"


def test_the_gates_problem_short_line_fits_the_tray() -> None:
    specs = [registry.get_spec("GPEN-BFR-512"), PARSENET]
    assert terms.line(specs) == "model terms to accept, or use GFPGAN-v1.4"
    # With the tray's "(see the dashboard)", one of its menu lines (tray.model.MAX_LINE).
    from gpen_watch.tray.model import MAX_LINE

    assert len(terms.line(specs) + " (see the dashboard)") <= MAX_LINE
