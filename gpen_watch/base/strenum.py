"""``StrEnum`` on every supported Python (the stdlib has it from 3.11 on).

Members are ``str`` instances, so they bind as SQLite parameters, compare equal to their values
and print as them, which is what the journal and the control channel's JSON need.
"""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # pragma: no cover - Python 3.10
    from enum import Enum

    class StrEnum(str, Enum):
        def __str__(self) -> str:
            return str(self.value)

        def __format__(self, spec: str) -> str:
            return format(str(self.value), spec)


__all__ = ["StrEnum"]
