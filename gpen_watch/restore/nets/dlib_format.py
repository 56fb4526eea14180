"""Reading the files dlib's ``serialize`` writes: the building blocks both of its model files
here are made of (``face_descriptor`` reads the face-recognition ResNet, ``shape_predictor`` the
five-point landmark predictor).

dlib writes an integer as one control byte (its length in bytes in the low nibble, bit 7 the sign)
followed by that many little-endian bytes of its magnitude; a float as two such integers, a
mantissa and a power of two; a bool as the character '0' or '1'; a string as its length then its
bytes; a vector as its length then its items; a matrix as minus its rows, minus its columns, then
its items as floats; a DNN tensor (version 2) as its four dimensions then raw little-endian
float32s. Each reader here checks what it reads and names the file and the offset when it is not
what the format allows, so a damaged or foreign file fails with a sentence, never with garbage.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np

from gpen_watch.base.errors import ModelError

T = TypeVar("T")

# The largest count a vector, string or matrix of these files may claim: far above any real one,
# low enough that a damaged length is refused before it is allocated.
_MAX_ITEMS = 1 << 26


class DlibStream:
    """A cursor over the bytes of one dlib file; every read advances it."""

    def __init__(self, data: bytes, path: Path, advice: str = "") -> None:
        self.data = data
        self.path = path
        self.pos = 0
        # What to do about a bad file, said after what is wrong with it.
        self.advice = advice

    @classmethod
    def open(cls, path: Path, advice: str = "") -> DlibStream:
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise ModelError(f"{path}: cannot read: {exc.strerror or exc}") from exc
        return cls(data, Path(path), advice)

    def fail(self, what: str) -> ModelError:
        """The error for a file that is not what it should be at the cursor."""
        text = f"{self.path}: not a whole dlib model file of this kind ({what} at byte {self.pos})"
        return ModelError(f"{text}; {self.advice}" if self.advice else text)

    @property
    def at_end(self) -> bool:
        return self.pos == len(self.data)

    def integer(self) -> int:
        """One of dlib's packed integers."""
        data, pos = self.data, self.pos
        if pos >= len(data):
            raise self.fail("the file ends early")
        control = data[pos]
        size = control & 0x0F
        if size == 0 or size > 8 or control & 0x70:
            raise self.fail(f"an integer's control byte {control:#04x} is not one dlib writes")
        if pos + 1 + size > len(data):
            raise self.fail("the file ends early")
        value = int.from_bytes(data[pos + 1 : pos + 1 + size], "little")
        self.pos = pos + 1 + size
        return -value if control & 0x80 else value

    def count(self, what: str) -> int:
        """A length: a non-negative integer within ``_MAX_ITEMS``."""
        n = self.integer()
        if not 0 <= n <= _MAX_ITEMS:
            raise self.fail(f"{what} of {n}")
        return n

    def real(self) -> float:
        """One float or double, as dlib's mantissa and binary exponent."""
        if self.pos < len(self.data) and self.data[self.pos] & 0x70:
            # dlib's older text format for floats, which neither file here uses.
            raise self.fail("a float in a format this reader does not know")
        mantissa = self.integer()
        exponent = self.integer()
        try:
            return math.ldexp(mantissa, exponent)
        except OverflowError:
            raise self.fail(f"a float of {mantissa} x 2^{exponent}") from None

    def reals(self, n: int) -> np.ndarray:
        """``n`` floats in a row, as float32 (the predictor's ~1.2 million leaf values: the loop
        is written out for speed)."""
        data, pos, end = self.data, self.pos, len(self.data)
        out = np.empty(n, dtype=np.float64)
        for i in range(n):
            parts = [0, 0]
            for j in range(2):
                if pos >= end:
                    self.pos = pos
                    raise self.fail("the file ends early")
                control = data[pos]
                size = control & 0x0F
                if size == 0 or size > 8 or control & 0x70:
                    self.pos = pos
                    raise self.fail(f"an integer's control byte {control:#04x} is not one dlib writes")
                if pos + 1 + size > end:
                    self.pos = pos
                    raise self.fail("the file ends early")
                value = int.from_bytes(data[pos + 1 : pos + 1 + size], "little")
                parts[j] = -value if control & 0x80 else value
                pos += 1 + size
            try:
                out[i] = math.ldexp(parts[0], parts[1])
            except OverflowError:
                self.pos = pos
                raise self.fail(f"a float of {parts[0]} x 2^{parts[1]}") from None
        self.pos = pos
        return out.astype(np.float32)

    def flag(self) -> bool:
        if self.pos >= len(self.data):
            raise self.fail("the file ends early")
        char = self.data[self.pos]
        if char not in (ord("0"), ord("1")):
            raise self.fail(f"a bool written as byte {char:#04x}")
        self.pos += 1
        return char == ord("1")

    def text(self) -> str:
        n = self.count("a string length")
        if self.pos + n > len(self.data):
            raise self.fail("the file ends early")
        raw = self.data[self.pos : self.pos + n]
        self.pos += n
        return raw.decode("latin-1")

    def expect(self, what: str, *allowed: str) -> str:
        """A version string, which must be one of ``allowed``."""
        start = self.pos
        got = self.text()
        if got not in allowed:
            self.pos = start
            raise self.fail(f"{what} {got[:40]!r} where {' or '.join(map(repr, allowed))} belongs")
        return got

    def version(self, what: str, *allowed: int) -> int:
        start = self.pos
        got = self.integer()
        if got not in allowed:
            self.pos = start
            raise self.fail(f"{what} version {got}")
        return got

    def tensor(self) -> np.ndarray:
        """A DNN tensor: (samples, channels, rows, columns) float32."""
        self.version("a tensor", 2)
        shape = tuple(self.count("a tensor dimension") for _ in range(4))
        n = math.prod(shape)
        if n > _MAX_ITEMS:
            raise self.fail(f"a tensor of shape {shape}")
        if self.pos + 4 * n > len(self.data):
            raise self.fail(f"the file ends early, inside a tensor of shape {shape}")
        values = np.frombuffer(self.data, dtype="<f4", count=n, offset=self.pos).reshape(shape)
        self.pos += 4 * n
        return values.astype(np.float32)

    def tensor_shape(self) -> tuple[int, ...]:
        """An alias tensor: only a shape (a view into a layer's parameters)."""
        self.version("an alias tensor", 1)
        return tuple(self.count("an alias tensor dimension") for _ in range(4))

    def matrix(self) -> np.ndarray:
        """A float matrix (rows, columns)."""
        rows, cols = abs(self.integer()), abs(self.integer())
        if rows * cols > _MAX_ITEMS:
            raise self.fail(f"a {rows} x {cols} matrix")
        return self.reals(rows * cols).reshape(rows, cols)

    def items(self, read: Callable[[], T]) -> list[T]:
        """A vector: its length, then each item as ``read`` reads it."""
        return [read() for _ in range(self.count("a vector length"))]
