"""An exclusive, non-blocking lock on an open file (the service's single-instance lock): msvcrt on
Windows, flock elsewhere. Both raise OSError when another process holds the lock."""

from __future__ import annotations

import sys
from typing import IO

if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    # The lock covers one byte far past the pid text, so others can still read the pid.
    _LOCK_OFFSET = 1 << 20

    def lock_file(f: IO[str]) -> None:
        f.seek(_LOCK_OFFSET)
        msvcrt.locking(f.fileno(), msvcrt.LK_NBLCK, 1)

    def unlock_file(f: IO[str]) -> None:
        f.seek(_LOCK_OFFSET)
        msvcrt.locking(f.fileno(), msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def lock_file(f: IO[str]) -> None:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)

    def unlock_file(f: IO[str]) -> None:
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)
