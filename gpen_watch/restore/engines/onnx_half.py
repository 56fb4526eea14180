"""An fp16 copy of an fp32 ONNX export, for the providers that run fp16 graphs on a GPU
(``catalog.providers``: ``Provider.half``), cached beside the export by ``onnx_derived``.

The copy is made by ONNX Runtime's own converter (``onnxruntime.transformers.float16``, in every
onnxruntime wheel): weights and activations in fp16, the operators its block list names kept in
fp32 with casts around them, and the graph's inputs and outputs left fp32, so a session over the
copy is fed and read exactly as one over the export. Not exported again from torch: the copy is a
function of the fp32 export, which is already keyed to the weights and the exporter.
"""

from __future__ import annotations

from pathlib import Path

from gpen_watch.restore.engines.onnx_derived import CachedDerived, cached_derived

TAG = "fp16"
# Bumped when what to_half asks of the converter changes, so older copies are made again.
FORMAT = 1


def converter_key() -> str:
    """What made an fp16 copy: a new ONNX Runtime (its converter) makes the cached one stale."""
    import onnxruntime

    return f"onnxruntime-{onnxruntime.__version__}+float16-fp32io+format{FORMAT}"


def to_half(fp32: Path, dst: Path) -> None:
    """The export at ``fp32`` converted to fp16 at ``dst`` (fp32 inputs and outputs)."""
    import onnx

    # Its package appends its own folder to sys.path, which ONNX Runtime's quantiser then imports
    # from (``onnx_quant``): left as it is.
    from onnxruntime.transformers.float16 import convert_float_to_float16

    model = onnx.load(str(fp32))
    onnx.save(convert_float_to_float16(model, keep_io_types=True), str(dst))


def cached_half(fp32: Path, force: bool = False) -> CachedDerived:
    """The fp16 copy of the export at ``fp32``, made now unless a whole, current one is cached
    beside it. ``force``: make it again whatever the cache holds (a copy ONNX Runtime refused)."""
    return cached_derived(fp32, TAG, converter_key(), to_half, force=force)
