"""A real FUSE filesystem for tests, served from this process's memory (fusepy), so that files
the test adds raise no inotify event on this machine: what an SMB or NFS share shows when
another computer writes to it.

Run as ``python tests/fuse_memfs.py MOUNTPOINT``; it reads commands from stdin, one a line:
``add NAME SIZE MTIME`` (a flat file of SIZE bytes), ``opens`` (prints the names opened so far as
JSON), and it exits once unmounted (``fusermount -u MOUNTPOINT``). ``MemFs`` drives it from a test.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

FS_TYPE = "fuse.gpentest"


def available() -> str | None:
    """Why a FUSE mount cannot be made here, or None."""
    if not sys.platform.startswith("linux"):
        return "FUSE tests run on Linux"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    if shutil.which("fusermount") is None and shutil.which("fusermount3") is None:
        return "no fusermount (Debian's fuse3)"
    try:
        import fuse  # noqa: F401
    except (ImportError, OSError) as exc:
        return f"fusepy or libfuse2 is missing ({exc})"
    return None


def _serve(mountpoint: str) -> None:
    from fuse import FUSE, FuseOSError, Operations

    files: dict[str, tuple[bytes, float]] = {}
    opens: list[str] = []
    lock = threading.Lock()
    started = time.time()

    class Ops(Operations):  # type: ignore[misc]
        def getattr(self, path: str, fh: object = None) -> dict[str, float]:
            if path == "/":
                return {
                    "st_mode": stat.S_IFDIR | 0o755,
                    "st_nlink": 2,
                    "st_mtime": started,
                    "st_ctime": started,
                }
            with lock:
                entry = files.get(path)
            if entry is None:
                raise FuseOSError(errno.ENOENT)
            data, mtime = entry
            return {
                "st_mode": stat.S_IFREG | 0o644,
                "st_nlink": 1,
                "st_size": len(data),
                "st_mtime": mtime,
                "st_ctime": mtime,
            }

        def readdir(self, path: str, fh: object) -> list[str]:
            with lock:
                return [".", "..", *(p[1:] for p in files)]

        def open(self, path: str, flags: int) -> int:
            with lock:
                opens.append(path[1:])
                if path not in files:
                    raise FuseOSError(errno.ENOENT)
            return 0

        def read(self, path: str, size: int, offset: int, fh: object) -> bytes:
            with lock:
                return files[path][0][offset : offset + size]

    def commands() -> None:
        for line in sys.stdin:
            parts = line.split()
            if parts[:1] == ["add"]:
                name, size, mtime = parts[1], int(parts[2]), float(parts[3])
                with lock:
                    files["/" + name] = (bytes(range(256)) * (size // 256) + b"x" * (size % 256), mtime)
                print("ok", flush=True)
            elif parts[:1] == ["opens"]:
                with lock:
                    print(json.dumps(opens), flush=True)

    threading.Thread(target=commands, daemon=True).start()
    FUSE(Ops(), mountpoint, foreground=True, nothreads=False, fsname="gpentest", subtype="gpentest")


class MemFs:
    """One mount of the in-memory filesystem on ``mountpoint``, driven from a test."""

    def __init__(self, mountpoint: Path) -> None:
        self.mountpoint = mountpoint
        self.proc = subprocess.Popen(
            [sys.executable, __file__, str(mountpoint)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 20
        while not os.path.ismount(mountpoint):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the FUSE filesystem did not mount on {mountpoint}")
            time.sleep(0.02)

    def _ask(self, line: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def add(self, name: str, size: int = 1000, mtime: float = 1_700_000_000.0) -> None:
        assert self._ask(f"add {name} {size} {mtime}") == "ok"

    def opens(self) -> list[str]:
        return list(json.loads(self._ask("opens")))

    def unmount(self) -> None:
        tool = shutil.which("fusermount") or "fusermount3"
        subprocess.run([tool, "-u", str(self.mountpoint)], check=True, capture_output=True)
        self.proc.wait(20)
        self._close_pipes()

    def _close_pipes(self) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            subprocess.run(
                [shutil.which("fusermount") or "fusermount3", "-uz", str(self.mountpoint)],
                capture_output=True,
            )
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._close_pipes()


if __name__ == "__main__":
    _serve(sys.argv[1])
