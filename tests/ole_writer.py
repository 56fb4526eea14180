"""A minimal OLE compound file writer (version 3, 512-byte sectors), enough to build FlashPix and
Microsoft Image Composer test images: olefile reads these files but cannot make one.

Every stream is padded to the mini-stream cutoff (4096 bytes) so that all of them live in regular
sectors and no mini FAT is needed; the readers under test go by the streams' contents, which
trailing zeros do not change.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

SECTOR = 512
_CUTOFF = 4096
_FREE, _END, _FATSECT, _NONE = 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFD, 0xFFFFFFFF
MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


@dataclass
class Node:
    name: str
    data: bytes | None = None  # None: a storage
    children: list[Node] = field(default_factory=list)
    clsid: bytes = bytes(16)


def storage(name: str, *children: Node, clsid: bytes = bytes(16)) -> Node:
    return Node(name, None, list(children), clsid)


def stream(name: str, data: bytes) -> Node:
    return Node(name, data.ljust(_CUTOFF, b"\x00"))


def compound_file(*children: Node, root_clsid: bytes = bytes(16)) -> bytes:
    root = Node("Root Entry", None, list(children), root_clsid)
    nodes: list[Node] = []

    def number(node: Node) -> None:
        nodes.append(node)
        for child in node.children:
            number(child)

    number(root)
    ids = {id(n): i for i, n in enumerate(nodes)}
    # Children hang as a chain of right siblings from the first one (a valid, if unbalanced, tree).
    right = {id(a): ids[id(b)] for n in nodes for a, b in zip(n.children, n.children[1:])}
    dir_sectors = -(-len(nodes) * 128 // SECTOR)
    fat = [_FATSECT] + [i + 2 if i + 1 < dir_sectors else _END for i in range(dir_sectors)]
    starts: dict[int, int] = {}
    body = b""
    for n in nodes:
        if n.data is not None:
            first, count = len(fat), -(-len(n.data) // SECTOR)
            starts[id(n)] = first
            fat += [first + i + 1 if i + 1 < count else _END for i in range(count)]
            body += n.data.ljust(count * SECTOR, b"\x00")
    assert len(fat) <= SECTOR // 4, "one FAT sector only"
    directory = b"".join(_entry(n, ids, right, starts) for n in nodes).ljust(dir_sectors * SECTOR, b"\x00")
    # Unused directory slots: empty entries whose links are "none".
    for at in range(len(nodes) * 128, len(directory), 128):
        directory = directory[: at + 68] + struct.pack("<III", _NONE, _NONE, _NONE) + directory[at + 80 :]
    header = MAGIC + bytes(16) + struct.pack("<HHHHH", 0x3E, 3, 0xFFFE, 9, 6) + bytes(6)
    header += struct.pack("<IIIIIIIII", 0, 1, 1, 0, _CUTOFF, _END, 0, _END, 0)
    header += struct.pack("<109I", 0, *([_FREE] * 108))
    fat_sector = struct.pack(f"<{SECTOR // 4}I", *fat, *([_FREE] * (SECTOR // 4 - len(fat))))
    return header + fat_sector + directory + body


def _entry(node: Node, ids: dict[int, int], right: dict[int, int], starts: dict[int, int]) -> bytes:
    name = node.name.encode("utf-16-le") + b"\x00\x00"
    kind = 5 if node.name == "Root Entry" else (1 if node.data is None else 2)
    child = ids[id(node.children[0])] if node.children else _NONE
    out = name.ljust(64, b"\x00") + struct.pack("<HBB", len(name), kind, 1)
    out += struct.pack("<III", _NONE, right.get(id(node), _NONE), child) + node.clsid + bytes(4 + 16)
    size = len(node.data) if node.data is not None else 0
    out += struct.pack("<III", starts.get(id(node), _END if size == 0 else 0), size, 0)
    return out


def property_set(values: dict[int, int | bytes]) -> bytes:
    """An OLE property set stream of one section holding 32-bit integers and blobs."""
    body = b""
    offsets = []
    start = 8 + 8 * len(values)
    for pid, value in values.items():
        offsets.append((pid, start + len(body)))
        if isinstance(value, int):
            body += struct.pack("<Ii", 3, value)
        else:
            body += struct.pack("<II", 65, len(value)) + value.ljust(-(-len(value) // 4) * 4, b"\x00")
    section = struct.pack("<II", start + len(body), len(values))
    section += b"".join(struct.pack("<II", pid, off) for pid, off in offsets) + body
    header = struct.pack("<HHI", 0xFFFE, 0, 0x00020005) + bytes(16) + struct.pack("<I", 1)
    return header + bytes(16) + struct.pack("<I", 48) + section
