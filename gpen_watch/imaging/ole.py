"""What an OLE compound file (the container of FlashPix and Microsoft Image Composer images, and of
older Microsoft Office documents) holds, read from its directory without olefile.

Pillow reads FlashPix and MIC through olefile; where olefile is missing, or where its readers
refuse a file, this says which of the three it is, so that the user reads the true reason (a
missing package, a damaged image, or a document that is no image at all).
"""

from __future__ import annotations

import struct
from enum import Enum
from typing import IO

OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
# The root storage's class of a FlashPix file, 56616700-C154-11CE-8553-00AA00A1F95B, as stored
# (the first three fields little-endian).
_FLASHPIX_CLSID = bytes.fromhex("0067615654c1ce11855300aa00a1f95b")
_ENTRY = 128
_STORAGE, _STREAM = 1, 2
_END_OF_CHAIN = 0xFFFFFFFE
# A directory of more sectors than this is not read through (an image's has a handful).
_MAX_DIRECTORY_SECTORS = 4096


class OleContent(Enum):
    FLASHPIX = "FPX"
    MIC = "MIC"
    DOCUMENT = "document"  # a well-formed compound file with no image in it
    UNREADABLE = "unreadable"  # its header or directory is damaged


def is_ole(head: bytes) -> bool:
    return head.startswith(OLE_MAGIC)


def ole_content(fh: IO[bytes]) -> OleContent:
    """Which kind of compound file ``fh`` is. Leaves ``fh`` at its start."""
    try:
        names, root_clsid = _directory(fh)
    except (struct.error, ValueError, IndexError, OSError):
        return OleContent.UNREADABLE
    finally:
        fh.seek(0)
    if root_clsid == _FLASHPIX_CLSID:
        return OleContent.FLASHPIX
    # Pillow's MIC reader looks for an "Image" stream inside a "*.ACI" storage.
    storages = {name for name, kind in names if kind == _STORAGE}
    if any(s.upper().endswith(".ACI") for s in storages) and ("Image", _STREAM) in names:
        return OleContent.MIC
    return OleContent.DOCUMENT


def _directory(fh: IO[bytes]) -> tuple[set[tuple[str, int]], bytes]:
    """The (name, kind) of every directory entry and the root entry's class id."""
    fh.seek(0)
    header = fh.read(512)
    if len(header) < 512 or not is_ole(header):
        raise ValueError("not an OLE header")
    shift = struct.unpack_from("<H", header, 30)[0]
    if shift not in (9, 12):
        raise ValueError("sector size")
    size = 1 << shift
    fat_count, first_dir = struct.unpack_from("<II", header, 44)
    fat: list[int] = []
    for sid in struct.unpack_from("<109I", header, 76)[: min(fat_count, 109)]:
        fat.extend(struct.unpack(f"<{size // 4}I", _sector(fh, sid, size)))
    names: set[tuple[str, int]] = set()
    root_clsid = b""
    sid, seen = first_dir, 0
    while sid != _END_OF_CHAIN:
        seen += 1
        if seen > _MAX_DIRECTORY_SECTORS:
            raise ValueError("directory chain loops")
        block = _sector(fh, sid, size)
        for at in range(0, size, _ENTRY):
            entry = block[at : at + _ENTRY]
            length, kind = struct.unpack_from("<HB", entry, 64)
            if kind == 5 and not root_clsid:
                root_clsid = entry[80:96]
            if kind in (_STORAGE, _STREAM) and 2 <= length <= 64:
                names.add((entry[: length - 2].decode("utf-16-le", "replace"), kind))
        sid = fat[sid]
    return names, root_clsid


def _sector(fh: IO[bytes], sid: int, size: int) -> bytes:
    fh.seek((sid + 1) * size)
    data = fh.read(size)
    if len(data) < size:
        raise ValueError("sector past the end of the file")
    return data
