"""The settings one photo was really restored with: what the engine applied to it (its inbox's
profile or a redo's settings over the worker's own), sent back with its result, kept in the
journal beside it and shown on its page.

A record of the run, not a copy of the configuration: after `gpen-watch reload` the settings in
effect change, and a photo restored before (or by a worker still on the old settings) keeps the
ones it was restored with.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from gpen_watch.catalog.registry import has_fidelity, model_label
from gpen_watch.config.schema import GLOBAL_ONLY, RestoreConfig


@dataclass(frozen=True)
class SettingsUsed:
    model: str  # restore.model as the engine had it: a registry name, or a weights file's path
    strength: float
    faces: str  # restore.faces: "all", "largest", "center"
    upscale: int
    # The format the result was written in ("JPEG", "PNG"): the content, not the setting's
    # "same"; "" while nothing is written (a run that failed before).
    format: str = ""
    # Every setting that decides how this photo comes out (``result_key``): a copy of its result
    # is given to a photo of the same content only while the settings in effect give the same key.
    key: str = ""
    # restore.fidelity, for a model whose family takes one (CodeFormer); None for the others.
    fidelity: float | None = None

    @classmethod
    def of(cls, restore: RestoreConfig, output_format: str = "same", jpeg_quality: int = 95) -> SettingsUsed:
        key = result_key(restore, output_format, jpeg_quality)
        fidelity = restore.fidelity if has_fidelity(restore.model) else None
        return cls(
            restore.model, restore.strength, str(restore.faces), restore.upscale, key=key, fidelity=fidelity
        )

    @property
    def label(self) -> str:
        """In a few words, for two runs side by side: "CodeFormer, fidelity 0.7, strength 0.8"."""
        parts = [model_label(self.model)]
        if self.fidelity is not None:
            parts.append(f"fidelity {self.fidelity:g}")
        parts.append(f"strength {self.strength:g}")
        if self.upscale > 1:
            parts.append(f"upscaled x{self.upscale}")
        return ", ".join(parts)

    def written_as(self, fmt: str | None) -> SettingsUsed:
        return dataclasses.replace(self, format=fmt or "")

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: object) -> SettingsUsed | None:
        """The record as the journal keeps it; None for a run without one (restored by a
        gpen-watch that kept none, or by a stand-in restorer) or one this version cannot read."""
        if not isinstance(data, dict):
            return None
        try:
            return cls(
                model=str(data["model"]),
                strength=float(data["strength"]),
                faces=str(data["faces"]),
                upscale=int(data["upscale"]),
                format=str(data.get("format") or ""),
                key=str(data.get("key") or ""),
                fidelity=None if data.get("fidelity") is None else float(data["fidelity"]),
            )
        except (KeyError, TypeError, ValueError):
            return None


# The restore settings that are each worker's own (config.GLOBAL_ONLY: the device, the number
# formats, the folders): the same photo through two workers comes out the same up to rounding.
_WORKER_OWN = frozenset(name.partition(".")[2] for name in GLOBAL_ONLY if name.startswith("restore."))


def result_key(restore: RestoreConfig, output_format: str, jpeg_quality: int) -> str:
    """A digest of the settings a photo's result depends on: every restore setting an inbox's
    profile can set, and the output's format and quality."""
    fields = {
        f.name: getattr(restore, f.name) for f in dataclasses.fields(restore) if f.name not in _WORKER_OWN
    }
    fields["output.format"], fields["output.jpeg_quality"] = output_format, jpeg_quality
    text = json.dumps(fields, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
