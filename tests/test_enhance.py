"""The generator stage: which face-parsing classes end up in the paste mask."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import TINY_GPEN
from torch import nn

from gpen_watch.restore.engines.gpen_family import runner
from gpen_watch.restore.nets.gpen_model import GPENConfig, build_gpen
from gpen_watch.restore.runtime.device import placement
from gpen_watch.restore.stages.enhance import PARSE_CLASSES, FaceEnhancer

# A 512 x 512 parsing map cut into a 4 x 5 grid of cells; cell k holds class k (the 20th cell is
# background), so every one of ParseNet's 19 classes is present in one map.
_ROWS, _COLS = 4, 5


def _label_map(size: int = 512) -> torch.Tensor:
    rows = torch.arange(size) * _ROWS // size
    cols = torch.arange(size) * _COLS // size
    cell = rows[:, None] * _COLS + cols[None, :]
    return torch.where(cell < len(PARSE_CLASSES), cell, 0)


class LabelMapParser(nn.Module):
    """Answers like ParseNet (logits, image) with logits that pick the fixed map's class everywhere.

    Untrained ParseNet weights label almost every pixel with one class; this stands in for a trained
    parser so that the mask logic sees every class at known places.
    """

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.batches.append(len(x))
        labels = _label_map(x.shape[-1]).to(x.device)
        logits = nn.functional.one_hot(labels, len(PARSE_CLASSES)).permute(2, 0, 1).float()
        return logits.unsqueeze(0).expand(len(x), -1, -1, -1), x


def test_parse_mask_keeps_upstreams_classes() -> None:
    torch.manual_seed(0)
    gpen = build_gpen(GPENConfig(**TINY_GPEN))
    size = TINY_GPEN["size"]
    enhancer = FaceEnhancer(
        runner(gpen, placement("cpu", "fp32", False)),
        placement("cpu", "fp32", False),
        2,
        parser=LabelMapParser(),
    )
    crops = np.random.default_rng(0).integers(0, 256, (2, size, size, 3), dtype=np.uint8)
    _, masks = enhancer.enhance(crops)
    assert masks is not None
    assert masks.shape == (2, size, size)
    kept = set()
    for k, name in enumerate(PARSE_CLASSES):
        row, col = divmod(k, _COLS)
        y = int((row + 0.5) * size / _ROWS)
        x = int((col + 0.5) * size / _COLS)
        values = masks[:, y, x]
        assert set(values.tolist()) <= {0.0, 1.0}, (name, values)
        if values.all():
            kept.add(name)
    # Upstream GPEN's parse colour map: background, hat and cloth are 0, every other class 1.
    assert kept == set(PARSE_CLASSES) - {"background", "hat", "cloth"}
    assert {"neck", "neck_l", "hair"} <= kept


@pytest.mark.slow
def test_parser_runs_one_face_at_a_time_on_cpu() -> None:
    """ParseNet at 512 px holds ~0.5 GB of activations a face: on a CPU, where batching it gains
    nothing, a face batch of 4 is parsed in 4 passes, and the masks are the same."""
    torch.manual_seed(0)
    size = TINY_GPEN["size"]
    parser = LabelMapParser()
    enhancer = FaceEnhancer(
        runner(build_gpen(GPENConfig(**TINY_GPEN)), placement("cpu", "fp32", False)),
        placement("cpu", "fp32", False),
        4,
        parser=parser,
    )
    crops = np.random.default_rng(1).integers(0, 256, (6, size, size, 3), dtype=np.uint8)
    restored, masks = enhancer.enhance(crops)
    assert parser.batches == [1] * 6
    assert restored.shape == crops.shape
    assert masks is not None
    assert masks.shape == (6, size, size)
    assert np.array_equal(masks, np.broadcast_to(masks[:1], masks.shape))  # one map, six faces


def _strength_enhancer(strength: float) -> FaceEnhancer:
    torch.manual_seed(0)
    gpen = build_gpen(GPENConfig(**TINY_GPEN))
    return FaceEnhancer(
        runner(gpen, placement("cpu", "fp32", False)), placement("cpu", "fp32", False), 4, strength=strength
    )


def test_strength_blends_the_restored_crop_with_the_input_crop() -> None:
    size = TINY_GPEN["size"]
    crops = np.random.default_rng(2).integers(0, 256, (3, size, size, 3), dtype=np.uint8)
    full, _ = _strength_enhancer(1.0).enhance(crops)
    default, _ = FaceEnhancer(
        runner(
            (torch.manual_seed(0), build_gpen(GPENConfig(**TINY_GPEN)))[1], placement("cpu", "fp32", False)
        ),
        placement("cpu", "fp32", False),
        4,
    ).enhance(crops)
    none, _ = _strength_enhancer(0.0).enhance(crops)
    half, _ = _strength_enhancer(0.5).enhance(crops)
    # 1: what it was before strength existed (exact: the same generator on the same batch).
    assert np.array_equal(full, default)
    assert np.array_equal(none, crops)  # 0: the input crop, exactly
    assert np.abs(full.astype(int) - crops).mean() > 20  # the random generator changes the face...
    # ...and 0.5 is the midpoint of the two, up to the one rounding of each.
    midpoint = (full.astype(np.float64) + crops) / 2
    assert np.abs(half - midpoint).max() <= 1.0


def test_the_enhancer_runs_the_face_model_the_registry_family_loads(tiny_models) -> None:
    from gpen_watch.base.errors import ModelError
    from gpen_watch.catalog.face_frames import GPEN_FRAME
    from gpen_watch.catalog.registry import FILE_FAMILY, FaceFamily, face_family
    from gpen_watch.restore.runtime.face_model import family_impl, load_face_model

    assert face_family("GPEN-BFR-512").kind == "gpen"
    assert face_family(str(tiny_models.gpen)) is FILE_FAMILY  # a checkpoint file by its path
    with pytest.raises(ModelError, match="not a face restoration model"):
        face_family("ParseNet")
    with pytest.raises(TypeError, match="not a face family"):
        family_impl(FaceFamily("gpen", "GPEN", "gpen_watch.restore.nets.gpen_model:GPEN", GPEN_FRAME))
    place = placement("cpu", "fp32", False)
    model = load_face_model(str(tiny_models.gpen), None, place, download=False)
    assert model.size == TINY_GPEN["size"]
    size = model.size
    crops = np.random.default_rng(4).integers(0, 256, (3, size, size, 3), dtype=np.uint8)
    restored, masks = FaceEnhancer(model, place, 2).enhance(crops)
    assert restored.shape == crops.shape and restored.dtype == np.uint8 and masks is None
