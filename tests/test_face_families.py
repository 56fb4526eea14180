"""Each face model family through the same pipeline: its template, its scale, its paste mask and
(CodeFormer's) fidelity weight, chosen by restore.model alone. The references are facexlib's
FaceRestoreHelper where it decides (template, square mask, parse-mask softening) and GPEN's own
arithmetic, which must not move."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from conftest import TINY_GPEN
from facexlib_reference import restore_helper
from test_enhance import LabelMapParser

from gpen_watch import config
from gpen_watch.base.errors import ConfigError, ModelError
from gpen_watch.catalog import registry
from gpen_watch.catalog.face_frames import FFHQ_FRAME, GPEN_FRAME, FaceFrame
from gpen_watch.restore.engines.gpen_family import runner
from gpen_watch.restore.nets.gpen_model import GPENConfig, build_gpen
from gpen_watch.restore.runtime.device import placement
from gpen_watch.restore.runtime.face_model import FaceFamilyImpl, family_impl
from gpen_watch.restore.stages import align, paste
from gpen_watch.restore.stages.enhance import FaceEnhancer

PLACE = placement("cpu", "fp32", False)


def test_restore_model_names_pick_the_family_its_frame_and_its_fidelity() -> None:
    families = {name: registry.face_family(name) for name in ("GPEN-BFR-512", "GFPGAN-v1.4", "CodeFormer")}
    assert registry.face_family("GFPGAN-v1.3") is families["GFPGAN-v1.4"]
    assert [f.frame for f in families.values()] == [GPEN_FRAME, FFHQ_FRAME, FFHQ_FRAME]
    assert [registry.has_fidelity(name) for name in families] == [False, False, True]
    assert registry.has_fidelity("my-own-gpen.pth") is False  # a missing file is read as GPEN
    for family in registry.FACE_FAMILIES:
        assert isinstance(family_impl(family), FaceFamilyImpl)


def test_ffhq_template_is_facexlibs_and_the_crop_puts_the_landmarks_on_it() -> None:
    want = restore_helper(512).face_template
    np.testing.assert_allclose(align.face_template(512, FFHQ_FRAME), want, rtol=0, atol=1e-4)
    np.testing.assert_allclose(
        align.face_template(256, FFHQ_FRAME), restore_helper(256).face_template, atol=1e-4
    )
    # A face turned, shrunk and moved: aligned, its five points land on the template.
    turn = np.deg2rad(12.0)
    rot = 0.4 * np.array([[np.cos(turn), -np.sin(turn)], [np.sin(turn), np.cos(turn)]])
    landmarks = want @ rot.T + (300.0, 200.0)
    photo = np.random.default_rng(0).integers(0, 256, (600, 700, 3), dtype=np.uint8)
    for frame in (FFHQ_FRAME, GPEN_FRAME):
        _, affines = align.align_faces(photo, landmarks[None], 512, frame)
        placed = align.transform_points(affines[0], landmarks)
        err = np.abs(placed - align.face_template(512, frame)).max()
        assert (err < 1e-3) == (frame is FFHQ_FRAME), err  # GPEN's template is another shape


def _facexlib_square_mask(photo_hw: tuple[int, int], inverse: np.ndarray, size: int) -> np.ndarray:
    """FaceRestoreHelper.paste_faces_to_input_image's mask without a parser (upscale 1), written
    out as it computes it."""
    h, w = photo_hw
    inv_mask = cv2.warpAffine(np.ones((size, size), np.float32), inverse, (w, h))
    eroded = cv2.erode(inv_mask, np.ones((2, 2), np.uint8))
    w_edge = int(np.sum(eroded) ** 0.5) // 20
    centre = cv2.erode(eroded, np.ones((w_edge * 2, w_edge * 2), np.uint8))
    result: np.ndarray = cv2.GaussianBlur(centre, (w_edge * 2 + 1, w_edge * 2 + 1), 0)
    return result


def test_square_mask_is_facexlibs_for_a_face_pasted_at_its_own_size() -> None:
    size, offset = 512, (200, 150)
    inverse = np.array([[1.0, 0.0, offset[0]], [0.0, 1.0, offset[1]]])
    want = _facexlib_square_mask((900, 1000), inverse, size)
    got = np.zeros_like(want)
    got[offset[1] : offset[1] + size, offset[0] : offset[0] + size] = paste.square_mask(size)
    # The same numbers inside the crop; on its outermost pixels and the one beyond them facexlib
    # leaves its Gaussian's last taps (under 1e-3), which are zero here.
    inner = np.zeros_like(want, bool)
    inner[offset[1] + 1 : offset[1] + size - 1, offset[0] + 1 : offset[0] + size - 1] = True
    assert np.abs(got - want)[inner].max() < 1e-5
    assert np.abs(got - want).max() < 1e-3
    mask = paste.square_mask(size)
    assert mask[0].max() == 0 and mask[:, -1].max() == 0  # nothing at the crop's edge
    assert mask[60:-60, 60:-60].min() == pytest.approx(1.0)
    assert paste.plain_mask(size, FFHQ_FRAME.mask) is not paste.plain_mask(size, GPEN_FRAME.mask)


def test_parse_mask_softening_follows_each_familys_upstream() -> None:
    """FFHQ's frame: facexlib's blur (101 px kernel, sigma 11, twice) and then its 10 px border;
    GPEN's stays upstream GPEN's (26 px border first, sigma 4)."""
    raw = np.zeros((512, 512), np.float32)
    raw[120:400, 140:380] = 1.0
    raw[5:60, 200:300] = 1.0  # a region reaching the border
    want = cv2.GaussianBlur(raw * 255.0, (101, 101), 11)
    want = cv2.GaussianBlur(want, (101, 101), 11)
    want[:10], want[-10:], want[:, :10], want[:, -10:] = 0, 0, 0, 0
    got = paste.soften_parse_mask(raw, FFHQ_FRAME.mask)
    assert np.abs(got - want / 255.0).max() < 1e-3
    gpen = paste.soften_parse_mask(raw, GPEN_FRAME.mask)
    assert np.array_equal(gpen, paste.soften_parse_mask(raw))  # GPEN's is the default
    assert gpen[:26].max() < got[:26].max()  # GPEN zeroes its wider border before blurring


def test_each_frame_keeps_its_own_parse_classes() -> None:
    """facexlib's mask leaves out the neck and necklace too; GPEN's keeps them."""
    torch.manual_seed(0)
    gpen = build_gpen(GPENConfig(**TINY_GPEN))
    crops = np.random.default_rng(0).integers(0, 256, (1, 64, 64, 3), dtype=np.uint8)
    kept = {}
    for frame in (GPEN_FRAME, FFHQ_FRAME):
        enhancer = FaceEnhancer(runner(gpen, PLACE), PLACE, 2, parser=LabelMapParser(), frame=frame)
        _, masks = enhancer.enhance(crops)
        assert masks is not None
        labels = LabelMapParser()(torch.zeros(1, 3, 64, 64))[0][0].argmax(0).numpy()
        kept[frame.name] = {int(c) for c in np.unique(labels) if masks[0][labels == c].mean() > 0.5}
    assert kept["GPEN"] - kept["FFHQ"] == {16, 17}  # necklace and neck
    assert not kept["FFHQ"] & set(FFHQ_FRAME.mask.not_face)


class RecordingModel:
    """A face model that gives its input back and records the fidelity weights it was given."""

    size = 32
    network = torch.nn.Identity()

    def __init__(self) -> None:
        self.weights: list[torch.Tensor | None] = []

    def autocast(self) -> object:
        import contextlib

        return contextlib.nullcontext()

    def __call__(self, faces: torch.Tensor, /, fidelity: torch.Tensor | None = None) -> torch.Tensor:
        self.weights.append(fidelity)
        return faces.clone()


@pytest.mark.parametrize("frame", [GPEN_FRAME, FFHQ_FRAME])
def test_a_model_that_gives_its_input_back_leaves_the_crops_as_they_were(frame: FaceFrame) -> None:
    crops = np.random.default_rng(1).integers(0, 256, (3, 32, 32, 3), dtype=np.uint8)
    model = RecordingModel()
    out, _ = FaceEnhancer(model, PLACE, 2, frame=frame).enhance(crops)  # type: ignore[arg-type]
    assert np.array_equal(out, crops)
    assert model.weights == [None, None]  # neither family takes a fidelity weight


def test_each_face_gets_its_own_fidelity_and_others_the_default() -> None:
    crops = np.zeros((3, 32, 32, 3), np.uint8)
    model = RecordingModel()
    enhancer = FaceEnhancer(model, PLACE, 2, frame=FFHQ_FRAME, fidelity=0.5)  # type: ignore[arg-type]
    enhancer.enhance(crops, fidelities=np.array([0.0, 0.7, 1.0], np.float32))
    enhancer.enhance(crops[:1])
    got = [w.tolist() for w in model.weights if w is not None]
    assert got == [[0.0, pytest.approx(0.7)], [1.0], [0.5]]


def test_restore_fidelity_is_a_codeformer_setting_an_inbox_may_set(tmp_path: Path) -> None:
    cfg = config.Config()
    assert cfg.restore.fidelity == 0.5
    cfg.restore.model = "CodeFormer"
    cfg.restore.fidelity = 0.7
    config.validate(cfg)
    cfg.restore.fidelity = 1.2
    with pytest.raises(ConfigError, match=r"restore.fidelity: must be between 0 .* and 1"):
        config.validate(cfg)
    cfg.restore.model, cfg.restore.fidelity = "GPEN-BFR-512", 0.7
    with pytest.raises(
        ConfigError, match=r"restore.fidelity: is a weight of CodeFormer only, .* GPEN-BFR-512"
    ):
        config.validate(cfg)
    # An inbox of its own model and weight beside GPEN for the others.
    cfg.restore.fidelity = 0.5
    cfg.watch.inboxes = [
        config.InboxConfig(tmp_path / "a"),
        config.InboxConfig(tmp_path / "b", restore={"model": "CodeFormer", "fidelity": 0.2}),
    ]
    config.validate(cfg)
    cfg.watch.inboxes[0].restore = {"fidelity": 0.9}
    with pytest.raises(ConfigError, match=r"watch.inboxes\[0\].*restore.fidelity: is a weight of CodeFormer"):
        config.validate(cfg)


def test_a_family_file_of_the_wrong_layout_is_refused_naming_the_key(tmp_path: Path) -> None:
    from gpen_watch.restore.engines.codeformer_family import load_codeformer
    from gpen_watch.restore.engines.gfpgan_family import load_gfpgan
    from gpen_watch.restore.nets.gfpgan_model import GFPGANConfig, gfpgan_state_dict_shapes

    path = tmp_path / "GFPGANv1.4.pth"
    small = GFPGANConfig(size=32, style_dim=32, n_mlp=2, channel_multiplier=1, narrow=1 / 16)
    torch.save({"params_ema": {k: torch.zeros(s) for k, s in gfpgan_state_dict_shapes(small).items()}}, path)
    with pytest.raises(ModelError, match=r"GFPGANv1\.4\.pth: does not match the GFPGAN architecture: "):
        load_gfpgan(path, "GFPGAN-v1.4")
    with pytest.raises(ModelError, match=r"does not match the CodeFormer architecture: missing key"):
        load_codeformer(path, "CodeFormer")
    with pytest.raises(ModelError, match="GPEN-BFR-512 is a gpen model, not a GFPGAN model"):
        family_impl(registry.face_family("GFPGAN-v1.4")).weights_file("GPEN-BFR-512", tmp_path, False)
