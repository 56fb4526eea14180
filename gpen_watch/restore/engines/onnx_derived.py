"""Files made from an fp32 ONNX export (its int8 quantisation, its fp16 copy), cached beside it.

A derived file is named after its export and what it is (``parsenet.parser.int8.onnx``,
``GPEN-BFR-512.fp16.onnx``), so a redo replaces the old file. It is used only when whole and
current: its manifest (the file's name plus ``.json``) records the fp32 export's sha256, what made
it (the tool and its version and options: ``maker``), the recipe it was made to (for int8 the
calibration set; "" where there is none) and the file's own sha256 and size. The file and then
the manifest are written to temp names in the same folder and renamed into place, and the old
manifest goes first, so a run killed half-way leaves nothing that is used.

Imports nothing heavy: the exporter (torch) and the converters (ONNX Runtime's tools) are the
callers'.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypeVar

log = logging.getLogger(__name__)

M = TypeVar("M")

_CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def write_replace(dst: Path, write: Callable[[Path], object]) -> None:
    """``write`` into a temp name beside ``dst``, then rename it into place (nothing half-written
    is ever at ``dst``); the temp file goes whatever happens."""
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=".tmp", dir=dst.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write(tmp)
        # mkstemp makes it 0600; the file is as readable as the weights beside it normally are.
        tmp.chmod(0o644)
        with tmp.open("rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, dst)
    finally:
        tmp.unlink(missing_ok=True)


@dataclass(frozen=True)
class DerivedManifest:
    """What the ``*.<tag>.onnx.json`` beside a derived file says about it."""

    fp32_sha256: str
    maker: str
    recipe: str
    onnx_sha256: str
    onnx_bytes: int


def derived_path(fp32: Path, tag: str) -> Path:
    """Beside the fp32 export: ``<its stem>.<tag>.onnx``."""
    return fp32.with_name(f"{fp32.stem}.{tag}.onnx")


def manifest_path(derived: Path) -> Path:
    return derived.with_name(derived.name + ".json")


def load_manifest(onnx_path: Path, kind: type[M]) -> M | None:
    """The ``kind`` manifest beside ``onnx_path``; None where there is none or it does not read as one."""
    try:
        data = json.loads(manifest_path(onnx_path).read_text(encoding="utf-8"))
        return kind(**data)
    except (OSError, ValueError, TypeError):
        return None


def write_manifest(onnx_path: Path, manifest: object) -> None:
    """``manifest`` (a dataclass) beside ``onnx_path``, under a temp name until whole."""
    text = json.dumps(asdict(manifest), indent=1)  # type: ignore[call-overload]
    write_replace(manifest_path(onnx_path), lambda tmp: tmp.write_text(text, encoding="utf-8"))


def changed_reason(onnx_path: Path, onnx_bytes: int, onnx_sha256: str) -> str | None:
    """Why the file at ``onnx_path`` is not the one its manifest describes (None: it is)."""
    try:
        if onnx_path.stat().st_size != onnx_bytes or file_sha256(onnx_path) != onnx_sha256:
            return "the file is not the one its manifest describes"
    except OSError:
        return "no file"
    return None


def read_manifest(derived: Path) -> DerivedManifest | None:
    return load_manifest(derived, DerivedManifest)


def stale_reason(derived: Path, fp32_sha256: str, maker: str, recipe: str = "") -> str | None:
    """Why the file at ``derived`` must not be used (None: whole and current)."""
    manifest = read_manifest(derived)
    if manifest is None:
        return "no readable manifest"
    if manifest.fp32_sha256 != fp32_sha256:
        return "made from another fp32 export"
    if manifest.maker != maker:
        return f"made by {manifest.maker}"
    if manifest.recipe != recipe:
        return f"made to {manifest.recipe}"
    return changed_reason(derived, manifest.onnx_bytes, manifest.onnx_sha256)


@dataclass(frozen=True)
class CachedDerived:
    path: Path
    manifest: DerivedManifest
    made: bool  # made now, not read from the cache


def cached_derived(
    fp32: Path,
    tag: str,
    maker: str,
    make: Callable[[Path, Path], object],
    recipe: str = "",
    force: bool = False,
) -> CachedDerived:
    """The ``tag`` file made from the fp32 export at ``fp32`` by ``make(fp32, dst)``, made now
    unless a whole, current one is cached beside it. ``force``: make it again whatever the cache
    holds (a cached file ONNX Runtime refused)."""
    fp32_sha = file_sha256(fp32)
    dst = derived_path(fp32, tag)
    reason = f"asked to make the {tag} file again" if force else stale_reason(dst, fp32_sha, maker, recipe)
    if reason is None:
        manifest = read_manifest(dst)
        assert manifest is not None
        return CachedDerived(dst, manifest, made=False)
    log.info("making %s from %s (%s)", dst.name, fp32.name, reason)
    # From here until the new manifest is in place nothing at dst is trusted.
    manifest_path(dst).unlink(missing_ok=True)
    write_replace(dst, lambda tmp: make(fp32, tmp))
    manifest = DerivedManifest(fp32_sha, maker, recipe, file_sha256(dst), dst.stat().st_size)
    write_manifest(dst, manifest)
    return CachedDerived(dst, manifest, made=True)
