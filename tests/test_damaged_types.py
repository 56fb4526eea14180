"""Files of a known image type that Pillow's readers take for "not my format" (so they read as "not
an image file") or for a feature they lack, when they are damaged or cut short: each is named as
a damaged or truncated file of its type, and the valid files beside them still open or keep their
own reason. Every file is built here, after Pillow's test images (eps/timeout-d675...eps,
hopper_bad.p7, negative_size.ppm, bmp/b/badheadersize.bmp, pngtest_bad.png.bin)."""

from __future__ import annotations

import io
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from PIL import EpsImagePlugin, Image

from gpen_watch.imaging.errors import BrokenImageError, NotAnImageError, UnsupportedFormatError
from gpen_watch.imaging.load import header_refusal, load_image

W, H = 48, 40
RAMP = (np.mgrid[0:H, 0:W][1] * 5).astype(np.uint8)

_EPS = b"""%!PS-Adobe-3.0 EPSF-3.0
%%BoundingBox: 0 0 48 40
%%EndComments
0.5 setgray 0 0 48 40 rectfill
showpage
%%EOF
"""


def dos_eps(postscript: bytes, *, declared: int | None = None, preview: bytes = b"") -> bytes:
    """An EPS with the binary header DOS and Windows programs write (a TIFF preview before the
    PostScript): its signature, where the PostScript section starts and how long it is
    (``declared``, else its real length), no WMF preview, the TIFF preview's place, no checksum."""
    start = 30 + len(preview)
    length = len(postscript) if declared is None else declared
    fields = (start, length, 0, 0, 30 if preview else 0, len(preview), 0xFFFF)
    return b"\xc5\xd0\xd3\xc6" + struct.pack("<IIIIIIH", *fields) + preview + postscript


def _tiff_preview() -> bytes:
    buf = io.BytesIO()
    Image.fromarray(RAMP).save(buf, "TIFF")
    return buf.getvalue()


def _reason_of(path: Path) -> str:
    with pytest.raises(Exception) as err:
        load_image(path)
    reason: str = getattr(err.value, "reason", "")
    return reason


def test_a_binary_eps_whose_postscript_is_not_where_its_header_says_is_damaged(tmp_path: Path) -> None:
    # Pillow's eps/timeout-d675...eps: a TIFF preview, then zeros where the header places a
    # PostScript section that would run 260 KB past the end of the file.
    src = tmp_path / "drawing.eps"
    src.write_bytes(dos_eps(bytes(4096), declared=270_000, preview=_tiff_preview()))
    with pytest.raises(BrokenImageError) as err:
        load_image(src)
    assert err.value.reason.startswith("damaged EPS: its header cannot be decoded (corrupt file)")
    refusal = header_refusal(src)
    assert refusal is not None and refusal.reason == err.value.reason


def test_a_binary_eps_cut_inside_its_postscript_comments_is_truncated(tmp_path: Path) -> None:
    src = tmp_path / "cut.eps"
    src.write_bytes(dos_eps(_EPS[:24], declared=len(_EPS), preview=_tiff_preview()))  # before the BoundingBox
    with pytest.raises(BrokenImageError, match=r": truncated EPS: the file ends before its image data does"):
        load_image(src)


def test_a_whole_binary_eps_without_ghostscript_says_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "whole.eps"
    src.write_bytes(dos_eps(_EPS, preview=_tiff_preview()))
    monkeypatch.setattr(EpsImagePlugin, "gs_binary", False)  # Pillow's record that it found none
    with pytest.raises(UnsupportedFormatError) as err:
        load_image(src)
    assert err.value.reason.startswith(
        "this EPS is a PostScript drawing, which needs Ghostscript to be drawn, and Ghostscript is not "
        "installed on this machine; install Ghostscript"
    )


@pytest.mark.skipif(shutil.which("gs") is None, reason="Ghostscript (gs) is not installed")
def test_a_whole_binary_eps_is_drawn_by_ghostscript(tmp_path: Path) -> None:
    src = tmp_path / "whole.eps"
    src.write_bytes(dos_eps(_EPS, preview=_tiff_preview()))
    image = load_image(src)
    assert (image.format, image.size) == ("EPS", (W, H))
    assert abs(int(image.pixels[20, 24, 0]) - 128) <= 2  # 0.5 setgray


_XV_HEAD = b"P7 332\n#XVVERSION:Version 2.28  Rev: 9/26/92\n#END_OF_COMMENTS\n"


def test_xv_thumbnails_cut_short_are_truncated_and_whole_ones_restored(tmp_path: Path) -> None:
    cases = {
        # Pillow's hopper_bad.p7: the file ends among the comments, before the size line.
        "hopper_bad.p7": b"P7 332\n# Artificially edited file to cause unexpected EOF\n",
        "rows_cut.p7": _XV_HEAD + b"%d %d 255\n" % (W, H) + RAMP.tobytes()[: W * H // 2],
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        assert _reason_of(tmp_path / name).startswith(
            "truncated XV thumbnail: the file ends before its image data does"
        ), name
    (tmp_path / "whole.p7").write_bytes(_XV_HEAD + b"%d %d 255\n" % (W, H) + RAMP.tobytes())
    image = load_image(tmp_path / "whole.p7")
    assert (image.format, image.size) == ("XVThumb", (W, H))


def test_a_pnm_header_with_an_impossible_size_is_damaged_not_text(tmp_path: Path) -> None:
    # Pillow's negative_size.ppm: "P6" run into a width of 32, then a height of 35,888,888,863.
    (tmp_path / "negative_size.ppm").write_bytes(b"P632 35888888863 2!\n")
    with pytest.raises(BrokenImageError) as err:
        load_image(tmp_path / "negative_size.ppm")
    assert err.value.reason.startswith("damaged PNM (PPM/PGM/PBM): its header cannot be decoded")
    # Text that starts like a magic number but gives no size is still text; a whole PPM is restored.
    (tmp_path / "notes.ppm").write_bytes(b"P64 is a part number, not a picture.\n" * 4)
    with pytest.raises(NotAnImageError, match=r": not an image file \(looks like text\)$"):
        load_image(tmp_path / "notes.ppm")
    (tmp_path / "whole.ppm").write_bytes(b"P6\n%d %d\n255\n" % (W, H) + np.dstack([RAMP] * 3).tobytes())
    assert load_image(tmp_path / "whole.ppm").size == (W, H)


def bmp_with_header(size: int) -> bytes:
    """A 24-bit 4x2 BMP whose info header is ``size`` bytes (12: the OS/2 1.x core header; more:
    the Windows fields, then zeros)."""
    if size == 12:
        info = struct.pack("<IHHHH", 12, 4, 2, 1, 24)
    else:
        info = struct.pack("<IiiHHIIiiII", size, 4, 2, 1, 24, 0, 24, 2835, 2835, 0, 0)[:size].ljust(
            size, b"\0"
        )
    rows = bytes([10, 20, 30] * 4 + [200, 100, 50] * 4)  # bottom row first
    offset = 14 + size
    return b"BM" + struct.pack("<IHHI", offset + len(rows), 0, 0, offset) + info + rows


def test_bmp_header_sizes_no_version_has_are_damaged(tmp_path: Path) -> None:
    """A header size is a BMP's version: 12 (OS/2 1.x), 40, 52, 56, 108, 124 (Windows), 16 to 64
    (OS/2 2.x, which may end after any field). Pillow reads some of them; 66 (Pillow's
    bmp/b/badheadersize.bmp) is none."""
    for size in (12, 40, 52, 56, 64, 108, 124):
        (tmp_path / f"v{size}.bmp").write_bytes(bmp_with_header(size))
        image = load_image(tmp_path / f"v{size}.bmp")
        assert image.size == (4, 2), size
        assert tuple(image.pixels[0, 0]) == (200, 100, 50) and tuple(image.pixels[1, 3]) == (10, 20, 30), size
    (tmp_path / "os2v2-16.bmp").write_bytes(bmp_with_header(16))
    with pytest.raises(UnsupportedFormatError, match=r": this BMP uses an uncommon BMP header version"):
        load_image(tmp_path / "os2v2-16.bmp")
    (tmp_path / "badheadersize.bmp").write_bytes(bmp_with_header(66))
    with pytest.raises(
        BrokenImageError, match=r": damaged BMP: its header cannot be decoded \(corrupt file\)"
    ):
        load_image(tmp_path / "badheadersize.bmp")


def test_a_png_without_its_first_byte_is_a_damaged_png(tmp_path: Path) -> None:
    """Pillow's pngtest_bad.png.bin lost its first byte on purpose; the seven signature bytes left
    (made to show transfer damage) still say PNG, so the user is told to copy it again, not that
    it is no image."""
    buf = io.BytesIO()
    Image.fromarray(RAMP).save(buf, "PNG")
    (tmp_path / "photo.png.bin").write_bytes(buf.getvalue()[1:])
    with pytest.raises(BrokenImageError) as err:
        load_image(tmp_path / "photo.png.bin")
    assert err.value.reason.startswith(
        "damaged PNG: its header cannot be decoded (corrupt file); copy it again"
    )
    refusal = header_refusal(tmp_path / "photo.png.bin")
    assert refusal is not None and refusal.reason == err.value.reason
