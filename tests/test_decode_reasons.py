"""The reason a user reads for a file that does not decode is true: a drawing Ghostscript renders is
not "corrupt", a bug is not the file's fault, "truncated" only for a file that ends early, and a
decoder's limitation is not damage. Every input is built here."""

from __future__ import annotations

import io
import logging
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, PngImagePlugin

from gpen_watch.base.errors import ErrorKind
from gpen_watch.imaging.errors import BrokenImageError, DecoderBugError, UnsupportedFormatError
from gpen_watch.imaging.identify import open_file, ran_out
from gpen_watch.imaging.load import header_refusal, load_image
from gpen_watch.imaging.reasons import explain

# --- EPS through Ghostscript -------------------------------------------------------------------------

# A 64x48 pt drawing: red page, blue rectangle in the middle (16..48 x 12..36).
_EPS = b"""%!PS-Adobe-3.0 EPSF-3.0
%%BoundingBox: 0 0 64 48
%%EndComments
1 0 0 setrgbcolor
0 0 64 48 rectfill
0 0 1 setrgbcolor
16 12 32 24 rectfill
showpage
%%EOF
"""


@pytest.mark.skipif(shutil.which("gs") is None, reason="Ghostscript (gs) is not installed")
def test_an_eps_drawing_is_drawn_by_ghostscript(tmp_path: Path) -> None:
    src = tmp_path / "-drawing.eps"  # a name Ghostscript would take for an option
    src.write_bytes(_EPS)
    image = load_image(src)
    assert image.format == "EPS"
    assert image.size == (64, 48)
    blue, red = (255, 0, 0), (0, 0, 255)  # BGR
    assert tuple(image.pixels[24, 32]) == blue
    assert tuple(image.pixels[2, 2]) == red
    assert tuple(image.pixels[45, 61]) == red


def test_the_file_a_decoder_reads_has_no_name_to_hand_to_a_program(tmp_path: Path) -> None:
    """Opened by descriptor, it would be named by its number, which Pillow's EPS plugin passed to
    Ghostscript as a path (TypeError); with no name the plugin copies the bytes to a private file
    and no program opens the user's path (which could have become a link since it was checked)."""
    src = tmp_path / "a.png"
    Image.new("RGB", (4, 4)).save(src)
    with open_file(src) as fh:
        assert not hasattr(fh, "name")
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"


# --- a bug is not the file's fault ---------------------------------------------------------------------


def _png(tmp_path: Path) -> Path:
    src = tmp_path / "photo.png"
    rng = np.random.default_rng(3)
    Image.fromarray(rng.integers(0, 256, (32, 48, 3), dtype=np.uint8)).save(src)
    return src


def test_an_exception_no_decoder_raises_for_bad_data_is_reported_as_a_bug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    src = _png(tmp_path)

    def broken_plugin(self: object) -> None:
        raise TypeError("expected str, bytes or os.PathLike object, not int")

    monkeypatch.setattr(PngImagePlugin.PngImageFile, "load_end", broken_plugin)
    with caplog.at_level(logging.ERROR), pytest.raises(DecoderBugError) as err:
        load_image(src)
    assert err.value.kind == ErrorKind.BUG
    assert err.value.reason.startswith(
        "gpen-watch could not decode it: TypeError: expected str, bytes or os.PathLike object, not int; "
        "this is a bug in gpen-watch or a library, not a fault of the file"
    )
    assert "corrupt" not in err.value.reason and "damaged" not in err.value.reason
    (record,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert str(src) in record.getMessage()
    assert record.exc_info is not None and record.exc_info[0] is TypeError  # the traceback is logged


def test_a_bug_while_reading_the_header_is_reported_as_a_bug_and_logged_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    src = _png(tmp_path)

    def broken_open(self: object) -> None:
        raise AttributeError("'NoneType' object has no attribute 'read'")

    monkeypatch.setattr(PngImagePlugin.PngImageFile, "_open", broken_open)
    with caplog.at_level(logging.ERROR):
        # The service's own header check leaves it to the worker, which loads it: one log entry.
        assert header_refusal(src) is None
        with pytest.raises(
            DecoderBugError, match=r"could not decode it: AttributeError: .*a bug in gpen-watch"
        ):
            load_image(src)
    (record,) = caplog.records
    assert record.exc_info is not None and record.exc_info[0] is AttributeError


def test_a_value_a_plugin_cannot_look_up_is_still_the_files_damage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """KeyError (a mode the plugin's table lacks) says something about the file: not a bug."""
    src = _png(tmp_path)

    def unknown_value(self: object) -> None:
        raise KeyError((7, 3))

    monkeypatch.setattr(PngImagePlugin.PngImageFile, "load_end", unknown_value)
    with pytest.raises(BrokenImageError, match="damaged PNG"):
        load_image(src)


# --- "truncated" only for a file that ends early -------------------------------------------------------


def _psd(layer_block: bytes, w: int = 10, h: int = 10) -> bytes:
    """An 8-bit RGB PSD with a raw composite that ends exactly at the file's end."""
    head = b"8BPS" + struct.pack(">H6xHIIHH", 1, 3, h, w, 8, 3)
    layers = struct.pack(">I", len(layer_block)) + layer_block
    planes = bytes((i * 7) % 256 for i in range(3 * w * h))
    return head + struct.pack(">II", 0, 0) + layers + struct.pack(">H", 0) + planes


# Layer info of 6 bytes that announces 3 layers: Pillow cannot list the layers (its frames).
_BROKEN_LAYERS = struct.pack(">Ih", 6, 3) + b"\0\0\0\0"


def test_a_complete_psd_with_a_broken_layer_block_is_restored_from_its_composite(tmp_path: Path) -> None:
    """Its composite is whole (the file's last byte is its last sample); asking for the layers
    fails and seeking back to "frame 0", which a PSD does not have (its first is 1), raised
    EOFError('attempt to seek outside sequence'), which was reported as "truncated PSD"."""
    src = tmp_path / "layers.psd"
    src.write_bytes(_psd(_BROKEN_LAYERS))
    image = load_image(src)
    assert image.size == (10, 10)
    red, green, blue = (np.arange(300) * 7 % 256).reshape(3, 10, 10)
    assert np.array_equal(image.pixels[..., 2], red)
    assert np.array_equal(image.pixels[..., 1], green)
    assert np.array_equal(image.pixels[..., 0], blue)
    assert image.notes == ["PSD: later frames are unreadable; only the first was restored"]


def test_a_psd_cut_inside_its_composite_is_truncated(tmp_path: Path) -> None:
    src = tmp_path / "cut.psd"
    src.write_bytes(_psd(b"")[:-120])
    with pytest.raises(BrokenImageError, match=r"^.*truncated PSD: the file ends before its image data does"):
        load_image(src)


def test_an_eof_error_is_truncation_only_where_a_read_came_up_short() -> None:
    seek = EOFError("attempt to seek outside sequence")
    complete = explain(Path("a.psd"), "PSD", seek, header=False, ran_out=False)
    assert complete.reason.startswith("damaged PSD: its image data cannot be decoded")
    cut = explain(Path("a.psd"), "PSD", EOFError(), header=False, ran_out=True)
    assert cut.reason.startswith("truncated PSD: the file ends before its image data does")
    short_struct = explain(
        Path("a.psd"), "PSD", struct.error("unpack requires 4 bytes"), header=False, ran_out=True
    )
    assert short_struct.reason.startswith("truncated PSD")


def test_running_out_is_a_short_last_read_since_the_last_seek(tmp_path: Path) -> None:
    src = tmp_path / "ten.bin"
    src.write_bytes(bytes(range(10)))
    with open_file(src) as fh:
        assert fh.read(4) == bytes(range(4)) and fh.read(6) == bytes(range(4, 10))
        assert not ran_out(fh)  # to the exact end
        fh.seek(0)
        fh.read()  # "the rest", whatever its length
        assert not ran_out(fh)
        fh.seek(8)
        assert fh.read(4) == b"\x08\x09"
        assert ran_out(fh)
        fh.seek(0)  # a decoder that goes elsewhere after a short block read
        assert not ran_out(fh)
        fh.seek(8)
        fh.read(4)
        fh.seek(2)
        assert fh.read(2) == b"\x02\x03" and not ran_out(fh)
    with open_file(src) as fh:
        fh.seek(6)
        buf = bytearray(8)
        assert fh.readinto(buf) == 4
        assert ran_out(fh)


# --- a decoder's limitation is not the file's damage ---------------------------------------------------

_W, _H = 16, 8


def _chunk(kind: int, body: bytes) -> bytes:
    return struct.pack("<IH", 6 + len(body), kind) + body


def _frame(*subchunks: bytes) -> bytes:
    body = b"".join(subchunks)
    return struct.pack("<IHH8x", 16 + len(body), 0xF1FA, len(subchunks)) + body


def _flc(prefix: bool, overrun: bool = False) -> bytes:
    """A two-frame 16x8 FLC (palette + byte-run frames, row r of frame f has colour r + 10 f),
    with Animator Pro's prefix chunk before the first frame when ``prefix``; with ``overrun``,
    each line of each frame runs past the image's width (a crafted file, every chunk in place)."""
    palette = bytes(v for i in range(256) for v in (i, 255 - i, (i * 7) % 256))
    color256 = _chunk(4, struct.pack("<HBB", 1, 0, 0) + palette)

    def byte_run(shift: int) -> bytes:
        return _chunk(15, b"".join(bytes([1, 100 if overrun else _W, r + shift]) for r in range(_H)))

    body = struct.pack("<IHH8x", 16, 0xF100, 0) if prefix else b""
    body += _frame(color256, byte_run(0)) + _frame(byte_run(10))
    head = struct.pack("<IHHHHHHI2x", 128 + len(body), 0xAF12, 2, _W, _H, 8, 3, 5).ljust(128, b"\0")
    return head + body


def test_an_intact_flc_the_decoder_misreads_is_not_called_corrupt(tmp_path: Path) -> None:
    """Pillow 13 decodes an FLC's first frame from byte 128 even where a prefix chunk sits there
    (2422.flc): the chunk sizes add up to the file, so the decoder is at fault, not the file."""
    plain = tmp_path / "plain.flc"
    plain.write_bytes(_flc(prefix=False))
    image = load_image(plain)  # the same frames without the prefix chunk decode
    assert image.format == "FLI" and image.size == (_W, _H)
    assert tuple(image.pixels[3, 0]) == (21, 252, 3)  # palette entry 3 as BGR

    src = tmp_path / "prefix.flc"
    src.write_bytes(_flc(prefix=True))
    with Image.open(io.BytesIO(src.read_bytes())) as im, pytest.raises(OSError):
        im.load()  # what Pillow does with it here; if a later Pillow reads it, this test says so
    with pytest.raises(UnsupportedFormatError) as err:
        load_image(src)
    assert err.value.reason == (
        "this FLI/FLC animation is intact (its parts add up to the whole file), but the image decoder "
        "here cannot read it; convert it to PNG with another program (ffmpeg or an image editor, for "
        "example) and drop that instead"
    )


@pytest.mark.parametrize("damage", ["cut", "chunk kind", "length", "every frame overruns"])
def test_an_flc_whose_chunks_do_not_add_up_or_whose_frames_all_fail_is_damaged(
    tmp_path: Path, damage: str
) -> None:
    raw = bytearray(_flc(prefix=True, overrun=damage == "every frame overruns"))
    if damage == "cut":
        raw = raw[:-20]
    elif damage == "every frame overruns":
        pass  # every chunk in place, but no frame decodes: no evidence the decoder is at fault
    elif damage == "chunk kind":
        raw[144 + 4 : 144 + 6] = struct.pack("<H", 0x1234)  # the first frame's kind
    else:
        raw[144:148] = struct.pack("<I", 17)  # the first frame's length
    src = tmp_path / "bad.flc"
    src.write_bytes(bytes(raw))
    with pytest.raises(BrokenImageError) as err:
        load_image(src)
    assert "FLI/FLC animation" in err.value.reason
    assert "intact" not in err.value.reason
