"""Every format and mode of tests/corpus.py through a running service (real watcher, daemon, worker
and engine on the tiny random-weight models): each file is restored in the format the output rule
names, keeping its alpha, depth and ICC, or set aside with a sentence that says what is wrong and
holds no decoder internals. The same table is checked at the loader/writer level first, which
names a failing case quicker than the service does."""

from __future__ import annotations

import random
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import corpus
import cv2
import numpy as np
import pillow_heif
import pytest
from corpus import CASES, INTERNALS, Case, Refused, Restored
from PIL import Image
from service_harness import real_engine_args
from test_daemon import Service, drop, services_fixture

from gpen_watch.imaging.errors import ImageInputError
from gpen_watch.imaging.formats import OUTPUT_SUFFIXES
from gpen_watch.imaging.load import load_image
from gpen_watch.imaging.save import output_choice, save_image
from gpen_watch.journal import Journal

services = services_fixture(Service)


def _check_output(case: Case, out: Path, notes: list[str], faces: int = 0) -> None:
    want = case.expect
    assert isinstance(want, Restored)
    if want.suffix is not None:
        assert out.suffix == want.suffix, out.name
    pillow_heif.register_heif_opener()  # in case a HEIF output is ever expected
    with Image.open(out) as im:
        im.load()
        got_alpha = "A" in im.getbands() and im.getchannel("A").getextrema()[0] < 255
        got = (im.format, im.mode, got_alpha, bool(im.info.get("icc_profile")), im.size)
    assert got == (want.format, want.mode, want.alpha, want.icc, want.size), f"{case.name}: {got} != {want}"
    # The random-weight detector finds a "face" in a ramp now and then; the paste changes pixels.
    if want.looks_like is not None and faces == 0:
        assert _difference(out, corpus.reference(want.looks_like)) < 8, (
            f"{case.name}: not the input's picture"
        )
    deep = cv2.imread(str(out), cv2.IMREAD_UNCHANGED) if want.format in ("PNG", "TIFF") else None
    bits = 16 if deep is not None and deep.dtype == np.uint16 else 8
    assert bits == want.bits, f"{case.name}: {bits}-bit output"
    if want.note is not None:
        assert any(re.search(want.note, n) for n in notes), f"{case.name}: notes {notes}"
    for note in notes:
        assert not INTERNALS.search(note), f"{case.name}: note {note!r}"


def _difference(out: Path, ref: Image.Image) -> float:
    """Mean absolute difference (0-255) between an output's picture and the reference, in gray
    when the output is gray; 16-bit outputs are compared at 8 bits."""
    with Image.open(out) as im:
        im.load()
        if im.mode.startswith("I"):
            pixels = (np.asarray(im).astype(np.float64) / 257.0).round()
            gray = True
        else:
            gray = im.mode in ("L", "LA")
            pixels = np.asarray(im.convert("L" if gray else "RGB"), dtype=np.float64)
    want = np.asarray(ref.convert("L" if gray else "RGB"), dtype=np.float64)
    return float(np.abs(pixels - want).mean())


def _check_reason(case: Case, state: str, reason: str) -> None:
    want = case.expect
    assert isinstance(want, Refused)
    assert (state, bool(re.search(want.reason, reason))) == (want.state, True), f"{case.name}: {reason!r}"
    assert not INTERNALS.search(reason), f"{case.name}: decoder internals in {reason!r}"


@pytest.mark.parametrize("case", [c for c in CASES if c.name != "notes.txt"], ids=lambda c: c.name)
def test_each_format_loads_and_writes_by_the_rule(case: Case, tmp_path: Path) -> None:
    src = tmp_path / case.name
    src.write_bytes(case.make())
    try:
        image = load_image(src)
    except ImageInputError as exc:
        _check_reason(case, exc.kind, exc.reason)
        return
    assert isinstance(case.expect, Restored), f"{case.name} was restored: {image.notes}"
    choice = output_choice(image, "same", 90)
    out = tmp_path / f"out-{src.stem}{OUTPUT_SUFFIXES[choice.format]}"
    save_image(image, image.pixels, out, jpeg_quality=90)
    _check_output(case, out, [*image.notes, *([choice.note] if choice.note else [])])


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and sockets")
def test_every_format_through_a_running_service(services: Callable[..., Service], tiny_models: Any) -> None:
    svc = services(*real_engine_args(tiny_models), fake=False).start()
    corpus.check_distinct()
    for case in CASES:
        drop(svc.inbox, case.name, case.make())
    svc.wait_done(len(CASES), timeout=240)
    with Journal.open() as j:
        jobs = {
            job.rel.as_posix(): job for state in ("done", "failed", "unsupported") for job in j.jobs(state)
        }
    assert sorted(jobs) == sorted(c.name for c in CASES)
    for case in CASES:
        job = jobs[case.name]
        if isinstance(case.expect, Restored):
            assert job.state == "done", f"{case.name}: {job.state} {job.error}"
            assert job.output is not None, f"{case.name}: {job.state} {job.error}"
            _check_output(case, Path(job.output), job.notes, job.faces or 0)
        else:
            assert job.error is not None, case.name
            _check_reason(case, job.state, job.error)
            assert (svc.failed / case.name).read_bytes() == case.make()  # set aside untouched
    svc.stop()


@pytest.mark.filterwarnings("ignore::UserWarning")  # Pillow says what it skips in a damaged TIFF
def test_mutated_files_are_refused_with_a_sentence(tmp_path: Path) -> None:
    """Damaged copies of every restorable case (bytes changed, tails cut; a fixed seed): each either
    decodes or is refused with an ImageInputError whose reason holds no decoder internals; no other
    exception escapes the loader (a worker would report it as "cannot read image: <exception>")."""
    rng = random.Random(11)
    seeds = [(c.name, c.make()) for c in CASES if isinstance(c.expect, Restored)]
    src = tmp_path / "mutant"
    for _ in range(400):
        name, data = rng.choice(seeds)
        mutant = bytearray(data)
        for _ in range(rng.randint(1, 6)):
            mutant[rng.randrange(len(mutant))] = rng.randrange(256)
        if rng.random() < 0.3:
            mutant = mutant[: rng.randrange(len(mutant))]
        src.write_bytes(bytes(mutant))
        try:
            load_image(src, max_megapixels=50)
        except ImageInputError as exc:
            assert not INTERNALS.search(exc.reason), f"{name} mutant: {exc.reason!r}"


def test_deep_gray_with_a_transparent_key_keeps_its_alpha(tmp_path: Path) -> None:
    """A 16-bit gray PNG whose tRNS chunk names one sample value as transparent: Pillow has no
    16-bit gray + alpha mode, so the key has to become alpha here, and the written output keeps it
    (as 16-bit RGBA, the depth kept)."""
    ramp = (np.mgrid[0:40, 0:48][1] * 1000).astype(np.uint16)  # 0, 1000, ... 47000
    src = tmp_path / "key.png"
    Image.fromarray(ramp).save(src, "PNG", transparency=5000)
    image = load_image(src)
    assert image.alpha is not None
    assert image.alpha.dtype == np.uint16
    assert ((image.alpha == 0) == (ramp == 5000)).all()
    out = tmp_path / "out.png"
    save_image(image, image.pixels, out, jpeg_quality=90)
    deep = cv2.imread(str(out), cv2.IMREAD_UNCHANGED)
    assert deep.dtype == np.uint16
    assert deep.shape == (40, 48, 4)
    assert ((deep[:, :, 3] == 0) == (ramp == 5000)).all()
