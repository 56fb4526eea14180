"""What to tell a user whose own checkpoint file, given as restore.model, holds none of the face
model families' networks: what the file holds, what restore.model takes, and what it may be
instead where its keys show a network of another kind."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gpen_watch.catalog.registry import FACE_FAMILIES, FACE_MODEL_NAMES

# Other networks users are known to have beside face restorers: their keys, and what to say.
_LOOKALIKES: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        ("conv_body_first.0.weight", "stylegan_decoder.constant_input.weight"),
        "GFPGAN v1, the first release, whose network gpen-watch does not run (GFPGAN-v1.3 and "
        "GFPGAN-v1.4 are the clean ones it does)",
    ),
    (
        ("conv_first.weight", "body.0.rdb1.conv1.weight"),
        "an RRDBNet (ESRGAN) background upscaler, which restore.upscale_model takes",
    ),
    (
        ("body.stage1.0.0.weight", "ssh1.conv3X3.0.weight"),
        "a RetinaFace face detector, which restore.detector names from gpen-watch's own",
    ),
)
_SHOWN_KEYS = 3


def not_a_face_model(path: Path, keys: Sequence[str], container: str | None) -> str:
    """The sentence for ``path``, whose state dict (under ``container``, None for a bare one)
    holds ``keys`` and none of ``FACE_FAMILIES``' marks."""
    where = f" under '{container}'" if container else ""
    shown = ", ".join(keys[:_SHOWN_KEYS]) + (", ..." if len(keys) > _SHOWN_KEYS else "")
    held = set(keys)
    looks = next((what for marks, what in _LOOKALIKES if held.issuperset(marks)), None)
    families = "; ".join(f"{f.label}'s hold {' and '.join(f.marks)}" for f in FACE_FAMILIES)
    return (
        f"{path}: not a face restoration model gpen-watch can run: its {len(keys)} weights{where} "
        f"are {shown}" + (f"; they look like {looks}" if looks else "") + ". restore.model "
        f"takes a GPEN, GFPGAN (v1.3, v1.4) or CodeFormer checkpoint file, known by its keys "
        f"({families}), or one of the names {', '.join(FACE_MODEL_NAMES)}: give it one of those, "
        "or check that this is the file you meant."
    )
