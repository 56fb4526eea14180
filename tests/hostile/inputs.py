"""Hostile input files: what each is, how it is made, and what must become of it.

Each ``Kind`` makes its file(s) in an inbox and records them in the ledger with the outcome allowed
(done / failed / unsupported / ignored) and, for failures, a word the reason must contain. Content
is generated from real photos (skimage's astronaut), so "done" means the real engine detected,
restored, pasted and encoded something.
"""

from __future__ import annotations

import io
import os
import random
import socket
import stat
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import cv2
import numpy as np
from PIL import Image, ImageCms

from gpen_watch.journal.journal import Job

from .harness import write_atomic
from .invariants import IGNORED, Ledger

DONE = {"done"}
FAILED = {"failed"}
UNSUPPORTED = {"unsupported"}


@cache
def astronaut() -> Image.Image:
    from skimage import data

    return Image.fromarray(data.astronaut())


def photo(w: int = 256, h: int = 256) -> Image.Image:
    return astronaut().resize((w, h), Image.Resampling.LANCZOS)


def encode(im: Image.Image, fmt: str, **kw: object) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def jpeg(w: int = 256, h: int = 256, seed: int = 0, **kw: object) -> bytes:
    """A JPEG of the astronaut; ``seed`` paints a corner block so each file has its own content."""
    im = photo(w, h).copy()
    rng = random.Random(seed)
    im.paste((rng.randrange(256), rng.randrange(256), rng.randrange(256)), (0, 0, 16, 16))
    return encode(im, "JPEG", quality=90, **kw)


def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_bomb(side: int = 40000) -> bytes:
    """A PNG that declares side x side pixels in a few hundred bytes."""
    ihdr = struct.pack(">II", side, side) + bytes([8, 2, 0, 0, 0])
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", ihdr)
        + png_chunk(b"IDAT", zlib.compress(b"\0" * 4096))
        + png_chunk(b"IEND", b"")
    )


def tiff_bomb() -> bytes:
    """A TIFF that declares 100000 x 100000 8-bit RGB pixels in one tiny strip."""
    entries = [
        (256, 4, 1, 100000),
        (257, 4, 1, 100000),
        (258, 3, 1, 8),
        (259, 3, 1, 1),
        (262, 3, 1, 2),
        (273, 4, 1, 8 + 2 + 12 * 9 + 4),
        (277, 3, 1, 3),
        (278, 4, 1, 100000),
        (279, 4, 1, 16),
    ]
    ifd = struct.pack("<H", len(entries)) + b"".join(struct.pack("<HHII", *e) for e in entries) + b"\0\0\0\0"
    return b"II*\x00" + struct.pack("<I", 8) + ifd + b"\0" * 16


def sixteen_bit(ext: str) -> bytes:
    arr = np.asarray(photo(200, 160)).astype(np.uint16) * 257
    arr[0, 0] = (1, 2, 3)  # a value 8 bits cannot hold
    ok, buf = cv2.imencode(ext, cv2.cvtColor(arr, cv2.COLOR_RGB2BGR))
    assert ok
    return buf.tobytes()


def exif_jpeg(orientation: int) -> bytes:
    exif = Image.Exif()
    exif[0x010F], exif[0x0112] = "Canon", orientation
    return encode(photo(240, 160), "JPEG", quality=90, exif=exif.tobytes())


def animated(fmt: str) -> bytes:
    frames = [photo(128, 128).rotate(a) for a in (0, 90, 180)]
    return encode(frames[0], fmt, save_all=True, append_images=frames[1:], duration=100, loop=0)


def heic_like() -> bytes:
    """The start of an ISO-BMFF HEIC file (ftyp heic) followed by noise: cut short for libheif."""
    ftyp = struct.pack(">I", 24) + b"ftypheic" + b"\0\0\0\0" + b"mif1heic"
    return ftyp + struct.pack(">I", 16) + b"meta" + b"\0" * 8 + random.Random(3).randbytes(2000)


@cache
def hundred_megapixels() -> bytes:
    """A 10240 x 10240 (105 MP) JPEG: the astronaut on a plain ground.

    What it proves is the size (pre-scaled, not refused); the plain ground encodes in a tenth of
    the time the astronaut tiled 20 x 20 took (0.2 s instead of 2.3 s, 1.7 MB instead of 18 MB).
    """
    big = np.full((10240, 10240, 3), 120, np.uint8)
    big[:512, :512] = cv2.cvtColor(np.asarray(astronaut()), cv2.COLOR_RGB2BGR)
    ok, buf = cv2.imencode(".jpg", big, [cv2.IMWRITE_JPEG_QUALITY, 80])
    assert ok
    return buf.tobytes()


# --- output checks ------------------------------------------------------------------------------


def out_mode(*modes: str) -> Callable[[Path, Job], None]:
    def check(out: Path, job: Job) -> None:
        with Image.open(out) as im:
            assert im.mode in modes, f"output mode {im.mode}, expected one of {modes}"

    return check


def out_size(w: int, h: int) -> Callable[[Path, Job], None]:
    def check(out: Path, job: Job) -> None:
        with Image.open(out) as im:
            assert im.size == (w, h), f"output is {im.size}, expected {(w, h)}"
            assert im.getexif().get(0x0112, 1) == 1, "output still carries an EXIF rotation"

    return check


def out_16bit(out: Path, job: Job) -> None:
    arr = cv2.imdecode(np.fromfile(str(out), np.uint8), cv2.IMREAD_UNCHANGED)
    assert arr is not None, f"output is not 16-bit ({None if arr is None else arr.dtype})"
    assert arr.dtype == np.uint16, f"output is not 16-bit ({None if arr is None else arr.dtype})"


def out_icc(out: Path, job: Job) -> None:
    with Image.open(out) as im:
        assert im.info.get("icc_profile"), "ICC profile not carried"


def out_prescaled(out: Path, job: Job) -> None:
    with Image.open(out) as im:
        assert max(im.size) == 4096, f"output is {im.size}; expected pre-scaled to 4096"
    assert any("pre-scaled" in n for n in job.notes), f"no pre-scale note: {job.notes}"


def out_note(word: str) -> Callable[[Path, Job], None]:
    def check(out: Path, job: Job) -> None:
        assert any(word in n for n in job.notes), f"no note mentioning {word!r}: {job.notes}"
        assert decodes_ok(out)

    return check


def decodes_ok(out: Path) -> bool:
    from .invariants import decodes

    why = decodes(out)
    assert why is None, why
    return True


def out_named(suffix: str) -> Callable[[Path, Job], None]:
    def check(out: Path, job: Job) -> None:
        assert out.suffix == suffix, f"output named {out.name}, expected a {suffix} name"
        assert decodes_ok(out)

    return check


# --- the kinds ----------------------------------------------------------------------------------


@dataclass
class Kind:
    name: str
    make: Callable[[Path, Ledger], None]  # (inbox, ledger): create the file(s) and record them
    engine: str = "any"  # "real": only meaningful with the real decoder


def _file(
    rel: str,
    data: bytes,
    expect: set[str],
    reason: str | None = None,
    check: Callable[[Path, Job], None] | None = None,
) -> Callable[[Path, Ledger], None]:
    def make(inbox: Path, ledger: Ledger) -> None:
        write_atomic(inbox / rel, data)
        ledger.add(rel, data, expect, reason, output_check=check)

    return make


def _lazy(
    rel: str,
    data: Callable[[], bytes],
    expect: set[str],
    reason: str | None = None,
    check: Callable[[Path, Job], None] | None = None,
) -> Callable[[Path, Ledger], None]:
    def make(inbox: Path, ledger: Ledger) -> None:
        _file(rel, data(), expect, reason, check)(inbox, ledger)

    return make


def _hidden(inbox: Path, ledger: Ledger) -> None:
    data = jpeg(seed=901)
    (inbox / ".hidden.jpg").write_bytes(data)
    ledger.add(".hidden.jpg", data, IGNORED)


def _partial(inbox: Path, ledger: Ledger) -> None:
    data = jpeg(seed=902)
    (inbox / "download.jpg.crdownload").write_bytes(data)
    ledger.add("download.jpg.crdownload", data, IGNORED)


def _directory_named_photo(inbox: Path, ledger: Ledger) -> None:
    (inbox / "empty.jpg").mkdir()
    data = jpeg(seed=903)
    write_atomic(inbox / "folder.jpg" / "inner.jpg", data)
    ledger.add("folder.jpg/inner.jpg", data, DONE)


def _symlink_outside(inbox: Path, ledger: Ledger) -> None:
    outside = inbox.parent / "outside"
    outside.mkdir(exist_ok=True)
    secret = outside / "secret.jpg"
    secret.write_bytes(jpeg(seed=904))
    (inbox / "link.jpg").symlink_to(secret)
    ledger.add("link.jpg", None, IGNORED)
    # A linked folder is not walked either: the photo in it is not taken.
    (outside / "album").mkdir(exist_ok=True)
    (outside / "album" / "in-linked-folder.jpg").write_bytes(jpeg(seed=905))
    (inbox / "linked-album").symlink_to(outside / "album", target_is_directory=True)
    ledger.add("linked-album", None, IGNORED)


def _fifo(inbox: Path, ledger: Ledger) -> None:
    os.mkfifo(inbox / "pipe.jpg")
    ledger.add("pipe.jpg", None, IGNORED)


def _device(inbox: Path, ledger: Ledger) -> None:
    try:
        os.mknod(inbox / "null.jpg", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    except (PermissionError, OSError):
        return  # not permitted here (unprivileged): nothing to test
    ledger.add("null.jpg", None, IGNORED)


def _socket(inbox: Path, ledger: Ledger) -> None:
    path = inbox / "sock.jpg"
    if len(str(path)) > 100:
        return
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.close()  # the socket file stays
    ledger.add("sock.jpg", None, IGNORED)


def _same_name_in_subfolders(inbox: Path, ledger: Ledger) -> None:
    for i, rel in enumerate(("same.jpg", "a/same.jpg", "b/same.jpg", "a/b/same.jpg")):
        data = jpeg(seed=910 + i)
        write_atomic(inbox / rel, data)
        ledger.add(rel, data, DONE)


def _long_name(inbox: Path, ledger: Ledger) -> None:
    rel = "L" * 120 + "é" * 60 + ".jpg"  # 244 bytes: fits the file system, not our 200-byte names
    data = jpeg(seed=920)
    write_atomic(inbox / rel, data)

    def check(out: Path, job: Job) -> None:
        assert len(out.name.encode()) <= 200, out.name
        assert out.suffix == ".jpg", out.name

    ledger.add(rel, data, DONE, output_check=check)


# Even positions are present when the service starts, odd ones are dropped once it runs
# (test_bad_inputs._run_group). The empty file comes first: it is only taken after its 30 s grace
# (EMPTY_FILE_GRACE_SECONDS), the longest wait of the group, so that grace runs from the start-up
# scan, beside the worker's start and the other files' work, instead of after them.
KINDS: list[Kind] = [
    Kind("zero-byte", _file("zero.jpg", b"", UNSUPPORTED, "empty"), "real"),
    Kind("truncated-jpeg", _lazy("truncated.jpg", lambda: jpeg(seed=1)[:6000], FAILED, "truncated"), "real"),
    Kind(
        "random-bytes",
        _lazy("random.jpg", lambda: random.Random(2).randbytes(20000), UNSUPPORTED, "not an image"),
        "real",
    ),
    Kind(
        "text-file",
        _file("text.jpg", b"Dear diary, today I took no photos.\n" * 40, UNSUPPORTED, "text"),
        "real",
    ),
    Kind(
        "png-that-is-jpeg",
        _lazy("really-a-jpeg.png", lambda: jpeg(seed=3), DONE, check=out_named(".jpg")),
        "real",
    ),
    # Headers no file of their length can make true: damaged, whatever the limit (not "raise it").
    Kind("png-bomb", _lazy("bomb.png", png_bomb, FAILED, "damaged PNG: its header declares"), "real"),
    Kind("tiff-bomb", _lazy("bomb.tif", tiff_bomb, FAILED, "damaged TIFF: its header declares"), "real"),
    Kind("100-megapixels", _lazy("huge-105mp.jpg", hundred_megapixels, DONE, check=out_prescaled), "real"),
    Kind(
        "1x1",
        _lazy("one-pixel.png", lambda: encode(Image.new("RGB", (1, 1), (9, 9, 9)), "PNG"), DONE),
        "real",
    ),
    Kind("16-bit-png", _lazy("deep.png", lambda: sixteen_bit(".png"), DONE, check=out_16bit), "real"),
    Kind("16-bit-tiff", _lazy("deep.tif", lambda: sixteen_bit(".tif"), DONE, check=out_16bit), "real"),
    Kind(
        "rgba-png",
        _lazy(
            "rgba.png", lambda: encode(photo(160, 160).convert("RGBA"), "PNG"), DONE, check=out_mode("RGBA")
        ),
        "real",
    ),
    Kind(
        "palette-transparency",
        _lazy(
            "palette.png",
            lambda: encode(
                photo(160, 160).convert("P", palette=Image.Palette.ADAPTIVE), "PNG", transparency=0
            ),
            DONE,
            check=out_mode("RGBA", "P"),
        ),
        "real",
    ),
    Kind(
        "grayscale",
        _lazy("gray.jpg", lambda: encode(photo().convert("L"), "JPEG"), DONE, check=out_mode("L")),
        "real",
    ),
    Kind("cmyk-jpeg", _lazy("cmyk.jpg", lambda: encode(photo().convert("CMYK"), "JPEG"), DONE), "real"),
    Kind("progressive-jpeg", _lazy("progressive.jpg", lambda: jpeg(seed=4, progressive=True), DONE), "real"),
    *[
        Kind(
            f"exif-orientation-{o}",
            _lazy(
                f"orient-{o}.jpg",
                lambda o=o: exif_jpeg(o),
                DONE,
                check=out_size(*((160, 240) if o >= 5 else (240, 160))),
            ),
            "real",
        )
        for o in range(1, 9)
    ],
    Kind(
        "icc-profile",
        _lazy(
            "icc.jpg",
            lambda: encode(
                photo(),
                "JPEG",
                icc_profile=ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes(),
            ),
            DONE,
            check=out_icc,
        ),
        "real",
    ),
    # Animated and multi-page files: the first frame is restored and a note says so; a GIF's result
    # is a JPEG (gpen-watch writes no GIF), so its name ends in .jpg.
    Kind(
        "animated-gif", _lazy("animated.gif", lambda: animated("GIF"), DONE, check=out_note("first")), "real"
    ),
    Kind(
        "animated-webp",
        _lazy("animated.webp", lambda: animated("WEBP"), DONE, check=out_note("first")),
        "real",
    ),
    Kind(
        "multipage-tiff", _lazy("pages.tif", lambda: animated("TIFF"), DONE, check=out_note("pages")), "real"
    ),
    Kind("cut-heic", _lazy("phone.heic", heic_like, FAILED, "truncated HEIC"), "real"),
    Kind(
        "truncated-webp",
        _lazy("cut.webp", lambda: encode(photo(), "WEBP")[:3000], FAILED, "truncated"),
        "real",
    ),
    Kind("data-after-eoi", _lazy("trailing.jpg", lambda: jpeg(seed=5) + b"\0garbage" * 100, DONE), "real"),
    Kind("bmp", _lazy("old.bmp", lambda: encode(photo(), "BMP"), DONE), "real"),
    Kind("upper-case-extension", _lazy("SHOUTING.JPG", lambda: jpeg(seed=6), DONE)),
    # No extension: the content decides (so only the real decoder knows it is text).
    Kind("no-extension", _lazy("README", lambda: b"not a photo\n", UNSUPPORTED, "not an image"), "real"),
    Kind("pdf-named-jpg", _lazy("scan.jpg", lambda: b"%PDF-1.4\n" + b"x" * 500, UNSUPPORTED, "PDF"), "real"),
    Kind("name-with-spaces", _lazy("my holiday photo  (1).jpg", lambda: jpeg(seed=7), DONE)),
    Kind("unicode-name", _lazy("фото 照片 Ünïcødé 😀.jpg", lambda: jpeg(seed=8), DONE)),
    Kind("very-long-name", _long_name),
    Kind("leading-dot", _hidden),
    Kind("partial-download", _partial),
    Kind("directory-named-photo", _directory_named_photo),
    Kind("symlink-outside", _symlink_outside),
    Kind("fifo", _fifo),
    Kind("device-node", _device),
    Kind("unix-socket", _socket),
    Kind("same-name-in-subfolders", _same_name_in_subfolders),
]
