"""The picture inside an icon file that Pillow would decode, read from its header alone, so that
its size can be judged before any of it is decoded (``claims.check_inner_picture``).

- A Windows icon (ICO) holds several pictures, each a PNG or a headerless BMP (a DIB whose
  declared height covers the picture and the 1-bit transparency mask below it); Pillow decodes
  the largest while it opens the file, so its size escapes the check of the icon's own size.
- A Mac OS icon (ICNS) holds one picture per type code, and the code fixes its size ("ic08" is
  256x256); the larger ones are PNG or JPEG 2000, whose own header may declare any size. Pillow
  decodes the largest icon, then refuses a picture larger than its icon: no such file is whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from PIL import BmpImagePlugin, IcnsImagePlugin, IcoImagePlugin, Image, Jpeg2KImagePlugin, PngImagePlugin

from gpen_watch.imaging.reasons import DATA_ERRORS

_ICO = b"\x00\x00\x01\x00"
_ICNS = b"icns"
_PNG = b"\x89PNG\r\n\x1a\n"
_JPEG2000 = (b"\xff\x4f\xff\x51", b"\x00\x00\x00\x0cjP  \r\n\x87\n")


@dataclass(frozen=True)
class InnerPicture:
    fmt: str  # the icon file's format: "ICO" or "ICNS"
    image: Image.Image  # the picture, opened from its header (nothing decoded)
    size: tuple[int, int]  # the picture's size as it would be decoded
    slot: tuple[int, int] | None  # the size the icon it is stored as has (ICNS), or None


def inner_picture(head: bytes, fh: IO[bytes]) -> InnerPicture | None:
    """The picture Pillow would decode from the icon file ``fh`` (``head``: its first bytes), or
    None when it is no icon file or its header does not read (Pillow's own reader then says why).
    Leaves ``fh`` at its start."""
    try:
        if head.startswith(_ICO):
            return _ico_picture(fh)
        if head.startswith(_ICNS):
            return _icns_picture(fh)
    except DATA_ERRORS:
        return None
    finally:
        fh.seek(0)
    return None


def _ico_picture(fh: IO[bytes]) -> InnerPicture | None:
    fh.seek(0)
    icon = IcoImagePlugin.IcoFile(fh)
    if not icon.entry:
        return None
    entry = icon.entry[0]  # Pillow's reader sorts the largest first and decodes that one
    image = _picture_at(fh, entry.offset, jpeg2000=False)
    if image is None:
        image = BmpImagePlugin.DibImageFile(_at(fh, entry.offset))
        return InnerPicture("ICO", image, (image.size[0], image.size[1] // 2), None)
    return InnerPicture("ICO", image, image.size, None)


def _icns_picture(fh: IO[bytes]) -> InnerPicture | None:
    fh.seek(0)
    icns = IcnsImagePlugin.IcnsFile(fh)
    best = icns.bestsize()
    slot = (best[0] * best[2], best[1] * best[2])
    for code, _reader in icns.SIZES[best]:
        if code in icns.dct:
            start, _length = icns.dct[code]
            image = _picture_at(fh, start, jpeg2000=True)
            if image is not None:
                return InnerPicture("ICNS", image, image.size, slot)
    return None


def _picture_at(fh: IO[bytes], offset: int, *, jpeg2000: bool) -> Image.Image | None:
    """The PNG (or JPEG 2000) picture whose header starts at ``offset``, or None for other data."""
    sig = _at(fh, offset).read(12)
    if sig.startswith(_PNG):
        return PngImagePlugin.PngImageFile(_at(fh, offset))
    if jpeg2000 and sig.startswith(_JPEG2000):
        return Jpeg2KImagePlugin.Jpeg2KImageFile(_at(fh, offset))
    return None


def _at(fh: IO[bytes], offset: int) -> IO[bytes]:
    fh.seek(offset)
    return fh
