"""Whether a file's container is whole, for formats whose decoder here misreads some valid files.

When such a file fails to decode but its parts add up exactly to the file (every chunk where the
one before says, each of a kind the format defines, the last one ending at the file's end) and
the decoder reads another of its frames, the failure is the decoder's, not damage:
``reasons.unreadable_here`` says so instead of "corrupt". A crafted file whose frames all fail
(Pillow's fli_oob cases) stays "damaged".

FLI/FLC (Autodesk Animator): a 128-byte header whose first field is the file's length, then a
chain of chunks, each starting with its own length and kind. Pillow 13 decodes the first frame
from offset 128 even when a prefix chunk (0xF100, written by Animator Pro) comes first, and fails
on such a file although its frames are intact.
"""

from __future__ import annotations

import os
import struct
from typing import IO

from PIL import Image

_FLI_MAGICS = frozenset({0xAF11, 0xAF12})
_FLI_HEADER = 128
# Top-level chunk kinds of FLI/FLC: prefix, frame, segment table, Huffman table, path chunk
# (CEL data), and a frame's own "no change" marker.
_FLI_CHUNKS = frozenset({0xF100, 0xF1FA, 0xF1FB, 0xF1E0, 0xF1FC})
_FRAME = 0xF1FA
_CHUNK_HEAD = 6  # uint32 size, uint16 kind
_FRAME_HEAD = 16  # a frame chunk: size, kind, subchunk count, 8 reserved bytes


def well_formed(fmt: str, fh: IO[bytes]) -> bool:
    """True when ``fh`` (a file identified as ``fmt``) checks out whole; False when it does not or
    when no check is known for ``fmt``. Leaves ``fh`` at its start."""
    try:
        if fmt == "FLI":
            return _fli_well_formed(fh)
        return False
    finally:
        fh.seek(0)


def a_later_frame_decodes(im: Image.Image) -> bool:
    """Whether the decoder reads frame 1 of ``im`` (whose frame 0 it failed on)."""
    try:
        if int(getattr(im, "n_frames", 1) or 1) < 2:
            return False
        im.seek(1)
        im.load()
    except Exception:  # noqa: BLE001 - any failure: no evidence that the decoder is at fault
        return False
    return True


def _fli_well_formed(fh: IO[bytes]) -> bool:
    length = fh.seek(0, os.SEEK_END)
    fh.seek(0)
    head = fh.read(_FLI_HEADER)
    if len(head) < _FLI_HEADER:
        return False
    declared, magic, frames = struct.unpack_from("<IHH", head)
    if magic not in _FLI_MAGICS or declared != length:
        return False
    offset, seen = _FLI_HEADER, 0
    while offset < length:
        fh.seek(offset)
        chunk = fh.read(_FRAME_HEAD)
        if len(chunk) < _CHUNK_HEAD:
            return False
        size, kind = struct.unpack_from("<IH", chunk)
        if kind not in _FLI_CHUNKS or size < _CHUNK_HEAD or offset + size > length:
            return False
        if kind == _FRAME:
            if size < _FRAME_HEAD or len(chunk) < _FRAME_HEAD:
                return False
            count = struct.unpack_from("<H", chunk, 6)[0]
            if not _subchunks_fit(fh, offset + _FRAME_HEAD, offset + size, count):
                return False
            seen += 1
        offset += size
    # Animator writes one more frame than it counts (the ring frame back to the first).
    return offset == length and frames <= seen <= frames + 1


def _subchunks_fit(fh: IO[bytes], start: int, end: int, count: int) -> bool:
    """A frame's ``count`` subchunks lie inside it, one after another."""
    offset = start
    for _ in range(count):
        fh.seek(offset)
        chunk = fh.read(_CHUNK_HEAD)
        if len(chunk) < _CHUNK_HEAD:
            return False
        size = struct.unpack_from("<I", chunk)[0]
        if size < _CHUNK_HEAD or offset + size > end:
            return False
        offset += size
    return True
