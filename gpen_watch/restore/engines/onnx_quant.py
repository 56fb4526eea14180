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

A cached int8 file is used only when whole and current: its manifest (``*.int8.onnx.json``)
records the fp32 export's sha256, the quantiser key (ONNX Runtime's version and this module's
options), the calibration set's name and the int8 file's own sha256 and size. The file and then
the manifest are written to temp names in the same folder and renamed into place, and the old
manifest goes first, so a run killed half-way leaves nothing that is used.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

# Bumped when what quantize() asks of the quantiser changes (format, types, options), so older
# int8 files are made again.
FORMAT = 1
_CHUNK = 1 << 20


def quantiser_key() -> str:
    """What made an int8 file: a new ONNX Runtime or new options make the cached one stale."""
    import onnxruntime

    return f"onnxruntime-{onnxruntime.__version__}+qdq-s8w-perchannel-u8a-minmax+format{FORMAT}"


def file_sha256(path: Path) -> str:
    # onnx_export's own would do, but it imports torch: quantising needs only ONNX Runtime.
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


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


@dataclass(frozen=True)
class QuantManifest:
    """What the ``*.int8.onnx.json`` beside an int8 file says about it."""

    fp32_sha256: str
    quantiser: str
    calibration: str
    onnx_sha256: str
    onnx_bytes: int


def quantized_path(fp32: Path) -> Path:
    """Beside the fp32 export, one name per export so a redo replaces the old file."""
    return fp32.with_name(f"{fp32.stem}.int8.onnx")


def manifest_path(int8: Path) -> Path:
    return int8.with_name(int8.name + ".json")


def read_manifest(int8: Path) -> QuantManifest | None:
    try:
        data = json.loads(manifest_path(int8).read_text(encoding="utf-8"))
        return QuantManifest(**data)
    except (OSError, ValueError, TypeError):
        return None


def stale_reason(int8: Path, fp32_sha256: str, calibration_name: str) -> str | None:
    """Why the int8 file at ``int8`` must not be used (None: whole and current)."""
    manifest = read_manifest(int8)
    if manifest is None:
        return "no readable manifest"
    if manifest.fp32_sha256 != fp32_sha256:
        return "made from another fp32 export"
    if manifest.quantiser != quantiser_key():
        return f"made by {manifest.quantiser}"
    if manifest.calibration != calibration_name:
        return f"calibrated on {manifest.calibration}"
    try:
        if int8.stat().st_size != manifest.onnx_bytes or file_sha256(int8) != manifest.onnx_sha256:
            return "the file is not the one its manifest describes"
    except OSError:
        return "no file"
    return None


def _write_replace(dst: Path, write: Callable[[Path], object]) -> None:
    """``write`` into a temp name beside ``dst``, then rename it into place; the temp file goes
    whatever happens, so nothing half-written is ever at ``dst``."""
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=".tmp", dir=dst.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write(tmp)
        tmp.chmod(0o644)  # mkstemp's 0600; as readable as the fp32 export beside it
        with tmp.open("rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, dst)
    finally:
        tmp.unlink(missing_ok=True)


@dataclass(frozen=True)
class CachedQuant:
    path: Path
    manifest: QuantManifest
    quantized: bool  # made now, not read from the cache


def cached_quantized(fp32: Path, calibration: Calibration, force: bool = False) -> CachedQuant:
    """The int8 model of the fp32 export at ``fp32``, made now unless a whole, current one is
    cached beside it. ``force``: make it again whatever the cache holds (a cached file ONNX
    Runtime refused)."""
    fp32_sha = file_sha256(fp32)
    dst = quantized_path(fp32)
    name = calibration.name
    reason = "asked to quantise again" if force else stale_reason(dst, fp32_sha, name)
    if reason is None:
        manifest = read_manifest(dst)
        assert manifest is not None
        return CachedQuant(dst, manifest, quantized=False)
    log.info("quantising %s to int8 on %s (%s)", fp32.name, calibration.label, reason)
    # From here until the new manifest is in place nothing at dst is trusted.
    manifest_path(dst).unlink(missing_ok=True)
    _write_replace(dst, lambda tmp: quantize(fp32, tmp, calibration))
    manifest = QuantManifest(fp32_sha, quantiser_key(), name, file_sha256(dst), dst.stat().st_size)
    _write_replace(
        manifest_path(dst),
        lambda tmp: tmp.write_text(json.dumps(asdict(manifest), indent=1), encoding="utf-8"),
    )
    return CachedQuant(dst, manifest, quantized=True)
