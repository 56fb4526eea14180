"""Standard streams whose reader has gone away (`gpen-watch status | head`), and ending a process
once they are flushed."""

from __future__ import annotations

import os
import sys
from typing import NoReturn, TextIO


def silence(stream: TextIO) -> None:
    """Point ``stream`` at the null device once its reader is gone: what is still buffered, and
    whatever is written later, must not raise again (Python flushes stdout on exit, too)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def flush_and_exit(code: int) -> NoReturn:
    """Flush stdout and stderr, then end the process at once with ``code``, skipping the
    interpreter's teardown: for a process whose work is all written and reported."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:
            silence(stream)
        except (OSError, ValueError):
            pass
    os._exit(code)
