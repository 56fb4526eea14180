"""Standard streams whose reader has gone away (`gpen-watch status | head`)."""

from __future__ import annotations

import os
from typing import TextIO


def silence(stream: TextIO) -> None:
    """Point ``stream`` at the null device once its reader is gone: what is still buffered, and
    whatever is written later, must not raise again (Python flushes stdout on exit, too)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
