"""Face positions in the 1927 Solvay conference photo (1328x568), marked by hand for the benchmark.

No trained detector is available offline, so the 29 faces were marked on a grid overlay: the point
between the eyes and the height of the mouth, in the photo's own pixels. The benchmark only needs
the faces' places and sizes to be realistic (they decide how many crops are restored and pasted),
not landmark-accurate, so the five points are laid out from these two with GPEN's template.
"""

from __future__ import annotations

import numpy as np

SIZE_WH = (1328, 568)

# (eyes centre x, eyes y, mouth y); back row, middle row, front row, left to right.
_MARKS: tuple[tuple[float, float, float], ...] = (
    (227, 50, 67), (323, 79, 93), (390, 105, 123), (500, 107, 123), (623, 120, 133),
    (723, 90, 107), (833, 100, 117), (943, 83, 100), (1027, 83, 100), (1107, 50, 65), (1173, 87, 103),
    (80, 170, 190), (197, 190, 210), (333, 172, 190), (479, 172, 193), (637, 167, 183),
    (757, 173, 190), (887, 177, 193), (1027, 177, 193), (1163, 183, 200),
    (121, 220, 240), (263, 223, 243), (399, 217, 237), (547, 223, 247),
    (720, 220, 237), (843, 223, 240), (955, 220, 240), (1107, 227, 243), (1210, 233, 250),
)  # fmt: skip

# GPEN's 512 template, relative to the eyes' centre, in units of the eye-to-mouth height (124 px).
_TEMPLATE = np.array(
    [(202.041, 242.884), (309.430, 242.290), (256.077, 303.959), (211.960, 366.828), (300.891, 366.336)]
)
_EYES = _TEMPLATE[:2].mean(axis=0)
_HEIGHT = _TEMPLATE[3:].mean(axis=0)[1] - _EYES[1]


def landmarks() -> np.ndarray:
    """(29, 5, 2) float32 landmarks in the photo's pixels (left eye, right eye, nose, mouth l/r)."""
    out = []
    for x, eye_y, mouth_y in _MARKS:
        unit = (mouth_y - eye_y) / _HEIGHT
        out.append((_TEMPLATE - _EYES) * unit + (x, eye_y))
    return np.asarray(out, dtype=np.float32)
