"""gpen_watch.imaging: decode/pre-scale and encode with metadata, on real files written to tmp_path."""

from __future__ import annotations

import errno
import io
import itertools
import os
import re
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import cv2
import numpy as np
import pytest
from claimed_sizes import png_claiming, sparse_bmp
from matplotlib import cbook
from PIL import Image, ImageCms, ImageFile, JpegImagePlugin
from skimage import data

from gpen_watch.base.errors import InputError, OutboxUnavailable, OutputError
from gpen_watch.imaging import load as load_mod
from gpen_watch.imaging.errors import (
    BrokenImageError,
    EmptyFileError,
    ImageTooLargeError,
    NotAnImageError,
    UnsupportedFormatError,
)
from gpen_watch.imaging.formats import SUPPORTED_EXTENSIONS
from gpen_watch.imaging.load import LoadedImage, header_refusal, load_image, probe_image
from gpen_watch.imaging.metadata import estimate_jpeg_quality
from gpen_watch.imaging.save import output_choice, output_format, save_image

TAG_MAKE, TAG_MODEL, TAG_DATETIME, TAG_ORIENTATION = 0x010F, 0x0110, 0x0132, 0x0112
SRGB_ICC = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()

# Pillow transpose that turns the stored pixels upright, per EXIF orientation (EXIF 2.3, 4.6.4).
UPRIGHT_OP = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}
# ... and its inverse, to make a stored image from an upright one.
STORE_OP = {**UPRIGHT_OP, 6: Image.Transpose.ROTATE_90, 8: Image.Transpose.ROTATE_270}


# --- helpers -------------------------------------------------------------------------------------


def astronaut(w: int = 0, h: int = 0) -> Image.Image:
    im = Image.fromarray(data.astronaut())
    return im.resize((w, h), Image.Resampling.LANCZOS) if w else im


def grace_hopper() -> Image.Image:
    with cbook.get_sample_data("grace_hopper.jpg") as fh:
        return Image.open(fh).convert("RGB")


def upright_asymmetric() -> Image.Image:
    """A non-square photo with a marked corner: every orientation maps it differently."""
    arr = np.asarray(astronaut(72, 48)).copy()
    arr[:6, :6] = (255, 0, 0)
    return Image.fromarray(arr)


def camera_exif(orientation: int | None = None) -> Image.Exif:
    exif = Image.Exif()
    exif[TAG_MAKE], exif[TAG_MODEL], exif[TAG_DATETIME] = "Canon", "EOS R5", "2021:05:06 07:08:09"
    exif.get_ifd(0x8769)[0x9003] = "2021:05:06 07:08:09"  # DateTimeOriginal
    if orientation is not None:
        exif[TAG_ORIENTATION] = orientation
    return exif


def rgb_of(li: LoadedImage) -> np.ndarray:
    return cv2.cvtColor(li.pixels, cv2.COLOR_BGR2RGB)


def cmyk_icc_profile() -> bytes:
    """A minimal ICC v2 CMYK printer profile (lut8 A2B0 to Lab), built here since none ships with the OS."""
    from skimage.color import rgb2lab

    def s15(x: float) -> bytes:
        return struct.pack(">i", round(x * 65536))

    text = b"gpen-watch test CMYK\x00"
    desc = b"desc" + bytes(4) + struct.pack(">I", len(text)) + text + bytes(8) + bytes(3) + bytes(67)
    wtpt = b"XYZ " + bytes(4) + s15(0.9642) + s15(1.0) + s15(0.8249)
    corners = list(itertools.product([0.0, 1.0], repeat=4))  # first input varies slowest
    rgb = np.array([[(1 - c) * (1 - k), (1 - m) * (1 - k), (1 - y) * (1 - k)] for c, m, y, k in corners])
    lab = rgb2lab(rgb[None])[0]
    clut = np.clip(np.round(np.stack([lab[:, 0] * 2.55, lab[:, 1] + 128, lab[:, 2] + 128], 1)), 0, 255)
    ident = bytes(range(256))
    a2b0 = (
        b"mft1" + bytes(4) + bytes([4, 3, 2, 0]) + b"".join(s15(v) for v in (1, 0, 0, 0, 1, 0, 0, 0, 1))
        + ident * 4 + clut.astype(np.uint8).tobytes() + ident * 3
    )  # fmt: skip
    tags = [(b"desc", desc), (b"wtpt", wtpt), (b"cprt", b"text" + bytes(4) + b"none\x00"), (b"A2B0", a2b0)]
    start = 128 + 4 + 12 * len(tags)
    table, body = struct.pack(">I", len(tags)), b""
    for sig, blob in tags:
        body += bytes(-(start + len(body)) % 4)
        table += sig + struct.pack(">II", start + len(body), len(blob))
        body += blob
    header = (
        struct.pack(">I", start + len(body)) + bytes(4) + struct.pack(">I", 0x02100000) + b"prtrCMYKLab "
        + bytes(12) + b"acsp" + bytes(28) + s15(0.9642) + s15(1.0) + s15(0.8249)
    ).ljust(128, b"\0")  # fmt: skip
    return header + table + body


# --- orientation ---------------------------------------------------------------------------------


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation_png_exact(tmp_path: Path, orientation: int) -> None:
    upright = upright_asymmetric()
    stored = upright.transpose(STORE_OP[orientation]) if orientation > 1 else upright
    src = tmp_path / "o.png"
    stored.save(src, exif=camera_exif(orientation))

    li = load_image(src)

    assert np.array_equal(rgb_of(li), np.asarray(upright))
    assert li.original_size == upright.size
    assert li.orientation == orientation
    assert li.oriented == (orientation != 1)
    exif = Image.Exif()
    exif.load(li.exif)
    assert exif[TAG_ORIENTATION] == 1  # pixels are upright now
    # Cross-check with Pillow's own interpretation.
    from PIL import ImageOps

    with Image.open(src) as im:
        assert np.array_equal(np.asarray(ImageOps.exif_transpose(im).convert("RGB")), rgb_of(li))


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation_jpeg(tmp_path: Path, orientation: int) -> None:
    upright = upright_asymmetric()
    stored = upright.transpose(STORE_OP[orientation]) if orientation > 1 else upright
    src = tmp_path / "o.jpg"
    stored.save(src, quality=98, subsampling=0, exif=camera_exif(orientation))

    li = load_image(src)

    diff = np.abs(rgb_of(li).astype(int) - np.asarray(upright).astype(int))
    assert li.size == upright.size
    assert diff.mean() < 3
    assert tuple(int(v) for v in rgb_of(li)[2, 2]) == pytest.approx((255, 0, 0), abs=20)  # marked corner


def set_orientation(path: Path, orientation: int) -> None:
    """Patch the EXIF Orientation our writer stored as 1 (PNG eXIf or TIFF IFD0), fixing a PNG CRC."""
    raw = bytearray(path.read_bytes())
    patterns = {
        b"\x01\x12\x00\x03\x00\x00\x00\x01\x00\x01": 9,
        b"\x12\x01\x03\x00\x01\x00\x00\x00\x01\x00": 8,
    }
    hits = [(raw.index(p) + at) for p, at in patterns.items() if raw.count(p) == 1]
    assert len(hits) == 1
    raw[hits[0]] = orientation
    if raw.startswith(b"\x89PNG"):
        c = raw.index(b"eXIf")
        n = struct.unpack(">I", raw[c - 4 : c])[0]
        raw[c + 4 + n : c + 8 + n] = struct.pack(">I", zlib.crc32(bytes(raw[c : c + 4 + n])))
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("fmt", ["png", "tiff"])
@pytest.mark.parametrize("orientation", [3, 6, 7])
def test_orientation_applies_to_16bit_colour(tmp_path: Path, fmt: str, orientation: int) -> None:
    arr = np.arange(20 * 30 * 3, dtype=np.uint16).reshape(20, 30, 3) * 7
    src = tmp_path / "o16.png"
    cv2.imwrite(str(src), arr)
    li = load_image(src)
    li.exif = camera_exif(1).tobytes()  # Pillow cannot write 16-bit colour: use our writer, then patch
    stored_img = Image.fromarray(np.zeros((20, 30), np.uint8))
    upright_shape = stored_img.transpose(UPRIGHT_OP[orientation]).size[::-1]
    out = save_image(li, li.pixels, tmp_path / f"rotated.{fmt}", format=fmt)
    set_orientation(out, orientation)

    back = load_image(out)

    assert back.pixels.dtype == np.uint16
    assert back.orientation == orientation
    assert back.pixels.shape[:2] == upright_shape
    expect = {3: np.rot90(arr, 2), 6: np.rot90(arr, -1), 7: np.rot90(arr, 2).swapaxes(0, 1)}[orientation]
    assert np.array_equal(back.pixels, expect)


# --- modes ---------------------------------------------------------------------------------------


def test_grayscale_jpeg_loads_and_saves_as_gray(tmp_path: Path) -> None:
    src = tmp_path / "gray.jpg"
    grace_hopper().convert("L").save(src, quality=95)

    li = load_image(src)
    assert li.mode == "L"
    assert li.is_gray
    assert li.alpha is None
    assert li.pixels.shape == (600, 512, 3)
    assert li.pixels.dtype == np.uint8
    assert np.array_equal(li.pixels[..., 0], li.pixels[..., 2])

    tinted = li.pixels.copy()
    tinted[..., 2] = np.clip(tinted[..., 2].astype(int) + 40, 0, 255)  # "restored" in colour
    out = save_image(li, tinted, tmp_path / "out.jpg")
    with Image.open(out) as im:
        assert im.mode == "L"


def test_rgba_png_alpha_round_trip(tmp_path: Path) -> None:
    rgb = np.asarray(astronaut(128, 96))
    alpha = np.tile(np.linspace(0, 255, 128).astype(np.uint8), (96, 1))
    src = tmp_path / "a.png"
    Image.fromarray(np.dstack([rgb, alpha])).save(src)

    li = load_image(src)
    assert li.mode == "RGBA"
    assert np.array_equal(li.alpha, alpha)
    assert np.array_equal(rgb_of(li), rgb)

    out = save_image(li, li.pixels, tmp_path / "out.png")
    with Image.open(out) as back:
        assert back.mode == "RGBA"
        assert np.array_equal(np.asarray(back), np.dstack([rgb, alpha]))
    # JPEG has no alpha: dropped, colours kept.
    jpg = save_image(li, li.pixels, tmp_path / "out.jpg", format="jpeg")
    with Image.open(jpg) as im:
        assert im.mode == "RGB"


def test_la_png_keeps_alpha_and_gray(tmp_path: Path) -> None:
    gray = np.asarray(grace_hopper().convert("L").resize((64, 75)))
    alpha = np.full_like(gray, 128)
    src = tmp_path / "la.png"
    Image.fromarray(np.dstack([gray, alpha])).save(src)

    li = load_image(src)
    assert li.mode == "LA"
    assert np.array_equal(li.alpha, alpha)
    assert np.array_equal(li.pixels[..., 1], gray)
    with Image.open(save_image(li, li.pixels, tmp_path / "out.png")) as out:
        assert out.mode == "LA"
        assert np.array_equal(np.asarray(out), np.dstack([gray, alpha]))


def test_palette_with_and_without_transparency(tmp_path: Path) -> None:
    pal = astronaut(64, 64).quantize(16)
    idx = np.asarray(pal)
    clear = int(idx[0, 0])
    with_t = tmp_path / "pt.png"
    pal.save(with_t, transparency=clear)
    without = tmp_path / "p.png"
    pal.save(without)

    li = load_image(with_t)
    assert li.mode == "P"
    assert li.alpha is not None
    assert np.array_equal(li.alpha == 0, idx == clear)
    assert np.array_equal(rgb_of(li), np.asarray(pal.convert("RGB")))

    li2 = load_image(without)
    assert li2.mode == "P"
    assert li2.alpha is None
    assert np.array_equal(rgb_of(li2), np.asarray(pal.convert("RGB")))
    with Image.open(save_image(li, li.pixels, tmp_path / "out")) as im:
        assert im.mode == "RGBA"


@pytest.mark.parametrize("ext", [".png", ".tif"])
def test_16bit_colour_round_trip(tmp_path: Path, ext: str) -> None:
    base = np.asarray(astronaut(160, 120)).astype(np.uint16) * 256
    arr = (base + np.arange(160, dtype=np.uint16)[None, :, None])[..., ::-1]  # BGR; low byte used too
    src = tmp_path / f"c16{ext}"
    cv2.imwrite(str(src), np.ascontiguousarray(arr))

    li = load_image(src)
    assert li.pixels.dtype == np.uint16
    assert li.bit_depth == 16
    assert li.mode == "RGB"
    assert np.array_equal(li.pixels, arr)
    assert li.bgr8.dtype == np.uint8
    assert abs(int(li.bgr8[5, 5, 0]) - round(arr[5, 5, 0] / 257)) <= 1

    out = save_image(li, li.pixels, tmp_path / f"out{ext}")
    assert np.array_equal(cv2.imread(str(out), cv2.IMREAD_UNCHANGED), arr)
    assert np.array_equal(load_image(out).pixels, arr)


@pytest.mark.parametrize("ext", [".png", ".tif"])
def test_16bit_gray_and_rgba_round_trip(tmp_path: Path, ext: str) -> None:
    gray = (np.asarray(grace_hopper().convert("L").resize((50, 60))).astype(np.uint16) * 257) + 3
    src = tmp_path / f"g16{ext}"
    cv2.imwrite(str(src), gray)
    li = load_image(src)
    assert li.pixels.dtype == np.uint16
    assert li.is_gray
    with Image.open(save_image(li, li.pixels, tmp_path / f"g_out{ext}")) as out:
        assert out.mode.startswith("I;16")
        assert np.array_equal(np.asarray(out), gray)

    bgra = np.dstack([np.stack([gray] * 3, -1), np.full_like(gray, 40000)])
    src2 = tmp_path / f"a16{ext}"
    cv2.imwrite(str(src2), bgra)
    li2 = load_image(src2)
    assert li2.alpha is not None
    assert li2.alpha.dtype == np.uint16
    assert np.all(li2.alpha == 40000)
    out2 = save_image(li2, li2.pixels, tmp_path / f"a_out{ext}")
    assert np.array_equal(cv2.imread(str(out2), cv2.IMREAD_UNCHANGED), bgra)


def test_cmyk_jpeg_plain_conversion(tmp_path: Path) -> None:
    src = tmp_path / "cmyk.jpg"
    grace_hopper().convert("CMYK").save(src, quality=95)

    li = load_image(src)
    assert li.mode == "CMYK"
    assert li.format == "JPEG"
    assert li.icc_profile is None
    assert any("without colour management" in n and "no ICC profile" in n for n in li.notes)
    diff = np.abs(rgb_of(li).astype(int) - np.asarray(grace_hopper()).astype(int))
    assert diff.mean() < 4
    with Image.open(save_image(li, li.pixels, tmp_path / "out.jpg")) as im:
        assert im.mode == "RGB"


def test_cmyk_jpeg_with_icc_profile_is_colour_managed(tmp_path: Path) -> None:
    icc = cmyk_icc_profile()
    cmyk = np.zeros((16, 16, 4), np.uint8)
    cmyk[:8, :, 0] = 255  # top: 100 % cyan; bottom: paper white
    src = tmp_path / "cmyk_icc.jpg"
    Image.fromarray(cmyk, "CMYK").save(src, quality=100, icc_profile=icc)

    li = load_image(src)
    assert any("using the embedded ICC profile" in n for n in li.notes)
    assert li.icc_profile is not None
    assert ImageCms.getProfileDescription(ImageCms.ImageCmsProfile(io.BytesIO(li.icc_profile))).startswith(
        "sRGB"
    )
    with Image.open(src) as im:
        naive = np.asarray(im.convert("RGB"))
    managed = rgb_of(li)
    assert managed[12, 8].min() > 240  # white stays white
    assert managed[4, 8, 0] - naive[4, 8, 0] > 20  # the profile's cyan is not the naive (0,255,255)


def test_progressive_jpeg(tmp_path: Path) -> None:
    src = tmp_path / "prog.jpg"
    grace_hopper().save(src, quality=90, progressive=True)
    with Image.open(src) as im:
        assert im.info.get("progressive")

    li = load_image(src)
    with Image.open(src) as im:
        assert np.array_equal(rgb_of(li), np.asarray(im.convert("RGB")))
    small = load_image(src, max_side=150)
    assert small.size == (128, 150)


def test_jpeg_quality_and_subsampling_are_read_and_kept(tmp_path: Path) -> None:
    src = tmp_path / "q.jpg"
    grace_hopper().save(src, quality=80, subsampling=1)
    li = load_image(src)
    assert li.jpeg_quality == 80
    assert li.jpeg_subsampling == 1
    with Image.open(save_image(li, li.pixels, tmp_path / "out.jpg", jpeg_quality=93)) as out:
        assert JpegImagePlugin.get_sampling(out) == 1
        assert estimate_jpeg_quality(out.quantization) == 93


# --- metadata ------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["jpeg", "png", "webp", "tiff"])
def test_icc_exif_dpi_carried_to_output(tmp_path: Path, fmt: str) -> None:
    src = tmp_path / "meta.jpg"
    grace_hopper().save(src, quality=92, exif=camera_exif(6), icc_profile=SRGB_ICC, dpi=(300, 300))

    li = load_image(src)
    with Image.open(save_image(li, li.pixels, tmp_path / f"out.{fmt}", format=fmt)) as out:
        assert out.format == fmt.upper()
        assert out.size == (600, 512)  # rotated upright
        assert out.info.get("icc_profile") == SRGB_ICC
        exif = out.getexif()
        assert (exif[TAG_MAKE], exif[TAG_MODEL], exif[TAG_DATETIME]) == (
            "Canon",
            "EOS R5",
            "2021:05:06 07:08:09",
        )
        assert exif.get_ifd(0x8769)[0x9003] == "2021:05:06 07:08:09"
        assert exif[TAG_ORIENTATION] == 1  # already upright: viewers must not rotate again
        if fmt != "webp":  # WebP has no resolution field
            assert out.info["dpi"] == pytest.approx((300, 300), abs=0.01)
        written = out.filename
    # Viewers agree: OpenCV honours Orientation and sees the same upright image.
    seen = cv2.imread(str(written), cv2.IMREAD_COLOR)
    assert seen.shape == (512, 600, 3)


def test_xmp_carried_with_orientation_reset(tmp_path: Path) -> None:
    xmp = (
        b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
        b'<rdf:Description xmlns:tiff="http://ns.adobe.com/tiff/1.0/" xmlns:dc="http://purl.org/dc/elements/1.1/"'
        b' tiff:Orientation="8"><dc:title>Grandma 1962</dc:title></rdf:Description></rdf:RDF></x:xmpmeta>'
    )
    src = tmp_path / "xmp.jpg"
    grace_hopper().save(src, exif=camera_exif(8), xmp=xmp)
    li = load_image(src)
    for fmt in ("jpeg", "png", "webp", "tiff"):
        with Image.open(save_image(li, li.pixels, tmp_path / f"x.{fmt}", format=fmt)) as im:
            got = im.info.get("xmp")
        got = got.encode() if isinstance(got, str) else got
        assert b"Grandma 1962" in got, fmt
        assert b'tiff:Orientation="1"' in got, fmt


def test_jpeg_comment_carried_to_output(tmp_path: Path) -> None:
    # Archivists keep provenance in the COM marker; bytes that are not UTF-8 must survive too.
    comment = b"Scanned 1987 from print no. 42, Smith family archive \xe9"
    src = tmp_path / "com.jpg"
    grace_hopper().save(src, quality=92, exif=camera_exif(6), comment=comment)
    li = load_image(src)
    assert li.comment == comment
    with Image.open(save_image(li, li.pixels, tmp_path / "out.jpg", format="jpeg")) as out:
        assert out.info.get("comment") == comment
        assert out.getexif()[TAG_MAKE] == "Canon"  # alongside the EXIF, not instead of it
    with Image.open(save_image(li, li.pixels, tmp_path / "out.png", format="png")) as png:
        assert png.info.get("Comment") == comment.decode("utf-8", "replace")
    # A JPEG without one gets none (Pillow would copy the sample photo's own comment over).
    Image.fromarray(np.asarray(grace_hopper())).save(tmp_path / "plain.jpg")
    plain = load_image(tmp_path / "plain.jpg")
    assert plain.comment is None
    with Image.open(save_image(plain, plain.pixels, tmp_path / "p.jpg")) as im:
        assert "comment" not in im.info


def test_oversized_exif_drops_makernote_for_jpeg(tmp_path: Path) -> None:
    src = tmp_path / "big_exif.png"  # PNG allows any EXIF size; JPEG's APP1 holds 64 KiB
    exif = camera_exif()
    exif.get_ifd(0x8769)[0x927C] = b"\x01" * 70000  # MakerNote
    astronaut(64, 64).save(src, exif=exif)
    li = load_image(src)
    with Image.open(save_image(li, li.pixels, tmp_path / "out.jpg", format="jpeg")) as out:
        got = out.getexif()
    assert got[TAG_MAKE] == "Canon"
    assert 0x927C not in got.get_ifd(0x8769)


def test_prescale_scales_dpi(tmp_path: Path) -> None:
    src = tmp_path / "scan.png"
    grace_hopper().save(src, dpi=(600, 600))
    li = load_image(src, max_side=300)
    assert li.scale == pytest.approx(0.5)
    with Image.open(save_image(li, li.pixels, tmp_path / "out.png")) as out:
        assert out.info["dpi"] == pytest.approx((300, 300), abs=0.01)  # same physical size


# --- frames and pre-scale ------------------------------------------------------------------------


def test_animated_gif_uses_first_frame_with_note(tmp_path: Path) -> None:
    frames = [astronaut(64, 64), grace_hopper().resize((64, 64)), astronaut(64, 64).rotate(90)]
    src = tmp_path / "anim.gif"
    frames[0].save(src, save_all=True, append_images=frames[1:], duration=100, loop=0)

    li = load_image(src)
    assert li.format == "GIF"
    assert li.size == (64, 64)
    assert any("3 frames; only the first" in n for n in li.notes)
    with Image.open(src) as im:
        first = np.asarray(im.convert("RGB"))
    assert np.array_equal(rgb_of(li), first)
    # gpen-watch writes no GIF: an opaque one becomes a JPEG (the output rule), the note says why.
    choice = output_choice(li, "same", 90)
    assert choice.format == "JPEG"
    assert choice.note == "written as JPEG (quality 90): gpen-watch does not write GIF"


def test_multipage_tiff_and_animated_webp_notes(tmp_path: Path) -> None:
    tif = tmp_path / "pages.tif"
    astronaut(40, 30).save(tif, save_all=True, append_images=[grace_hopper().resize((40, 30))])
    assert any("2 pages" in n for n in load_image(tif).notes)
    webp = tmp_path / "anim.webp"
    astronaut(40, 30).save(webp, save_all=True, append_images=[grace_hopper().resize((40, 30))], duration=50)
    li = load_image(webp)
    assert any("2 frames" in n for n in li.notes)
    assert li.size == (40, 30)


def test_prescale_decodes_jpeg_at_reduced_dct_scale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "big.jpg"
    astronaut(2400, 1600).save(src, quality=92)
    full = cv2.resize(load_image(src).pixels, (500, 333), interpolation=cv2.INTER_AREA)
    shapes: list[tuple[int, ...]] = []
    real_imdecode = cv2.imdecode

    def spy(buf, flags):  # type: ignore[no-untyped-def]
        out = real_imdecode(buf, flags)
        shapes.append(out.shape)
        return out

    monkeypatch.setattr(cv2, "imdecode", spy)
    li = load_image(src, max_side=500)

    assert shapes == [(400, 600, 3)]  # DCT-decoded at 1/4: still >= the 500x333 target
    assert li.size == (500, 333)
    assert li.original_size == (2400, 1600)
    assert li.scale == pytest.approx(500 / 2400)
    assert "pre-scaled from 2400x1600 to 500x333" in li.notes
    assert np.abs(full.astype(int) - li.pixels.astype(int)).mean() < 2


def test_prescale_uses_pillow_draft_when_pillow_decodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "big_trailer.jpg"
    astronaut(2400, 1600).save(src, quality=92)
    with open(src, "ab") as fh:
        fh.write(b"SAMSUNG-TRAILER" * 10)  # data after EOI: some phones append it; Pillow path
    drafts: list[tuple] = []
    real_draft = JpegImagePlugin.JpegImageFile.draft

    def spy(self, mode, size):  # type: ignore[no-untyped-def]
        result = real_draft(self, mode, size)
        drafts.append((size, self.size))
        return result

    monkeypatch.setattr(JpegImagePlugin.JpegImageFile, "draft", spy)
    li = load_image(src, max_side=500)

    assert drafts == [((500, 333), (600, 400))]  # decoded at 1/4 by Pillow's draft
    assert li.size == (500, 333)
    assert "pre-scaled from 2400x1600 to 500x333" in li.notes


def test_jpeg_fast_path_matches_pillow(tmp_path: Path) -> None:
    src = tmp_path / "gh.jpg"
    grace_hopper().save(src, quality=90, subsampling=2)
    li = load_image(src)
    with Image.open(src) as im:
        assert np.array_equal(li.pixels, cv2.cvtColor(np.asarray(im), cv2.COLOR_RGB2BGR))


def test_prescale_with_rotation_and_alpha(tmp_path: Path) -> None:
    src = tmp_path / "rot.jpg"
    astronaut(1200, 800).save(src, exif=camera_exif(6))
    li = load_image(src, max_side=300)
    assert li.original_size == (800, 1200)
    assert li.size == (200, 300)
    assert "pre-scaled from 800x1200 to 200x300" in li.notes
    assert li.prescale_seconds > 0  # the resize is timed for the engine's "prescale" stage

    png = tmp_path / "alpha.png"
    Image.fromarray(np.dstack([np.asarray(astronaut(400, 200)), np.full((200, 400), 77, np.uint8)])).save(png)
    li2 = load_image(png, max_side=100)
    assert li2.size == (100, 50)
    assert li2.alpha.shape == (50, 100)
    assert np.all(li2.alpha == 77)


def test_no_prescale_when_small_enough(tmp_path: Path) -> None:
    src = tmp_path / "s.jpg"
    grace_hopper().save(src)
    li = load_image(src, max_side=600)
    assert li.scale == 1.0
    assert li.size == (512, 600)
    assert li.notes == []
    assert li.prescale_seconds == 0.0


# --- refusals ------------------------------------------------------------------------------------


def test_decompression_bomb_refused_before_decoding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = png_claiming(tmp_path / "bomb.png", 20000, 20000)
    assert probe_image(src, 200) == ("PNG", (20000, 20000))  # header only: cheap, no error

    def no_decoding(self):  # type: ignore[no-untyped-def]
        raise AssertionError("pixels were decoded")

    monkeypatch.setattr(Image.Image, "load", no_decoding)
    monkeypatch.setattr(ImageFile.ImageFile, "load", no_decoding)
    # 400 MP in 77 bytes: no limit would let it through, so the advice is not to raise one.
    with pytest.raises(BrokenImageError) as err:
        load_image(src)
    assert err.value.reason.startswith("damaged PNG: its header declares 20000x20000 (400 MP), more than")
    assert "max_megapixels" not in err.value.reason
    assert err.value.kind == "failed"
    assert isinstance(err.value, InputError)


def test_megapixel_limit_is_ours_not_pillows(tmp_path: Path) -> None:
    before = Image.MAX_IMAGE_PIXELS
    src = tmp_path / "a.png"
    astronaut().save(src)
    with pytest.raises(ImageTooLargeError, match=r"512x512 \(0 MP\), over the 0.1 MP limit"):
        load_image(src, max_megapixels=0.1)
    # 190 MP: Image.open would raise DecompressionBombError (over 2 x 89.5 MP); our opener reads the
    # header, and the refusal names our own limit.
    big = sparse_bmp(tmp_path / "big.bmp", 19000, 10000)
    assert probe_image(big, 150) == ("BMP", (19000, 10000))
    with pytest.raises(ImageTooLargeError, match="19000x10000 \\(190 MP\\), over the 150 MP limit"):
        load_image(big, max_megapixels=150)
    # Pillow's own guard is held to ours only while gpen-watch reads a source: put back afterwards,
    # the process's other images (a larger restored result, a thumbnail) open under Pillow's own.
    assert before == Image.MAX_IMAGE_PIXELS
    load_image(src, max_megapixels=200)
    assert before == Image.MAX_IMAGE_PIXELS
    assert isinstance(header_refusal(big, 1), ImageTooLargeError)
    assert before == Image.MAX_IMAGE_PIXELS


def test_truncated_jpeg_refused(tmp_path: Path) -> None:
    whole = tmp_path / "whole.jpg"
    grace_hopper().save(whole, quality=95)
    src = tmp_path / "cut.jpg"
    src.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    with pytest.raises(BrokenImageError) as err:
        load_image(src)
    assert err.value.reason == (
        "truncated JPEG: the file ends before its image data does; copy it again from the original"
    )
    with pytest.raises(BrokenImageError):
        load_image(src, max_side=100)  # also through draft


def test_truncated_png_refused(tmp_path: Path) -> None:
    whole = tmp_path / "whole.png"
    astronaut().save(whole)
    src = tmp_path / "cut.png"
    src.write_bytes(whole.read_bytes()[: whole.stat().st_size * 2 // 3])
    with pytest.raises(BrokenImageError, match="PNG"):
        load_image(src)


def test_truncated_16bit_png_refused(tmp_path: Path) -> None:
    whole = tmp_path / "w16.png"
    cv2.imwrite(str(whole), (np.random.default_rng(0).random((200, 200, 3)) * 65535).astype(np.uint16))
    src = tmp_path / "cut16.png"
    src.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    with pytest.raises(BrokenImageError):
        load_image(src)


@pytest.mark.filterwarnings("ignore::UserWarning")  # Pillow warns about cut TIFF tags
@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "GIF", "WEBP", "TIFF", "BMP"])
def test_cut_anywhere_gives_a_clear_error(tmp_path: Path, fmt: str) -> None:
    whole = tmp_path / "whole"
    astronaut(96, 64).save(whole, format=fmt)
    raw = whole.read_bytes()
    for cut in sorted({1, 2, 5, 12, 20, 40, 100, 300, len(raw) // 2, len(raw) - 10}):
        src = tmp_path / f"cut{cut}.{fmt.lower()}"
        src.write_bytes(raw[:cut])
        try:
            load_image(src)
        except InputError as exc:
            assert exc.reason
            assert str(src) in str(exc)
        # Loading without an error is acceptable only if the data really was complete enough.


def test_zero_byte_file(tmp_path: Path) -> None:
    src = tmp_path / "empty.jpg"
    src.touch()
    with pytest.raises(EmptyFileError) as err:
        load_image(src)
    assert err.value.reason == "file is empty (0 bytes)"
    assert err.value.kind == "unsupported"


def test_random_bytes_named_jpg(tmp_path: Path) -> None:
    src = tmp_path / "noise.jpg"
    src.write_bytes(np.random.default_rng(1).integers(0, 256, 5000, dtype=np.uint8).tobytes())
    with pytest.raises(NotAnImageError, match=r"not an image file \(unrecognised content\)"):
        load_image(src)


def test_text_file_named_jpg(tmp_path: Path) -> None:
    src = tmp_path / "notes.jpg"
    src.write_text("Shopping list:\n- milk\n- film for the Leica\n" * 20, encoding="utf-8")
    with pytest.raises(NotAnImageError) as err:
        probe_image(src, 200)
    assert err.value.reason == "not an image file (looks like text)"
    with pytest.raises(NotAnImageError):
        load_image(src)


def test_png_that_is_really_a_jpeg(tmp_path: Path) -> None:
    src = tmp_path / "photo.png"
    grace_hopper().save(src, format="JPEG")
    li = load_image(src)
    assert li.format == "JPEG"
    assert li.size == (512, 600)
    assert output_format(li.format) == "JPEG"


def test_directory_named_like_a_photo(tmp_path: Path) -> None:
    folder = tmp_path / "photo.jpg"
    folder.mkdir()
    with pytest.raises(NotAnImageError, match="is a directory"):
        load_image(folder)


def test_fifo_is_not_a_regular_file(tmp_path: Path) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this OS")
    fifo = tmp_path / "pipe.jpg"
    os.mkfifo(fifo)
    with pytest.raises(NotAnImageError, match="not a regular file"):
        load_image(fifo)


@pytest.mark.skipif(not hasattr(os, "O_NOFOLLOW"), reason="needs O_NOFOLLOW")
def test_symlink_is_not_followed(tmp_path: Path) -> None:
    """A link swapped into an inbox after the watcher looked must not make the worker read (and
    restore, and publish) whatever it points to."""
    target = tmp_path / "elsewhere.jpg"
    grace_hopper().save(target)
    link = tmp_path / "link.jpg"
    link.symlink_to(target)
    for fn in (load_image, probe_image):
        with pytest.raises(NotAnImageError, match="symbolic link"):
            fn(link, max_megapixels=200)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this OS")
def test_fifo_swapped_in_after_the_check_is_not_waited_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The open itself refuses what is not a regular file, without blocking: a FIFO that replaced the
    photo between the check and the open must not hang the worker."""
    import threading

    fifo = tmp_path / "pipe.jpg"
    os.mkfifo(fifo)
    monkeypatch.setattr(load_mod, "check_path", lambda path: None)  # the swap happens right after it
    outcome: list[BaseException] = []

    def load() -> None:
        try:
            load_image(fifo)
        except BaseException as exc:  # noqa: BLE001 - reported below
            outcome.append(exc)

    t = threading.Thread(target=load, daemon=True)
    t.start()
    t.join(5.0)
    if t.is_alive():
        with open(fifo, "wb"):  # release the blocked open so the thread can end
            pass
        pytest.fail("load_image blocked opening a FIFO")
    assert isinstance(outcome[0], NotAnImageError)
    assert "not a regular file" in str(outcome[0])


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file not found"):
        load_image(tmp_path / "gone.jpg")


def test_heic_without_pillow_heif(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # As if pillow-heif were absent: not importable, and its opener not registered with Pillow.
    monkeypatch.setitem(sys.modules, "pillow_heif", None)
    monkeypatch.delitem(Image.OPEN, "HEIF", raising=False)
    monkeypatch.setattr(Image, "ID", [fmt for fmt in Image.ID if fmt != "HEIF"])
    src = tmp_path / "iphone.heic"
    src.write_bytes(struct.pack(">I", 24) + b"ftypheic" + bytes(4) + b"mif1heic" + bytes(200))
    with pytest.raises(UnsupportedFormatError) as err:
        load_image(src)
    assert err.value.reason == (
        "HEIC images need the pillow-heif package, which is not installed here; "
        "install it (pip install pillow-heif), or export the photo as JPEG"
    )
    assert err.value.kind == "unsupported"


def test_raw_files_refused_by_name(tmp_path: Path) -> None:
    src = tmp_path / "IMG_0001.CR2"
    astronaut(64, 64).save(src, format="TIFF")  # a CR2 is TIFF-shaped; Pillow would read its preview
    with pytest.raises(UnsupportedFormatError, match="camera RAW"):
        load_image(src)


def test_supported_extensions() -> None:
    assert {
        ".jpg",
        ".jpeg",
        ".png",
        ".webp",
        ".tif",
        ".tiff",
        ".bmp",
        ".gif",
        ".heic",
        ".heif",
    } <= SUPPORTED_EXTENSIONS
    assert all(e == e.lower() and e.startswith(".") for e in SUPPORTED_EXTENSIONS)


def test_probe_reads_header_only(tmp_path: Path) -> None:
    src = tmp_path / "p.webp"
    astronaut(300, 200).save(src, quality=80)
    assert probe_image(src, 200) == ("WEBP", (300, 200))


# --- saving --------------------------------------------------------------------------------------


def test_output_format_mapping() -> None:
    assert output_format("JPEG") == "JPEG"
    assert output_format("MPO") == "JPEG"
    assert output_format("TIFF", "png") == "PNG"
    assert output_format("PNG", "jpg") == "JPEG"
    assert output_format("HEIF") == "JPEG"
    assert output_format("GIF") == "JPEG"
    assert output_format("BMP") == "BMP"
    assert output_format("AVIF") == "AVIF"
    with pytest.raises(ValueError, match="unknown output format"):
        output_format("PNG", "jxl")


@pytest.mark.parametrize("out", ["same", "jpeg", "png", "webp", "tiff"])
@pytest.mark.parametrize("mode", ["L", "LA", "RGB", "RGBA", "P"])
@pytest.mark.parametrize("depth", [8, 16])
def test_every_mode_writes_to_every_format(tmp_path: Path, mode: str, out: str, depth: int) -> None:
    photo = astronaut(48, 32)
    im = photo.quantize(16) if mode == "P" else photo.convert(mode)
    if "A" in mode:
        alpha = np.full((32, 48), 255, np.uint8)
        alpha[:, :10] = 0
        im.putalpha(Image.fromarray(alpha))
    src = tmp_path / "src.png"
    im.save(src)
    li = load_image(src)
    pixels = li.pixels if depth == 8 else li.pixels.astype(np.uint16) * 257

    back = load_image(save_image(li, pixels, tmp_path / "out", format=out))

    assert back.size == (48, 32)
    keeps_16 = depth == 16 and back.format in ("PNG", "TIFF")
    assert back.pixels.dtype == (np.uint16 if keeps_16 else np.uint8)
    if mode in ("L", "LA") and back.format != "WEBP" and not (mode == "LA" and keeps_16):
        assert back.is_gray
    if "A" in mode and back.format != "JPEG":
        assert back.alpha is not None
        assert int(back.alpha[:, :10].max()) == 0


def test_save_does_not_overwrite_a_different_file(tmp_path: Path) -> None:
    src = tmp_path / "in.png"
    astronaut(64, 64).save(src)
    li = load_image(src)
    dst = tmp_path / "out.png"
    dst.write_bytes(b"someone else's file")

    with pytest.raises(OutputError, match=re.escape("out.png: a different file already exists")):
        save_image(li, li.pixels, dst)
    assert dst.read_bytes() == b"someone else's file"
    assert save_image(li, li.pixels, dst, overwrite=True) == dst
    assert np.array_equal(load_image(dst).pixels, li.pixels)
    save_image(li, li.pixels, dst)  # identical content already there: fine
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.png", "out.png"]


@pytest.mark.parametrize(
    ("where", "err", "reason"),
    [("fsync", errno.ENOSPC, "disk full"), ("open", errno.EACCES, "permission denied"),
     ("write", errno.EROFS, "read-only file system")],
)  # fmt: skip
def test_save_failure_leaves_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, err: int, reason: str
) -> None:
    src = tmp_path / "in.jpg"
    grace_hopper().save(src)
    li = load_image(src)
    out_dir = tmp_path / "out"
    out_dir.mkdir()

    def fail(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise OSError(err, os.strerror(err))

    if where == "open":
        monkeypatch.setattr(os, "open", fail)
    elif where == "fsync":
        monkeypatch.setattr(os, "fsync", fail)
    else:
        import gpen_watch.imaging.save as save_mod

        real = save_mod._write_synced

        def half_written(tmp: Path, data: bytes) -> None:
            real(tmp, data[:100])  # the temp exists, then the disk goes read-only
            fail()

        monkeypatch.setattr(save_mod, "_write_synced", half_written)
    with pytest.raises(OutputError) as exc:
        save_image(li, li.pixels, out_dir / "r.jpg")
    assert str(out_dir) in str(exc.value)
    assert "r.jpg" in str(exc.value)
    assert reason in str(exc.value)
    # The folder refuses writes as a whole: the caller holds the photo rather than failing it.
    assert isinstance(exc.value, OutboxUnavailable)
    assert list(out_dir.iterdir()) == []


def test_write_error_tells_a_refusing_folder_from_a_bad_name(tmp_path: Path) -> None:
    from gpen_watch.imaging.save import write_error

    for err in (errno.ENOSPC, errno.EROFS, errno.EACCES, errno.ENOENT, errno.EIO):
        assert isinstance(write_error(tmp_path / "a.jpg", OSError(err, os.strerror(err))), OutboxUnavailable)
    e = write_error(tmp_path / "a.jpg", OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG)))
    assert type(e) is OutputError
    assert "file name too long" in str(e)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root ignores permissions")
def test_save_into_read_only_folder(tmp_path: Path) -> None:
    src = tmp_path / "in.jpg"
    grace_hopper().save(src)
    li = load_image(src)
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        with pytest.raises(OutputError, match="permission denied") as err:
            save_image(li, li.pixels, ro / "r.jpg")
        assert str(ro) in str(err.value)
        assert list(ro.iterdir()) == []
    finally:
        ro.chmod(0o755)


def test_save_onto_a_directory(tmp_path: Path) -> None:
    src = tmp_path / "in.jpg"
    grace_hopper().save(src)
    li = load_image(src)
    (tmp_path / "taken.jpg").mkdir()
    with pytest.raises(OutputError, match="is a directory"):
        save_image(li, li.pixels, tmp_path / "taken.jpg")


def test_saved_file_permissions_follow_umask(tmp_path: Path) -> None:
    if os.name != "posix":
        pytest.skip("POSIX permissions")
    src = tmp_path / "in.png"
    astronaut(32, 32).save(src)
    li = load_image(src)
    old = os.umask(0o022)
    try:
        out = save_image(li, li.pixels, tmp_path / "o.png")
    finally:
        os.umask(old)
    assert out.stat().st_mode & 0o777 == 0o644


def test_save_rejects_bad_pixels(tmp_path: Path) -> None:
    src = tmp_path / "in.png"
    astronaut(32, 32).save(src)
    li = load_image(src)
    with pytest.raises(ValueError, match="BGR"):
        save_image(li, li.pixels[..., 0], tmp_path / "o.png")
    with pytest.raises(ValueError, match="uint8 or uint16"):
        save_image(li, li.pixels.astype(np.float32), tmp_path / "o.png")


def test_imaging_does_not_import_torch() -> None:
    code = "import sys, gpen_watch.imaging.load, gpen_watch.imaging.save; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_a_frame_larger_than_the_canvas_is_refused_with_our_limit(tmp_path: Path) -> None:
    """Pillow checks a GIF frame's own size against its process-wide guard (179 MP by default):
    that guard follows restore.max_megapixels, and the refusal names our limit, not Pillow's."""
    screen = b"GIF89a" + struct.pack("<HHBBB", 10, 10, 0x80, 0, 0) + bytes([0, 0, 0, 255, 255, 255])
    frame = b"," + struct.pack("<HHHHB", 0, 0, 3000, 3000, 0) + bytes([2, 2, 0x4C, 0x01, 0])
    # A comment after the frame: 3.6 KB, which GIF's LZW could make 9 MP of (one code per 4,096
    # pixels), so the size is one the file could hold (without it, the file is damaged).
    comment = b"!\xfe" + (b"\xff" + bytes(255)) * 14 + b"\x00"
    src = tmp_path / "frame.gif"
    src.write_bytes(screen + frame + comment + b";")
    with pytest.raises(ImageTooLargeError) as err:
        load_image(src, max_megapixels=1)
    assert err.value.reason.startswith("a frame or tile inside the file declares 9 MP, over the 1 MP limit")
    assert "Pillow" not in err.value.reason
    assert not re.search(r"\d{7}", err.value.reason)


def test_the_output_rule_and_its_notes() -> None:
    from gpen_watch.imaging.output_rule import OutputChoice, choose_output

    # Formats gpen-watch writes keep themselves, alpha and all; 16 bits stay in PNG and TIFF.
    assert choose_output("AVIF", alpha=True) == OutputChoice("AVIF")
    assert choose_output("BMP", alpha=True) == OutputChoice("BMP")
    assert choose_output("TIFF", bit_depth=16) == OutputChoice("TIFF")
    assert choose_output("MPO") == OutputChoice("JPEG")
    # The others: PNG for alpha or depth, else JPEG at the configured quality; the note says why.
    assert choose_output("GIF", alpha=True) == OutputChoice(
        "PNG", "written as PNG: gpen-watch does not write GIF, and PNG keeps its transparency"
    )
    assert choose_output("PPM", bit_depth=16) == OutputChoice(
        "PNG",
        "written as PNG: gpen-watch does not write PNM (PPM/PGM/PBM) deeper than 8 bits, and PNG keeps the depth",
    )
    assert choose_output("JPEG2000", quality=80) == OutputChoice(
        "JPEG", "written as JPEG (quality 80): gpen-watch does not write JPEG 2000"
    )
    # An explicit output.format is obeyed, and what it cannot hold is named.
    forced = choose_output("PNG", "jpeg", alpha=True, bit_depth=16)
    assert forced.format == "JPEG"
    assert forced.note == (
        "transparency dropped (JPEG has none); 16-bit depth reduced to 8 bits (JPEG holds 8) because "
        "output.format is jpeg; choose png or tiff to keep everything"
    )
    assert choose_output("PNG", "webp", alpha=True) == OutputChoice("WEBP")


@pytest.mark.parametrize(("fmt", "side"), [("webp", 16384), ("jpeg", 65536)])
def test_a_result_too_large_for_its_format_is_refused_with_what_to_change(
    tmp_path: Path, fmt: str, side: int
) -> None:
    src = tmp_path / "wide.png"
    Image.fromarray(np.zeros((2, side, 3), np.uint8)).save(src)
    li = load_image(src)
    with pytest.raises(OutputError) as caught:
        save_image(li, li.pixels, tmp_path / f"out.{fmt}", format=fmt)
    message = str(caught.value)
    assert f"the result is {side}x2 px" in message
    assert f"at most {side - 1:,} px a side" in message
    assert "output.format to png or tiff" in message
    assert not (tmp_path / f"out.{fmt}").exists()
    # One pixel less fits (WebP's limit is the largest it can encode).
    if fmt == "webp":
        ok = save_image(li, li.pixels[:, : side - 1], tmp_path / "fits.webp", format=fmt)
        assert ok.stat().st_size > 0
