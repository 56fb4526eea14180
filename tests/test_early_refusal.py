"""Files the engine would refuse from their header are set aside as they arrive, not after the
photos ahead of them: a real service, its worker busy with a slow photo (tests/fake_restorer.py)."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from claimed_sizes import png_claiming, sparse_bmp
from PIL import Image
from service_harness import services_fixture
from test_daemon import Service, drop, files

from gpen_watch.imaging.errors import ImageInputError
from gpen_watch.imaging.load import header_refusal, load_image

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and sockets")

services = services_fixture(Service)


def _jpeg() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (64, 48), (120, 90, 60)).save(buf, "JPEG")
    return buf.getvalue()


def _worker_reason(path: Path) -> str:
    """What the engine's worker says of this file (load_image is its first step)."""
    with pytest.raises(ImageInputError) as err:
        load_image(path, max_side=4096, max_megapixels=200)
    return err.value.reason


@pytest.mark.slow
def test_header_refusals_skip_the_queue(services: Callable[..., Service], tmp_path: Path) -> None:
    env = {"FAKE_SLOW": "600", "GPEN_WATCH_HEADER_CHECKS": "1"}
    svc = services(env=env).start()
    drop(svc.inbox, "slow-portrait.jpg", _jpeg())
    svc.wait(lambda s: s["queue"]["in_flight"] == 1, what="the worker busy with the slow photo")

    text = b"Shopping list\n- milk\n- eggs\n" * 4
    bomb = png_claiming(tmp_path / "bomb.png", 20000, 11000)  # 220 MP in 77 bytes
    drop(svc.inbox, "notes.jpg", text)
    drop(svc.inbox, "huge.png", bomb.read_bytes())
    want = ["huge.png", "huge.png.error.txt", "notes.jpg", "notes.jpg.error.txt"]
    s = svc.wait(lambda s: files(svc.failed) == want, what="both refused files set aside")
    # The slow photo is still being restored: nothing waited for it.
    assert s["queue"]["in_flight"] == 1
    assert files(svc.outbox) == []

    # The same sentences the worker writes for these files.
    notes_reason = _worker_reason(svc.failed / "notes.jpg")
    huge_reason = _worker_reason(svc.failed / "huge.png")
    assert notes_reason == "not an image file (looks like text)"
    assert huge_reason.startswith("damaged PNG: its header declares 20000x11000 (220 MP), more than")
    assert notes_reason in (svc.failed / "notes.jpg.error.txt").read_text()
    assert huge_reason in (svc.failed / "huge.png.error.txt").read_text()
    assert (svc.failed / "notes.jpg").read_bytes() == text  # the file itself is kept, untouched
    assert s["queue"]["unsupported"] == 1
    assert s["queue"]["failed"] == 1
    assert s["torch_loaded"] is False
    assert svc.stop() == 0


def test_header_refusal_answers_only_for_what_the_header_decides(tmp_path: Path) -> None:
    good = tmp_path / "good.jpg"
    good.write_bytes(_jpeg())
    assert header_refusal(good) is None
    text = tmp_path / "text.png"
    text.write_text("hello, not a picture at all\n")
    assert (r := header_refusal(text)) is not None
    assert r.kind == "unsupported"
    big = sparse_bmp(tmp_path / "big.bmp", 20000, 11000)  # 220 MP, every row there
    assert (r := header_refusal(big, max_megapixels=200)) is not None
    assert r.kind == "failed"
    assert "raise the restore.max_megapixels setting" in r.reason
    assert header_refusal(big, max_megapixels=300) is None
    bomb = png_claiming(tmp_path / "bomb.png", 20000, 11000)  # no limit makes 220 MP of 77 bytes true
    assert (r := header_refusal(bomb, max_megapixels=200)) is not None
    assert r.reason.startswith("damaged PNG")
    # The worker's own words, also where they depend on the first bytes (magic numbers).
    for name, data in [("scan.jpg", b"%PDF-1.4\n" + b"1 0 obj\n" * 20), ("cut.png", b"\x89PNG\r\n\x1a\n")]:
        (tmp_path / name).write_bytes(data)
        r = header_refusal(tmp_path / name)
        assert r is not None, name
        assert r.reason == _worker_reason(tmp_path / name), name
    # Gone or unreadable now: not refused, a worker looks at it when its turn comes.
    assert header_refusal(tmp_path / "missing.jpg") is None
    # HEIF needs pillow-heif, which only the worker loads.
    heic = tmp_path / "photo.heic"
    heic.write_bytes(b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic" + b"\x00" * 64)
    assert header_refusal(heic) is None
