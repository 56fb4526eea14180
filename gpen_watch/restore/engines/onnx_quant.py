"""Static int8 quantisation of an fp32 ONNX export, cached beside it (issue 36).

ONNX Runtime's post-training quantiser (``onnxruntime.quantization.quantize_static``) in QDQ form:
every convolution's weights int8 per output channel (symmetric), activations uint8 per tensor
with ranges from min/max over a calibration set run through the fp32 model. QDQ keeps the graph a
plain ONNX graph of QuantizeLinear/DequantizeLinear pairs around float operators, which the CPU
provider fuses into integer kernels and which OpenVINO's runtime reads as its own int8 form.

The calibration set is the caller's: it must be real inputs of the kind the model will see
(aligned face crops for ParseNet, photos for the detector); noise calibrates ranges that real
faces then overflow or leave unused. It is named, and its name carries a digest of its arrays, so
the cache knows when the set changed.

The int8 file is cached beside the export as ``onnx_derived`` caches every file made from one:
its manifest names the quantiser (ONNX Runtime's version and this module's options) as its maker
and the calibration set as its recipe.
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpen_watch.restore.engines import onnx_derived
from gpen_watch.restore.engines.onnx_derived import CachedDerived, cached_derived, derived_path

log = logging.getLogger(__name__)

# Bumped when what quantize() asks of the quantiser changes (format, types, options), so older
# int8 files are made again.
FORMAT = 1


def quantiser_key() -> str:
    """What made an int8 file: a new ONNX Runtime or new options make the cached one stale."""
    import onnxruntime

    return f"onnxruntime-{onnxruntime.__version__}+qdq-s8w-perchannel-u8a-minmax+format{FORMAT}"


@dataclass(frozen=True)
class Calibration:
    """A named, fixed set of model inputs: each item one pass's feed (input name -> array)."""

    label: str  # what the set is, for people: "solvay-faces-512"
    feeds: Sequence[dict[str, np.ndarray]]

    @property
    def name(self) -> str:
        """The label and a digest of every array, so two sets with one label are told apart."""
        digest = hashlib.sha256()
        for feed in self.feeds:
            for key in sorted(feed):
                arr = np.ascontiguousarray(feed[key])
                digest.update(f"{key}:{arr.dtype.str}:{arr.shape}".encode())
                digest.update(arr.tobytes())
        return f"{self.label}+{len(self.feeds)}x+{digest.hexdigest()[:16]}"


class _Reader:
    """``CalibrationDataReader`` over a ``Calibration``: one feed a call, then None."""

    def __init__(self, calibration: Calibration) -> None:
        self._feeds: Iterator[dict[str, np.ndarray]] = iter(calibration.feeds)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._feeds, None)


def quantize(fp32: Path, dst: Path, calibration: Calibration) -> None:
    """``fp32`` quantised to int8 (QDQ, per-channel weights) at ``dst``, calibrated on
    ``calibration``. Writes ``dst`` directly: ``cached_quantized`` gives it a temp name."""
    if not calibration.feeds:
        raise ValueError(f"no calibration inputs for {fp32.name}: int8 ranges need real inputs")
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Reader(_Reader, CalibrationDataReader):  # type: ignore[misc]  # the quantiser checks its base
        pass

    with tempfile.TemporaryDirectory(prefix=".quant.", dir=dst.parent) as work:
        # The quantiser wants shapes on every tensor; the dynamo export leaves some unnamed.
        pre = Path(work) / "pre.onnx"
        quant_pre_process(str(fp32), str(pre), skip_symbolic_shape=True)
        quantize_static(
            str(pre),
            str(dst),
            Reader(calibration),
            quant_format=QuantFormat.QDQ,
            per_channel=True,
            weight_type=QuantType.QInt8,
            activation_type=QuantType.QUInt8,
            calibrate_method=CalibrationMethod.MinMax,
            calibration_providers=["CPUExecutionProvider"],
        )


TAG = "int8"


def quantized_path(fp32: Path) -> Path:
    """Beside the fp32 export, one name per export so a redo replaces the old file."""
    return derived_path(fp32, TAG)


def stale_reason(int8: Path, fp32_sha256: str, calibration_name: str) -> str | None:
    """Why the int8 file at ``int8`` must not be used (None: whole and current)."""
    return onnx_derived.stale_reason(int8, fp32_sha256, quantiser_key(), calibration_name)


def cached_quantized(fp32: Path, calibration: Calibration, force: bool = False) -> CachedDerived:
    """The int8 model of the fp32 export at ``fp32``, made now unless a whole, current one is
    cached beside it. ``force``: make it again whatever the cache holds (a cached file ONNX
    Runtime refused)."""

    def make(src: Path, dst: Path) -> None:
        log.info("quantising %s to int8 on %s", src.name, calibration.label)
        quantize(src, dst, calibration)

    return cached_derived(fp32, TAG, quantiser_key(), make, calibration.name, force)
