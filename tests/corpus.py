"""One small image of each format and mode gpen-watch meets, made at test time (Pillow, OpenCV,
pillow-heif and hand-made bytes; nothing downloaded), each with the outcome expected of it.

``CASES`` is the table: a file name, a function that makes its bytes, and either ``Restored``
(what the output must be: format, Pillow mode, alpha, bits per sample, ICC, a note) or ``Refused``
(the job's end state and a pattern its reason must match). tests/test_formats_corpus.py drops every
file into a running service and checks the table.
"""

from __future__ import annotations

import io
import re
import shutil
import struct
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import cv2
import numpy as np
from PIL import Image, ImageCms

W, H = 48, 40


def _gradient(mode: str = "RGB", alpha: bool = False) -> Image.Image:
    """A colour ramp (no face: the engine passes it through), alpha a ramp from 0 to 255."""
    y, x = np.mgrid[0:H, 0:W]
    rgb = np.dstack([x * 255 // (W - 1), y * 255 // (H - 1), (x + y) * 255 // (W + H - 2)]).astype(np.uint8)
    im = Image.fromarray(rgb)
    if alpha:
        im.putalpha(Image.fromarray((x * 255 // (W - 1)).astype(np.uint8)))
    return im if mode in ("RGB", "RGBA") else im.convert(mode)


def save(im: Image.Image, fmt: str, **kw: object) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def _frames(fmt: str, **kw: object) -> bytes:
    first = _gradient()
    others = [first.rotate(90), first.transpose(Image.Transpose.FLIP_LEFT_RIGHT)]
    return save(first, fmt, save_all=True, append_images=others, **kw)


def _cmyk_icc() -> bytes:
    from test_imaging import cmyk_icc_profile

    return cmyk_icc_profile()


def _srgb() -> bytes:
    return ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()


def _gray16() -> Image.Image:
    ramp = (np.mgrid[0:H, 0:W][1] * 65535 // (W - 1)).astype(np.uint16)
    return Image.fromarray(ramp)


def _gray16_big_endian() -> Image.Image:
    # Made from the bytes: Pillow's convert("I;16B") goes through 8 bits.
    return Image.frombytes("I;16B", (W, H), np.asarray(_gray16()).astype(">u2").tobytes())


def _png16_colour() -> bytes:
    rgb = np.asarray(_gradient()).astype(np.uint16) * 257
    ok, buf = cv2.imencode(".png", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    assert ok
    return buf.tobytes()


def _opencv(ext: str) -> bytes:
    ok, buf = cv2.imencode(ext, cv2.cvtColor(np.asarray(_gradient()), cv2.COLOR_RGB2BGR))
    assert ok
    return buf.tobytes()


def _heic() -> bytes:
    import pillow_heif

    buf = io.BytesIO()
    pillow_heif.from_pillow(_gradient()).save(buf, quality=90)
    return buf.getvalue()


def _heic_10bit() -> bytes:
    """A 10-bit HEIC, as iPhones write HDR photos."""
    import pillow_heif

    rgb = np.asarray(_gradient()).astype(np.uint16) * 257
    buf = io.BytesIO()
    pillow_heif.from_bytes(mode="RGB;16", size=(W, H), data=rgb.tobytes()).save(buf, quality=90)
    return buf.getvalue()


def _bmp32_alpha() -> bytes:
    """A 32-bit BMP with an alpha mask (BITMAPV5HEADER, BI_BITFIELDS), as Photoshop and GIMP write."""
    rgba = np.asarray(_gradient(alpha=True))
    pixels = np.ascontiguousarray(rgba[::-1, :, [2, 1, 0, 3]]).tobytes()
    info = struct.pack("<IiiHHIIiiII", 124, W, H, 1, 32, 3, len(pixels), 2835, 2835, 0, 0)
    info += struct.pack("<IIII", 0xFF0000, 0xFF00, 0xFF, 0xFF000000) + b"BGRs" + bytes(36 + 12 + 16)
    offset = 14 + len(info)
    return b"BM" + struct.pack("<IHHI", offset + len(pixels), 0, 0, offset) + info + pixels


def _bmp_with_jpeg() -> bytes:
    """A BMP whose pixels are an embedded JPEG (BI_JPEG, compression 4): valid, rarely decodable."""
    jpeg = save(_gradient(), "JPEG")
    info = struct.pack("<IiiHHIIiiII", 40, W, H, 1, 0, 4, len(jpeg), 2835, 2835, 0, 0)
    offset = 14 + len(info)
    return b"BM" + struct.pack("<IHHI", offset + len(jpeg), 0, 0, offset) + info + jpeg


def _bmp_header(bits: int, colours: int) -> bytes:
    """A BMP header declaring ``bits`` per pixel and a palette of ``colours``, then blank pixels."""
    pixels = bytes(W * H * 4)
    info = struct.pack("<IiiHHIIiiII", 40, W, H, 1, bits, 0, len(pixels), 2835, 2835, colours, 0)
    offset = 14 + len(info)
    return b"BM" + struct.pack("<IHHI", offset + len(pixels), 0, 0, offset) + info + pixels


def _psd() -> bytes:
    """A flattened 8-bit RGB Photoshop file: header, empty sections, raw planar composite."""
    planes = np.asarray(_gradient()).transpose(2, 0, 1).tobytes()
    header = b"8BPS" + struct.pack(">H6xHIIHH", 1, 3, H, W, 8, 3)
    return header + struct.pack(">III", 0, 0, 0) + struct.pack(">H", 0) + planes


def _tiff_raw(spp: int, bits: int, photometric: int, data: bytes, compression: int = 1) -> bytes:
    """A little-endian TIFF with one strip: header, IFD, BitsPerSample values, then ``data``."""
    entries = [
        (256, 4, [W]),
        (257, 4, [H]),
        (258, 3, [bits] * spp),
        (259, 3, [compression]),
        (262, 3, [photometric]),
        (273, 4, [0]),  # strip offset: filled in below
        (277, 3, [spp]),
        (278, 4, [H]),
        (279, 4, [len(data)]),
        (284, 3, [1]),
    ]
    ifd_end = 8 + 2 + 12 * len(entries) + 4
    bits_values = struct.pack(f"<{spp}H", *([bits] * spp)) if spp > 2 else b""
    strip_at = ifd_end + len(bits_values)
    out = b"II*\x00" + struct.pack("<IH", 8, len(entries))
    for tag, typ, values in entries:
        if tag == 258 and spp > 2:
            value = struct.pack("<I", ifd_end)  # more than 4 bytes: stored after the IFD
        elif tag == 273:
            value = struct.pack("<I", strip_at)
        else:
            value = struct.pack(f"<{len(values)}{'H' if typ == 3 else 'I'}", *values).ljust(4, b"\x00")
        out += struct.pack("<HHI", tag, typ, len(values)) + value
    return out + struct.pack("<I", 0) + bits_values + data


def _tiff_cmyk16() -> bytes:
    cmyk = np.asarray(_gradient().convert("CMYK")).astype("<u2") * 257
    return _tiff_raw(4, 16, 5, cmyk.tobytes())


def _tiff_webp_compressed() -> bytes:
    """A TIFF declaring WebP compression (50001), which the libtiff in Pillow's wheels lacks."""
    return _tiff_raw(3, 8, 2, save(_gradient(), "WEBP"), compression=50001)


def _dds_unknown_fourcc() -> bytes:
    """A DDS texture whose pixel format (FourCC "ZZZZ") no decoder knows."""
    return _dds(0x4, b"ZZZZ", 0)


def _dds(flags: int, fourcc: bytes, bits: int) -> bytes:
    pixel_format = struct.pack("<II4s5I", 32, flags, fourcc, bits, 0, 0, 0, 0)
    header = (
        struct.pack("<7I44x", 124, 0x1007, H, W, W * 4, 0, 0)
        + pixel_format
        + struct.pack("<5I", 0x1000, 0, 0, 0, 0)
    )
    return b"DDS " + header + bytes(W * H * 4)


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _png_huge_text() -> bytes:
    """A PNG with a zTXt chunk that inflates to 10 MB: over Pillow's limit for text (a crafted file)."""
    png = save(_gradient(), "PNG")
    bomb = _png_chunk(b"zTXt", b"Comment\x00\x00" + zlib.compress(b"x" * 10_000_000, 9))
    return png[:33] + bomb + png[33:]


def _damaged_png() -> bytes:
    """A PNG whose compressed pixel data is garbage (with a valid CRC, so only the data is wrong)."""
    png = save(_gradient(), "PNG")
    at = png.index(b"IDAT") - 4
    (length,) = struct.unpack(">I", png[at : at + 4])
    garbage = bytes(range(256)) * (length // 256 + 1)
    return png[:at] + _png_chunk(b"IDAT", garbage[:length]) + png[at + 12 + length :]


def _cut(data: bytes) -> bytes:
    return data[: len(data) * 2 // 3]


def _float_image(scale: float, offset: float = 0.0, fmt: str = "TIFF") -> bytes:
    """A float ramp from ``offset`` to ``offset + scale``; PPM writes it as PFM."""
    ramp = (np.mgrid[0:H, 0:W][1] / (W - 1) * scale + offset).astype(np.float32)
    return save(Image.fromarray(ramp, mode="F"), fmt)


def _float_nan() -> bytes:
    ramp = (np.mgrid[0:H, 0:W][1] / (W - 1)).astype(np.float32)
    ramp[0, 0] = np.nan
    return save(Image.fromarray(ramp, mode="F"), "TIFF")


@dataclass(frozen=True)
class Restored:
    format: str  # Pillow's name for the output's format
    mode: str  # Pillow mode of the output as read back
    alpha: bool = False  # the output has a non-opaque alpha channel
    bits: int = 8  # bits per sample of the output
    icc: bool = False  # an ICC profile is embedded
    note: str | None = None  # a pattern one of the job's notes must match
    suffix: str | None = None  # the output's extension, when the case is about it
    # What the output must look like: "gradient" (the colour ramp most cases start from), "turned"
    # (that rotated half a turn), "ramp" (the gray ramp of the deep gray cases) or None (dithered
    # or posterised on the way in: not compared).
    looks_like: str | None = "gradient"
    size: tuple[int, int] = (W, H)


def reference(kind: str) -> Image.Image:
    if kind == "ramp":
        return Image.fromarray((np.asarray(_gray16()) // 257).astype(np.uint8))
    return _gradient() if kind == "gradient" else _gradient().rotate(180)


@dataclass(frozen=True)
class Refused:
    state: str  # "failed" or "unsupported"
    reason: str  # a pattern the reason must match


@dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[], bytes]
    expect: Restored | Refused


CMYK_MANAGED = "CMYK converted to sRGB using the embedded ICC profile"


def _eps() -> bytes:
    """A small, valid EPS: a gray square in PostScript (Pillow draws it only through Ghostscript)."""
    body = (
        b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 48 40\n%%EndComments\n0.5 setgray 0 0 48 40 rectfill\n"
    )
    return body + b"showpage\n%%EOF\n"


def _wmf() -> bytes:
    """A placeable Windows metafile header and an empty standard metafile (Pillow draws WMF only
    on Windows)."""
    placeable = struct.pack("<IHhhhhHIH", 0x9AC6CDD7, 0, 0, 0, 480, 400, 1440, 0, 0)
    standard = struct.pack("<HHHIHIH", 1, 9, 0x300, 12, 0, 3, 0) + struct.pack("<IH", 3, 0)
    return placeable + standard


# Pillow names these scientific formats from their signature but decodes them only through a
# reader installed separately (its "stub" plugins).
_GRIB = b"GRIB\x00\x00\x00\x01" + bytes(56)
_HDF5 = b"\x89HDF\r\n\x1a\n" + bytes(56)
NO_RENDERER: list[Case] = [
    *(
        [
            Case(
                "drawing.eps",
                _eps,
                Refused("unsupported", r"^this EPS is a PostScript drawing, which needs Ghostscript"),
            )
        ]
        if shutil.which("gs") is None
        else []
    ),
    *(
        [
            Case(
                "drawing.wmf",
                _wmf,
                Refused(
                    "unsupported",
                    r"^this Windows metafile \(WMF or EMF\) is a vector drawing .* only be drawn on Windows",
                ),
            )
        ]
        if sys.platform != "win32"
        else []
    ),
    # Values no valid BMP holds are damage, not an "uncommon" feature.
    Case("depth30000.bmp", lambda: _bmp_header(30000, 0), Refused("failed", r"^damaged BMP: its header")),
    Case(
        "huge-palette.bmp", lambda: _bmp_header(8, 305402420), Refused("failed", r"^damaged BMP: its header")
    ),
    Case(
        "two-bit.bmp",
        lambda: _bmp_header(2, 4),
        Refused("unsupported", r"^this BMP uses 2 bits per pixel, which this machine cannot decode"),
    ),
    Case("forecast.grib", lambda: _GRIB, Refused("unsupported", r"^this GRIB file holds scientific data")),
    Case("scan.h5", lambda: _HDF5, Refused("unsupported", r"^this HDF5 file holds scientific data")),
]

FALLBACK_JPEG = r"written as JPEG \(quality \d+\): gpen-watch does not write"
FALLBACK_PNG = r"written as PNG: gpen-watch does not write"

CASES: list[Case] = [
    # Formats gpen-watch writes: the same format back, with alpha, depth and ICC.
    Case(
        "plain.jpg", lambda: save(_gradient(), "JPEG", icc_profile=_srgb()), Restored("JPEG", "RGB", icc=True)
    ),
    Case("gray.jpg", lambda: save(_gradient("L"), "JPEG"), Restored("JPEG", "L")),
    Case("cmyk.jpg", lambda: save(_gradient("CMYK"), "JPEG"), Restored("JPEG", "RGB", note="CMYK converted")),
    Case(
        "cmyk-icc.jpg",
        lambda: save(_gradient("CMYK"), "JPEG", icc_profile=_cmyk_icc()),
        Restored("JPEG", "RGB", icc=True, note=CMYK_MANAGED, looks_like=None),  # the profile's colours
    ),
    Case(
        "cmyk-icc.tif",
        lambda: save(_gradient("CMYK"), "TIFF", icc_profile=_cmyk_icc()),
        Restored("TIFF", "RGB", icc=True, note=CMYK_MANAGED, looks_like=None),
    ),
    Case("rgba.png", lambda: save(_gradient(alpha=True), "PNG"), Restored("PNG", "RGBA", alpha=True)),
    Case("la.png", lambda: save(_gradient("LA", alpha=True), "PNG"), Restored("PNG", "LA", alpha=True)),
    Case(
        "palette-transparent.png",
        lambda: save(_gradient().quantize(16), "PNG", transparency=0),
        Restored("PNG", "RGBA", alpha=True, looks_like=None),
    ),
    Case("one-bit.png", lambda: save(_gradient("1"), "PNG"), Restored("PNG", "L", looks_like=None)),
    Case(
        "one-bit-trns.png",
        lambda: save(_gradient("1"), "PNG", transparency=255),
        Restored("PNG", "LA", alpha=True, looks_like=None),
    ),
    Case("gray16.png", lambda: save(_gray16(), "PNG"), Restored("PNG", "I;16", bits=16, looks_like="ramp")),
    Case("colour16.png", _png16_colour, Restored("PNG", "RGB", bits=16)),
    Case(
        "animated.png",
        lambda: _frames("PNG"),
        Restored("PNG", "RGB", note=r"PNG has 3 frames; only the first was restored"),
    ),
    Case(
        "rgba.webp",
        lambda: save(_gradient(alpha=True), "WEBP", lossless=True),
        Restored("WEBP", "RGBA", alpha=True),
    ),
    Case(
        "animated.webp",
        lambda: _frames("WEBP", lossless=True),
        Restored("WEBP", "RGB", note="WebP has 3 frames; only the first"),
    ),
    Case(
        "transparency.avif",
        lambda: save(_gradient(alpha=True), "AVIF", quality=90),
        Restored("AVIF", "RGBA", alpha=True),
    ),
    Case("opaque.avif", lambda: save(_gradient(), "AVIF", quality=90), Restored("AVIF", "RGB")),
    Case("bgra.bmp", _bmp32_alpha, Restored("BMP", "RGBA", alpha=True)),
    Case("plain.bmp", lambda: save(_gradient(), "BMP"), Restored("BMP", "RGB")),
    Case(
        "lab.tif",
        lambda: save(_gradient().convert("LAB"), "TIFF"),
        Restored("TIFF", "RGB", icc=True, note="LAB converted to sRGB using the embedded ICC profile"),
    ),
    Case("ycbcr.tif", lambda: save(_gradient().convert("YCbCr"), "TIFF"), Restored("TIFF", "RGB")),
    Case(
        "cmyk16.tif",
        _tiff_cmyk16,
        Restored("TIFF", "RGB", note="16-bit CMYK read at 8 bits"),
    ),
    Case(
        "gray16be.tif",
        lambda: save(_gray16_big_endian(), "TIFF"),
        Restored("TIFF", "I;16", bits=16, looks_like="ramp"),
    ),
    Case(
        "int32.tif",
        lambda: save(Image.fromarray((np.mgrid[0:H, 0:W][1] * 1_000_000).astype(np.int32)), "TIFF"),
        Restored("TIFF", "I;16", bits=16, note="32-bit integer samples scaled to 16 bits", looks_like="ramp"),
    ),
    # Outside 0..1 the range is scaled to 16 bits, zero (or the lowest sample) black, as for
    # 32-bit integers: radiance, 8-bit-range PFM/SPIDER files, signed CT or phase data.
    Case(
        "float-hdr.tif",
        lambda: _float_image(40.0),
        Restored(
            "TIFF", "I;16", bits=16, note=r"floating-point samples \(0 to 40\) scaled", looks_like="ramp"
        ),
    ),
    Case(
        "float255.pfm",
        lambda: _float_image(255.0, fmt="PPM"),
        Restored(
            "PNG", "I;16", bits=16, note=r"floating-point samples \(0 to 255\) scaled", looks_like="ramp"
        ),
    ),
    Case(
        "float-signed.tif",
        lambda: _float_image(6.0, offset=-3.0),
        Restored(
            "TIFF", "I;16", bits=16, note=r"floating-point samples \(-3 to 3\) scaled", looks_like="ramp"
        ),
    ),
    Case(
        "float01.tif",
        lambda: _float_image(1.0),
        Restored("TIFF", "I;16", bits=16, note="floating-point", looks_like="ramp"),
    ),
    Case("pages.tif", lambda: _frames("TIFF"), Restored("TIFF", "RGB", note="TIFF has 3 pages")),
    Case(
        "palette-alpha.tif",
        lambda: save(_gradient(alpha=True).convert("P").convert("PA"), "TIFF"),
        Restored("TIFF", "RGBA", alpha=True, looks_like=None),  # a 256-colour palette
    ),
    # Formats gpen-watch reads but does not write: PNG with alpha or depth, else JPEG.
    Case(
        "camera.mpo",
        lambda: _frames("MPO"),
        Restored("JPEG", "RGB", note="multi-picture JPEG \\(MPO\\) with 3 pictures", suffix=".jpg"),
    ),
    Case(
        "animated.gif",
        lambda: _frames("GIF"),
        Restored("JPEG", "RGB", note="GIF has 3 frames", looks_like=None),  # dithered to 256 colours
    ),
    Case(
        "transparent.gif",
        lambda: save(_gradient().quantize(16), "GIF", transparency=0),
        Restored("PNG", "RGBA", alpha=True, note=FALLBACK_PNG, looks_like=None),
    ),
    Case("iphone.heic", _heic, Restored("JPEG", "RGB", note=FALLBACK_JPEG + " HEIC/HEIF")),
    Case(
        "hdr-10bit.heic",
        _heic_10bit,
        Restored("PNG", "RGB", bits=16, note=r"10-bit HEIC read at full depth"),
    ),
    Case("archive.jp2", lambda: save(_gradient(), "JPEG2000"), Restored("JPEG", "RGB", note=FALLBACK_JPEG)),
    Case(
        "cmyk.jp2",
        lambda: save(_gradient("CMYK"), "JPEG2000"),
        Restored("JPEG", "RGB", note="CMYK converted"),
    ),
    Case("rgba.jp2", lambda: save(_gradient(alpha=True), "JPEG2000"), Restored("PNG", "RGBA", alpha=True)),
    Case("codestream.j2k", lambda: save(_gradient(), "JPEG2000", no_jp2=True), Restored("JPEG", "RGB")),
    Case("layers.psd", _psd, Restored("JPEG", "RGB", note=FALLBACK_JPEG + " PSD")),
    Case("alpha.tga", lambda: save(_gradient(alpha=True), "TGA"), Restored("PNG", "RGBA", alpha=True)),
    Case("colour.ppm", lambda: save(_gradient(), "PPM"), Restored("JPEG", "RGB")),
    Case("gray.pgm", lambda: save(_gradient("L"), "PPM"), Restored("JPEG", "L")),
    Case("bits.pbm", lambda: save(_gradient("1"), "PPM"), Restored("JPEG", "L", looks_like=None)),
    Case(
        "deep.pgm",
        lambda: save(_gray16(), "PPM"),
        Restored("PNG", "I;16", bits=16, note=FALLBACK_PNG, looks_like="ramp"),
    ),
    Case(
        "icon.ico",
        lambda: save(_gradient(alpha=True).resize((48, 48)), "ICO", sizes=[(16, 16), (48, 48)]),
        Restored("PNG", "RGBA", alpha=True, size=(48, 48), looks_like=None),  # the largest image
    ),
    Case("alpha.qoi", lambda: save(_gradient(alpha=True), "QOI"), Restored("PNG", "RGBA", alpha=True)),
    Case("texture.dds", lambda: save(_gradient(alpha=True), "DDS"), Restored("PNG", "RGBA", alpha=True)),
    Case("silicon.sgi", lambda: save(_gradient(), "SGI"), Restored("JPEG", "RGB")),
    Case("paint.pcx", lambda: save(_gradient(), "PCX"), Restored("JPEG", "RGB")),
    Case("sun.ras", lambda: _opencv(".ras"), Restored("JPEG", "RGB")),
    # The name does not decide: content does.
    Case("really-a-png.jpg", lambda: save(_gradient(), "PNG"), Restored("PNG", "RGB", suffix=".png")),
    Case(
        "scan.dat",
        lambda: save(_gradient().rotate(180), "PNG"),
        Restored("PNG", "RGB", suffix=".png", looks_like="turned"),
    ),
    Case(
        "IMG_2041",
        lambda: save(_gradient().rotate(180), "JPEG"),
        Restored("JPEG", "RGB", suffix=".jpg", looks_like="turned"),
    ),
    # Refusals: damaged vs a feature this machine lacks, each a sentence without decoder internals.
    Case(
        "webp-compressed.tif",
        _tiff_webp_compressed,
        Refused("unsupported", r"^this TIFF uses WebP compression, which this machine cannot decode; "),
    ),
    Case(
        "embedded-jpeg.bmp",
        _bmp_with_jpeg,
        Refused(
            "unsupported", r"^this BMP uses an embedded JPEG or PNG image, which this machine cannot decode"
        ),
    ),
    Case(
        "odd-texture.dds",
        _dds_unknown_fourcc,
        Refused(
            "unsupported", r"^this DDS uses an uncommon pixel format ZZZZ, which this machine cannot decode"
        ),
    ),
    Case(
        "rgb12.tif",
        lambda: _tiff_raw(3, 12, 2, bytes(W * H * 6)),  # valid 12-bit RGB, a layout Pillow lacks
        Refused(
            "unsupported",
            r"^this TIFF uses an uncommon combination of samples per pixel, bits per sample and colour model",
        ),
    ),
    Case(
        "luminance24.dds",
        lambda: _dds(0x20000, bytes(4), 24),  # DDPF_LUMINANCE at 24 bits
        Refused("unsupported", r"^this DDS uses 24-bit pixels in an uncommon layout, which this machine"),
    ),
    Case(
        "flags8.dds",
        lambda: _dds(0x8, bytes(4), 32),
        Refused("unsupported", r"^this DDS uses an uncommon pixel format \(flags 8\), which this machine"),
    ),
    Case(
        "float-nan.tif",
        _float_nan,
        Refused(
            "unsupported", r"floating-point samples \(mode F: an HDR or scientific image\) include values"
        ),
    ),
    Case(
        "cut.png", lambda: _cut(save(_gradient(), "PNG")), Refused("failed", r"^truncated PNG: the file ends")
    ),
    Case(
        "cut.jpg",
        lambda: _cut(save(_gradient(), "JPEG")),
        Refused("failed", r"^truncated JPEG: the file ends"),
    ),
    Case("scrambled.png", _damaged_png, Refused("failed", r"^damaged PNG: its image data cannot be decoded")),
    Case("text-block.png", _png_huge_text, Refused("failed", r"oversized text block")),
    Case(
        "future.jxl",
        lambda: b"\xff\x0a" + bytes(200),
        Refused("unsupported", r"^JPEG XL images cannot be decoded on this machine"),
    ),
    Case(
        "notes.jpg",
        lambda: b"Shopping list\n- milk\n" * 8,
        Refused("unsupported", r"not an image file \(looks like text\)"),
    ),
    Case(
        "README",
        lambda: b"Read me first.\n" * 8,
        Refused("unsupported", r"not an image file \(looks like text\)"),
    ),
    Case("notes.txt", lambda: b"a text file\n", Refused("unsupported", r"unsupported file type \(\.txt\)")),
    *NO_RENDERER,
]

# What no reason may contain: decoder internals, Pillow's names and its own pixel limit.
INTERNALS = re.compile(
    r"decoder error|error -\d|Unable to seek|cannot load this image|MAX_TEXT_CHUNK|MAX_IMAGE_PIXELS"
    r"|178956970|89478485|\bPillow\b(?!-heif)|PIL\b|libtiff|OSError|ValueError|SyntaxError|rawmode|_Tile|codec_name",
    re.IGNORECASE,
)


def check_distinct() -> None:
    """Every case's bytes differ: the service takes a second copy of the same bytes as a duplicate."""
    seen: dict[bytes, str] = {}
    for case in CASES:
        data = case.make()
        assert data not in seen, f"{case.name} has the same bytes as {seen[data]}"
        seen[data] = case.name
