"""Backend pieces that need no display: safe titles, the square icon, finding the system's PyGObject."""

from __future__ import annotations

import importlib.machinery
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image, ImageChops

from gpen_watch.tray import glib, icon, model, xorg


def problem_view(message: str) -> model.TrayView:
    return model.TrayView("error", 0, problem=message)


def test_titles_cut_with_an_ellipsis_encode_in_latin1_after_encodable() -> None:
    title = model.title(problem_view("cpu#0: GPEN-BFR-512: weights not found in /nowhere; run fetch"))
    assert title.endswith(model.ELLIPSIS)
    try:
        title.encode("latin-1")
        raise AssertionError("the cut title was expected to need more than Latin-1")
    except UnicodeEncodeError:
        pass
    safe = model.encodable(title, "latin-1")
    assert safe == title[:-1] + "..."
    safe.encode("latin-1")


def test_encodable_keeps_what_the_encoding_has_and_marks_the_rest() -> None:
    assert model.encodable("gpen-watch: 64 °C", "latin-1") == "gpen-watch: 64 °C"
    assert model.encodable("outbox: /home/ana/写真 \u2013 full", "latin-1") == "outbox: /home/ana/?? - full"
    assert model.encodable("a … b", "utf-8") == "a … b"


def test_the_icon_is_drawn_square_in_a_tall_slot() -> None:
    image = icon.render(icon.load_base(), model.badge(model.TrayView("paused", 7)))
    out = xorg.square_on(Image.new("RGB", (24, 46), "#dcdad5"), image)
    assert out.size == (24, 46)
    bg = Image.new("RGB", out.size, "#dcdad5")
    box = ImageChops.difference(out, bg).convert("L").point(lambda v: 255 if v > 24 else 0).getbbox()
    assert box is not None
    left, top, right, bottom = box
    assert (left, right) == (0, 24), box
    assert (top, bottom) == (11, 35), box  # 24x24, centred


def test_click_pauses_makes_pause_the_default_even_with_a_menu() -> None:
    view = model.TrayView("idle", 0)
    default = [e.text for e in model.menu(view, has_menu=True, click_pauses=True) if e.default]
    assert default == ["Pause"]
    assert [e.text for e in model.menu(view, has_menu=True) if e.default] == ["Open outbox"]


def _fake_site(root: Path, suffix: str) -> Path:
    gi = root / "gi"
    gi.mkdir(parents=True)
    (gi / "__init__.py").write_text("WHERE = 'system'\n")
    (gi / f"_gi{suffix}").write_bytes(b"")
    (root / "otherpkg").mkdir()
    (root / "otherpkg" / "__init__.py").write_text("")
    return root


def test_find_system_gi_wants_an_extension_built_for_this_python(tmp_path: Path) -> None:
    ours = importlib.machinery.EXTENSION_SUFFIXES[0]
    other = (
        ".cpython-39-x86_64-linux-gnu.so" if "cpython-39" not in ours else ".cpython-312-x86_64-linux-gnu.so"
    )
    wrong = _fake_site(tmp_path / "wrong", other)
    right = _fake_site(tmp_path / "right", ours)
    assert glib.find_system_gi([tmp_path / "missing", wrong]) is None
    assert glib.find_system_gi([tmp_path / "missing", wrong, right]) == right


def test_enable_system_gi_adds_gi_and_nothing_else(tmp_path: Path) -> None:
    site = _fake_site(tmp_path / "site", importlib.machinery.EXTENSION_SUFFIXES[0])
    code = f"""
import sys
from pathlib import Path
from gpen_watch.tray import glib
sys.modules.pop("gi", None)
assert glib.enable_system_gi([Path({str(site)!r})]) == Path({str(site)!r})
glib.enable_system_gi([Path({str(site)!r})])  # twice: one finder
assert sum(isinstance(f, glib.SystemPackages) for f in sys.meta_path) == 1
import gi
assert gi.WHERE == "system", gi.__file__
try:
    import otherpkg
except ImportError:
    print("ok")
else:
    raise SystemExit("otherpkg leaked in from the system folder")
"""
    env = {**os.environ, "PYTHONNOUSERSITE": "1"}
    # Run where the environment has no gi of its own (the shared venv); skip the check otherwise.
    probe = subprocess.run([sys.executable, "-c", "import gi"], capture_output=True, env=env)
    if probe.returncode == 0:
        pytest.skip("this Python has a PyGObject of its own: the system one is never looked for")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok", result.stderr
