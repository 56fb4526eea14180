"""The project's own networks exported to ONNX, cached beside their weights files.

The export is torch's dynamo exporter (``torch.onnx.export(..., dynamo=True)``, through onnxscript):
the older TorchScript exporter refuses GPEN's modulated convolution ("convolution for kernel of
unknown shape": the per-sample weights have no static shape in its trace). Opset ``OPSET``; the
batch axis is dynamic, and for a network whose input is a whole photo or a tile (the detector, the
upscaler, the parser at either of its sizes) so are height and width (``ExportSpec``).

A cached export is used only when it is known whole and current. Its manifest (``*.onnx.json``)
records the source file's sha256, the exporter key (torch, onnxscript, opset and this module's
format) and the exported file's own sha256 and size. The ONNX file and then the manifest are each
written to a temp name in the same folder and renamed into place, so a conversion killed half-way
leaves either no manifest or one naming the previous file, which the hash check then refuses; a
refused or stale export is made again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import logging
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from gpen_watch.restore.engines.onnx_derived import (
    changed_reason,
    file_sha256,
    load_manifest,
    manifest_path,
    write_manifest,
    write_replace,
)

log = logging.getLogger(__name__)

# 18: what every provider in catalog.providers takes today (DirectML and CoreML trail the newest
# opsets); nothing GPEN uses needs a newer one.
OPSET = 18
# Bumped when what this module writes changes (names, axes, options), so older exports are redone.
# 2: several network kinds, each with its own names and dynamic axes (``ExportSpec``).
# 3: the parser's upsampling blocks interleave by reshaping, without ScatterNDs (``upconv``).
FORMAT = 3
INPUT_NAME = "faces"
OUTPUT_NAME = "restored"
# A face model's second input where its family takes a fidelity weight: (N,) float, one per face.
FIDELITY_NAME = "fidelity"


@dataclass(frozen=True)
class ExportSpec:
    """How one kind of network is exported: its names, its example input and which of its axes
    are dynamic. ``kind`` also goes into the file name, so the networks of one weights file (or of
    files that share a stem) never share an export."""

    kind: str = ""  # "": the generator's plain ``<stem>.onnx`` (what the first exports were named)
    inputs: tuple[str, ...] = (INPUT_NAME,)
    outputs: tuple[str, ...] = (OUTPUT_NAME,)
    # The example input's (N, C, H, W). Batch 2: with 1 the exporter may specialise the axis even
    # when told it is dynamic; likewise H and W differ from each other where they are dynamic.
    example: tuple[int, int, int, int] = (2, 3, 512, 512)
    # H and W dynamic too, each a multiple of this (the network's stride: the detector pads its
    # input to 32, the upscaler to its unshuffle grid); 0: fixed at the example's.
    spatial_multiple: int = 0
    # A second input of one weight per image, (N,), on the same batch axis (CodeFormer's w): an
    # input of the graph, so one export serves every restore.fidelity.
    fidelity: bool = False


def generator_spec(size: int, fidelity: bool = False) -> ExportSpec:
    """A face model: (N, 3, size, size) [and (N,) weights] -> (N, 3, size, size), only the batch
    dynamic."""
    if fidelity:
        return ExportSpec(inputs=(INPUT_NAME, FIDELITY_NAME), example=(2, 3, size, size), fidelity=True)
    return ExportSpec(example=(2, 3, size, size))


def exporter_key() -> str:
    """What made an export: a change in any part of it makes the cached file stale."""
    import onnxscript

    return f"torch-{torch.__version__}+onnxscript-{onnxscript.__version__}+opset{OPSET}+format{FORMAT}"


@dataclass(frozen=True)
class Manifest:
    """What the ``*.onnx.json`` beside an export says about it."""

    source_sha256: str
    exporter: str
    onnx_sha256: str
    onnx_bytes: int
    size: int  # the image side the export takes (0: any, its H and W are dynamic)


def export_path(source: Path, cache_dir: Path | None = None, kind: str = "") -> Path:
    """Where ``source``'s export of network ``kind`` goes: beside it unless ``cache_dir`` says
    otherwise; one name per source file and kind, so a re-export replaces the old one instead of
    piling up."""
    suffix = f".{kind}.onnx" if kind else ".onnx"
    return (cache_dir or source.parent) / f"{source.stem}{suffix}"


def _dynamic_axes(spec: ExportSpec) -> dict[int, object]:
    axes: dict[int, object] = {0: torch.export.Dim("batch", min=1, max=1024)}
    if spec.spatial_multiple:
        m = spec.spatial_multiple
        # Multiples of the stride as derived dims: the exporter then knows every feature map's
        # side divides evenly, and needs no guard that would pin the example's size.
        for axis, name in ((2, "height"), (3, "width")):
            dim = torch.export.Dim(f"{name}_steps", min=1, max=16384 // m)
            axes[axis] = dim * m if m > 1 else dim
    return axes


def export_module(module: nn.Module, size: int, dst: Path, spec: ExportSpec | None = None) -> None:
    """``module`` (eval mode) exported to ``dst`` as one self-contained file (no external data:
    the largest GPEN is well under protobuf's 2 GB). Without ``spec``: a generator,
    (N, 3, size, size) -> (N, 3, size, size)."""
    spec = spec or generator_spec(size)
    if size and not spec.spatial_multiple:
        # A face model's side is its network's, known once it is built.
        spec = dataclasses.replace(spec, example=(*spec.example[:2], size, size))
    module = module.eval()
    examples: tuple[torch.Tensor, ...] = (torch.zeros(spec.example),)
    # The forward's argument names key dynamic_shapes; take them from the signature so any network fits.
    names = list(inspect.signature(module.forward).parameters)
    axes = _dynamic_axes(spec)
    dynamic: dict[str, object] = {names[0]: axes}
    if spec.fidelity:
        # The weights share the faces' batch axis (the same Dim), which ties the two.
        examples += (torch.full(spec.example[:1], 0.5),)
        dynamic[names[1]] = {0: axes[0]}
    with torch.inference_mode(False), torch.no_grad(), _quiet(_CHATTY_LOGGERS), warnings.catch_warnings():
        # Two inputs on one batch axis (a face model's fidelity weights) make the exporter say it
        # names the axis once; that is the intent, not a fault.
        warnings.filterwarnings("ignore", message=r".*The axis name", category=UserWarning)
        program = torch.onnx.export(
            module,
            examples,
            dynamo=True,
            opset_version=OPSET,
            input_names=list(spec.inputs),
            output_names=list(spec.outputs),
            dynamic_shapes=dynamic,
            external_data=False,
            verbose=False,  # its progress lines go to stdout; cached_export logs what it did
        )
    if program is None:  # only the TorchScript exporter returns None
        raise RuntimeError("torch.onnx.export gave no program")
    program.save(str(dst), external_data=False)


# The exporter's passes log a line at INFO for each initializer merged and node removed (hundreds
# for a ResNet-50): noise in a log whose level is INFO. Their warnings still show.
_CHATTY_LOGGERS = ("onnx_ir", "onnxscript", "torch.onnx")


@contextlib.contextmanager
def _quiet(names: tuple[str, ...]) -> Iterator[None]:
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(max(lg.getEffectiveLevel(), logging.WARNING))
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def read_manifest(onnx_path: Path) -> Manifest | None:
    return load_manifest(onnx_path, Manifest)


def stale_reason(onnx_path: Path, source_sha256: str) -> str | None:
    """Why the export at ``onnx_path`` must not be used (None: it is whole and current)."""
    manifest = read_manifest(onnx_path)
    if manifest is None:
        return "no readable manifest"
    if manifest.source_sha256 != source_sha256:
        return "made from another weights file"
    if manifest.exporter != exporter_key():
        return f"made by {manifest.exporter}"
    return changed_reason(onnx_path, manifest.onnx_bytes, manifest.onnx_sha256)


@dataclass(frozen=True)
class CachedExport:
    path: Path
    manifest: Manifest
    exported: bool  # made now, not read from the cache


def cached_export(
    source: Path,
    build: Callable[[], tuple[nn.Module, int]],
    cache_dir: Path | None = None,
    force: bool = False,
    spec: ExportSpec | None = None,
) -> CachedExport:
    """The ONNX export of the network in ``source`` (``build`` loads it and says its image side,
    0 for a network whose H and W are dynamic), made now unless a whole, current one is cached
    (then ``source`` is hashed, never loaded). The side needs no check of its own: the source's
    hash fixes it. ``force``: export again whatever the cache holds (a cached file that ONNX
    Runtime refused). ``spec``: how to export it; None: a generator of the side ``build`` says."""
    source_sha = file_sha256(source)
    dst = export_path(source, cache_dir, spec.kind if spec else "")
    reason = "asked to export again" if force else stale_reason(dst, source_sha)
    if reason is None:
        manifest = read_manifest(dst)
        assert manifest is not None
        return CachedExport(dst, manifest, exported=False)
    log.info("exporting %s to ONNX (%s)", source.name, reason)
    dst.parent.mkdir(parents=True, exist_ok=True)
    # The old manifest goes first: from here until the new one is in place nothing is trusted.
    manifest_path(dst).unlink(missing_ok=True)
    t0 = time.perf_counter()
    module, size = build()
    write_replace(dst, lambda tmp: export_module(module, size, tmp, spec))
    manifest = Manifest(source_sha, exporter_key(), file_sha256(dst), dst.stat().st_size, size)
    log.info("exported %s in %.1f s (%.1f MB)", dst.name, time.perf_counter() - t0, manifest.onnx_bytes / 1e6)
    write_manifest(dst, manifest)
    return CachedExport(dst, manifest, exported=True)
