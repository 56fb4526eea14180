"""Which results of an earlier `gpen-watch restore` run are already there.

With ``output.format = same`` a result's name follows its content, not the input's name: a HEIC
is written as ``.jpg``, a PNG named ``.jpg`` as ``.png``, a scan with no extension gets one. The
exact format is only known once the pixels are decoded (transparency, bit depth), so before the
models load every name the result could get is looked at: the formats the output rule can pick
for the input's header format.
"""

from __future__ import annotations

from collections.abc import Collection
from itertools import product
from pathlib import Path

from gpen_watch.base.errors import InputError


def result_names(src: Path, dst: Path, out_format: str, max_megapixels: float) -> list[Path]:
    """``dst`` and every other name the result of ``src`` (read with restore.max_megapixels) can
    be written under."""
    if out_format != "same":
        return [dst]  # the planned name already carries the requested format's suffix
    from gpen_watch.imaging.formats import matching_suffix
    from gpen_watch.imaging.load import probe_image
    from gpen_watch.imaging.output_rule import choose_output

    try:
        source_format, _ = probe_image(src, max_megapixels)
    except InputError:
        return [dst]  # it will fail to decode, and the run says why
    formats = {
        choose_output(source_format, "same", alpha=alpha, bit_depth=depth).format
        for alpha, depth in product((False, True), (8, 16))
    }
    names = [dst, *sorted({dst.with_suffix(matching_suffix(fmt, dst.suffix)) for fmt in formats})]
    return list(dict.fromkeys(names))


def existing_result(
    src: Path, dst: Path, out_format: str, planned: Collection[Path], max_megapixels: float
) -> Path | None:
    """The result of ``src`` that is already on disk, or None.

    ``planned`` are the names planned for all inputs: a file under another input's name is that
    one's result (two inputs whose results collide are reported when the second is written).
    """
    if dst.exists():
        return dst
    for name in result_names(src, dst, out_format, max_megapixels)[1:]:
        if name not in planned and name.exists():
            return name
    return None
