"""Reasons that used to be false (issue 35), each with the file built here: FlashPix and MIC are
images (restored through olefile, and named when olefile is missing), GD and Quake 2 textures
open through Pillow's own modules, damaged files of a known type say their type, and the
megapixel advice is given only where raising the limit would work."""

from __future__ import annotations

import io
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from claimed_sizes import bmp, png_claiming, sparse_bmp
from ole_writer import compound_file, property_set, storage, stream
from PIL import Image, WalImageFile

from gpen_watch.imaging.claims import physical_memory_bytes
from gpen_watch.imaging.errors import BrokenImageError, ImageTooLargeError, UnsupportedFormatError
from gpen_watch.imaging.load import header_refusal, load_image

W, H = 48, 40
RAMP = (np.mgrid[0:H, 0:W][1] * 5).astype(np.uint8)  # 0, 5, ... 235 along each row
FLASHPIX_CLSID = bytes.fromhex("0067615654c1ce11855300aa00a1f95b")


def _tiff(colour: tuple[int, int, int]) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (W, H), colour).save(buf, "TIFF")
    return buf.getvalue()


def mic() -> bytes:
    """A Microsoft Image Composer file: an "Image" TIFF stream in a "*.ACI" storage."""
    return compound_file(
        storage("0001.ACI", stream("Image", _tiff((200, 30, 40)))), stream("Version", b"\x01")
    )


def fpx() -> bytes:
    """A one-resolution monochrome FlashPix file with one raw 64 x 64 tile holding RAMP."""
    contents = property_set(
        {0x1000002: W, 0x1000003: H, 0x2000002: struct.pack("<III", 0, 1, 0x00010000)}  # one band, L
    )
    header = (
        bytes(28) + struct.pack("<9I", 36, W, H, 1, 64, 64, 1, 36, 16) + struct.pack("<4I", 0, W * H, 0, 0)
    )
    resolution = storage(
        "Resolution 0000",
        stream("Subimage 0000 Header", header),
        stream("Subimage 0000 Data", bytes(28) + RAMP.tobytes()),
    )
    return compound_file(
        storage("Data Object Store 000001", stream("\x05Image Contents", contents), resolution),
        root_clsid=FLASHPIX_CLSID,
    )


def test_mic_and_flashpix_are_restored(tmp_path: Path) -> None:
    (tmp_path / "a.mic").write_bytes(mic())
    (tmp_path / "a.fpx").write_bytes(fpx())
    composer = load_image(tmp_path / "a.mic")
    assert (composer.format, composer.size) == ("MIC", (W, H))
    assert tuple(composer.pixels[5, 5]) == (40, 30, 200)  # BGR
    flashpix = load_image(tmp_path / "a.fpx")
    assert (flashpix.format, flashpix.size) == ("FPX", (W, H))
    assert (flashpix.pixels[:, :, 0] == RAMP).all()


def test_without_olefile_mic_and_flashpix_say_what_they_need(tmp_path: Path) -> None:
    """In a process where olefile cannot be imported (Pillow then leaves both readers out)."""
    (tmp_path / "a.mic").write_bytes(mic())
    (tmp_path / "a.fpx").write_bytes(fpx())
    (tmp_path / "doc.bin").write_bytes(compound_file(stream("WordDocument", b"text")))
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules["olefile"] = None  # import olefile -> ImportError
        from pathlib import Path
        from gpen_watch.imaging.errors import ImageInputError
        from gpen_watch.imaging.load import load_image
        for name in ("a.mic", "a.fpx", "doc.bin"):
            try:
                load_image(Path({str(tmp_path)!r}) / name)
            except ImageInputError as exc:
                print(name, exc.kind, exc.reason)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    said = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    needs = "image needs the olefile package to be read, and olefile is not installed here; install it"
    assert said[
        "a.mic"
    ] == f"unsupported this Microsoft Image Composer (MIC) {needs} (pip install olefile)" + (
        " and drop the file again, or export the image as PNG or TIFF"
    )
    assert said["a.fpx"].startswith(f"unsupported this FlashPix (FPX) {needs}")
    assert (
        said["doc.bin"]
        == "unsupported not an image file (an OLE compound document, such as an older Office file)"
    )


def test_a_damaged_flashpix_says_so(tmp_path: Path) -> None:
    data = bytearray(fpx())
    at = data.index(struct.pack("<III", 0, 1, 0x00010000))
    data[at + 4 : at + 8] = struct.pack("<I", 5)  # five bands: no FlashPix has them
    (tmp_path / "bands.fpx").write_bytes(bytes(data))
    with pytest.raises(BrokenImageError, match=r": damaged FlashPix \(FPX\): its header cannot be decoded"):
        load_image(tmp_path / "bands.fpx")


def gd() -> bytes:
    palette = b"".join(bytes((i, 255 - i, i // 2, 0)) for i in range(256))
    return b"\xff\xfe" + struct.pack(">HHBHI", W, H, 0, 256, 0xFFFFFFFF) + palette + RAMP.tobytes()


def wal() -> bytes:
    mips, offset = [], 100
    for level in range(4):
        mips.append(offset)
        offset += (W >> level) * (H >> level)
    head = b"wall".ljust(32, b"\x00") + struct.pack("<6I", W, H, *mips) + bytes(44)
    levels = b"".join(RAMP[:: 1 << k, :: 1 << k].tobytes() for k in range(4))
    return head + levels


def test_gd_and_quake_textures_are_restored(tmp_path: Path) -> None:
    (tmp_path / "a.gd").write_bytes(gd())
    (tmp_path / "a.wal").write_bytes(wal())
    image = load_image(tmp_path / "a.gd")
    assert (image.format, image.size) == ("GD", (W, H))
    assert tuple(image.pixels[0, 3]) == (15 // 2, 255 - 15, 15)  # palette entry 15, as BGR
    texture = load_image(tmp_path / "a.wal")
    assert (texture.format, texture.size) == ("WAL", (W, H))
    # The Quake 2 palette at 8 bits (Pillow holds it at 6 bits: 0..63).
    six_bit = WalImageFile.quake2palette
    index = int(RAMP[0, 20])
    assert tuple(texture.pixels[0, 20]) == tuple(
        v * 255 // 63 for v in six_bit[3 * index : 3 * index + 3][::-1]
    )


def test_a_random_file_is_not_taken_for_gd_or_wal(tmp_path: Path) -> None:
    data = bytearray(gd())
    data += b"\x00"  # no longer adds up
    (tmp_path / "x.gd").write_bytes(bytes(data))
    with pytest.raises(Exception, match="not an image file"):
        load_image(tmp_path / "x.gd")


def _fli_header() -> bytes:
    """An FLI header with Pillow's signature (magic 0xAF11, flags 0) and a reserved field set,
    as the fuzzed files in Pillow's tests have."""
    head = struct.pack("<IHHHHHH", 1000, 0xAF11, 1, W, H, 8, 0) + bytes(112)
    return head[:20] + b"\x01\x02" + head[22:]


def _msp_bad_checksum() -> bytes:
    header = b"DanM" + struct.pack("<HH", W, H) + bytes(16) + struct.pack("<H", 0x1234) + bytes(6)
    return header + bytes(W // 8 * H)


def test_damaged_files_of_a_known_type_say_their_type(tmp_path: Path) -> None:
    cases = {
        "anim.fli": (_fli_header(), r": damaged FLI/FLC animation: its header cannot be decoded"),
        "paint.msp": (
            _msp_bad_checksum(),
            r": damaged Microsoft Paint \(MSP\): its header cannot be decoded",
        ),
        # Pillow's p_8.tga: a header declaring 8-bit palette entries, and nothing after it.
        "p_8.tga": (
            bytes([30, 1, 1]) + struct.pack("<HHB", 0, 256, 8) + struct.pack("<HHHHBB", 0, 0, 128, 128, 8, 0),
            r": truncated TGA: the file ends before its image data does",
        ),
    }
    for name, (data, reason) in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(BrokenImageError, match=reason):
            load_image(tmp_path / name)
        assert header_refusal(tmp_path / name) is not None


def test_a_whole_tga_with_eight_bit_palette_entries_names_the_feature(tmp_path: Path) -> None:
    header = bytes([0, 1, 1]) + struct.pack("<HHB", 0, 256, 8) + struct.pack("<HHHHBB", 0, 0, W, H, 8, 0)
    (tmp_path / "p8.tga").write_bytes(header + bytes(range(256)) + RAMP.tobytes())
    with pytest.raises(
        UnsupportedFormatError, match=r": this TGA uses 8-bit palette entries, which this machine"
    ):
        load_image(tmp_path / "p8.tga")


@pytest.mark.parametrize("limit", [200.0, 0.0, 1e9])
def test_a_size_no_file_of_that_length_can_hold_is_damaged_whatever_the_limit(
    tmp_path: Path, limit: float
) -> None:
    cases = {
        # Pillow's bmp/b/badwidth.bmp: a negative width (-127), read as 4,294,967,169.
        "badwidth.bmp": bmp(-127, 64, 1, bytes(1024)),
        # Pillow's bmp/b/reallybig.bmp: 3,000,000 x 2,000,000 (6 terapixels) in 24 KB.
        "reallybig.bmp": bmp(3_000_000, 2_000_000, 24, bytes(24576)),
        "bomb.png": png_claiming(tmp_path / "claim.png", 60_000, 60_000).read_bytes(),
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(BrokenImageError) as err:
            load_image(tmp_path / name, max_megapixels=limit)
        assert err.value.reason.startswith(f"damaged {name.split('.')[1].upper()}: its header declares ")
        assert "no limit would let it be restored" in err.value.reason
        assert "raise the restore.max_megapixels" not in err.value.reason
        assert header_refusal(tmp_path / name, max_megapixels=limit) is not None


def test_a_real_image_over_the_limit_is_told_to_raise_it(tmp_path: Path) -> None:
    src = sparse_bmp(tmp_path / "big.bmp", 20_000, 11_000)  # 220 MP, 660 MB of rows
    with pytest.raises(ImageTooLargeError) as err:
        load_image(src, max_megapixels=200)
    assert err.value.reason == (
        "image is 20000x11000 (220 MP), over the 200 MP limit; raise the restore.max_megapixels setting to restore it"
    )


@pytest.mark.skipif(physical_memory_bytes() is None, reason="the system does not say how much memory it has")
def test_a_real_image_beyond_this_machines_memory_says_how_much_it_needs(tmp_path: Path) -> None:
    memory = physical_memory_bytes()
    assert memory is not None
    side = int((2 * memory / 9) ** 0.5) + 1  # twice the memory at 9 bytes a pixel
    src = sparse_bmp(tmp_path / "huge.bmp", side, side)
    if os.stat(src).st_blocks * 512 > 1 << 20:
        pytest.skip("this file system does not keep sparse files")
    for limit in (0.0, 1e9):  # no limit, or one above it: the memory decides
        with pytest.raises(ImageTooLargeError) as err:
            load_image(src, max_megapixels=limit)
        assert err.value.reason.startswith(f"image is {side}x{side} (")
        assert "of memory, more than this machine has (" in err.value.reason
        assert "restore it on a machine with more memory, or scale it down" in err.value.reason
        assert "max_megapixels" not in err.value.reason
