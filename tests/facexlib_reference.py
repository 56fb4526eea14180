"""facexlib's FaceRestoreHelper as a reference pipeline (what GFPGAN's and CodeFormer's own
inference scripts align and paste back with), built without its detector and parser downloads:
the tests hand it the landmarks and, where it parses, the parser."""

from __future__ import annotations

from typing import Any

import pytest
from torch import nn


def restore_helper(face_size: int = 512, parser: nn.Module | None = None) -> Any:
    """A ``FaceRestoreHelper(1, face_size)`` whose detector is never made (``all_landmarks_5`` is
    set by the caller) and whose parser is ``parser`` (``use_parse`` when given); a skip where
    facexlib cannot be imported."""
    try:
        import facexlib.utils.face_restoration_helper as frh
    except Exception as exc:  # noqa: BLE001 - torchvision's CUDA build beside a CPU torch raises RuntimeError
        pytest.skip(f"facexlib, the reference, cannot be imported here: {type(exc).__name__}: {exc}")
    made = {"init_detection_model": frh.init_detection_model, "init_parsing_model": frh.init_parsing_model}
    try:
        frh.init_detection_model = lambda *args, **kwargs: None
        frh.init_parsing_model = lambda *args, **kwargs: parser
        helper = frh.FaceRestoreHelper(1, face_size=face_size, use_parse=parser is not None, device="cpu")
    finally:
        for name, fn in made.items():
            setattr(frh, name, fn)
    return helper


def reference_restore(photo_bgr: Any, landmarks: Any, network: Any) -> Any:
    """The photo restored as GFPGAN's and CodeFormer's inference scripts restore it: facexlib's
    alignment to the FFHQ template (``estimateAffinePartial2D`` with LMEDS, bilinear, grey border),
    each crop through ``network`` ((1, 3, 512, 512) RGB in [-1, 1] -> the same), clamped and
    rounded as their ``tensor2img``, and pasted back one face after another through the square
    mask. ``landmarks``: (F, 5, 2) in the photo. Returns (photo, helper) for its crops and affines."""
    import numpy as np
    import torch

    helper = restore_helper(512)
    helper.read_image(photo_bgr)
    helper.all_landmarks_5 = [np.asarray(points, np.float64) for points in landmarks]
    helper.align_warp_face()
    for crop in helper.cropped_faces:
        x = torch.from_numpy(np.ascontiguousarray(crop[:, :, ::-1]).astype(np.float32) / 255.0)
        x = (x.permute(2, 0, 1)[None] - 0.5) / 0.5
        with torch.inference_mode():
            y = network(x)[0].clamp(-1, 1)
        face = ((y + 1) / 2 * 255.0).round().permute(1, 2, 0).numpy()[:, :, ::-1]
        helper.add_restored_face(face.astype(np.uint8))
    helper.get_inverse_affine()
    return helper.paste_faces_to_input_image(), helper
