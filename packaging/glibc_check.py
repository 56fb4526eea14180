"""The newest glibc any ELF file in a folder needs, checked against the floor the bundle promises.

``python glibc_check.py FOLDER [--floor 2.31]``: every ELF file under FOLDER (programs and shared
libraries, found by their magic bytes, not their names) is read with ``objdump -T``; the highest
``GLIBC_x.y`` symbol version it needs is that file's need. Prints the newest need and the files
that have it; exits 1 naming every file above the floor. The floor is the one the Linux packages
state (Debian 11's glibc): FLOOR below.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

FLOOR = "2.31"
GLIBC_VERSION = re.compile(r"\bGLIBC_(\d+(?:\.\d+)+)\b")


def as_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def elf_files(folder: Path) -> Iterator[Path]:
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            with path.open("rb") as f:
                if f.read(4) == b"\x7fELF":
                    yield path


def glibc_need(path: Path) -> str | None:
    """The highest GLIBC_ version among the file's dynamic symbols (None: it needs no glibc)."""
    out = subprocess.run(["objdump", "-T", str(path)], capture_output=True, text=True, check=False).stdout
    versions = set(GLIBC_VERSION.findall(out))
    return max(versions, key=as_tuple) if versions else None


def needs(folder: Path) -> dict[Path, str]:
    files = list(elf_files(folder))
    with ThreadPoolExecutor() as pool:
        found = dict(zip(files, pool.map(glibc_need, files), strict=True))
    return {path: need for path, need in found.items() if need is not None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--floor", default=FLOOR, help=f"the newest glibc allowed (default {FLOOR})")
    args = parser.parse_args(argv)
    found = needs(args.folder)
    if not found:
        print(f"no ELF file under {args.folder} needs glibc", file=sys.stderr)
        return 1
    newest = max(found.values(), key=as_tuple)
    over = sorted(p for p, v in found.items() if as_tuple(v) > as_tuple(args.floor))
    print(f"{len(found)} ELF files; the newest glibc any needs is {newest} (floor {args.floor})")
    for path in over:
        print(f"  needs glibc {found[path]}: {path.relative_to(args.folder)}", file=sys.stderr)
    if over:
        print(f"{len(over)} files need a glibc newer than {args.floor}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
