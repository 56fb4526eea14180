"""The models gpen-watch knows, grouped and looked up: the face model families restore.model may
name, the detectors, parser, identity check and upscalers, and the lookups by name and file name.
The files themselves (``MODELS``) are listed in ``catalog.known_models``.

Kept free of torch so the CLI and the daemon's parent process can list models cheaply. Everything here
is immutable; lookups are pure functions over the ``MODELS`` tuple.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePath
from types import MappingProxyType
from typing import Literal

from gpen_watch.base.errors import ModelError
from gpen_watch.catalog import checkpoint_keys
from gpen_watch.catalog.face_frames import FFHQ_FRAME, GPEN_FRAME, FaceFrame
from gpen_watch.catalog.known_models import MODELS
from gpen_watch.catalog.model_spec import ModelKind, ModelSpec

# restore.detector (config) -> registry name.
DETECTOR_CONFIG_NAMES = MappingProxyType(
    {
        "retinaface_resnet50": "RetinaFace-R50",
        "retinaface_mobile0.25": "RetinaFace-MobileNet0.25",
    }
)

PARSER_NAME = "ParseNet"
# The identity check's two files: the descriptor network, the landmark predictor.
IDENTITY_NAMES = ("dlib-face-recognition", "dlib-landmarks-5")


@dataclass(frozen=True)
class FaceFamily:
    """A kind of face-restoration network that restore.model may name: its checkpoints are the
    ``MODELS`` of kind ``kind``, and ``impl`` ("module:attribute", imported only where a model is
    loaded) names its ``restore.runtime.face_model.FaceFamilyImpl``: how to build, check and load one, and
    the ``FaceModel`` the enhancer runs. Adding a family is its module plus one entry here (and
    its checkpoints' ``ModelSpec``s)."""

    kind: ModelKind
    label: str  # for messages: "a GPEN model name"
    impl: str
    # Its alignment template, input scale and paste-back mask (``face_frames``).
    frame: FaceFrame
    # Its networks take a fidelity weight per face (restore.fidelity); the setting is refused
    # for the other families.
    fidelity: bool = False
    # Keys every checkpoint of the family holds (inside its params_ema or other container), by
    # which a file given as restore.model is recognised (``file_family``).
    marks: tuple[str, ...] = ()


FACE_FAMILIES: tuple[FaceFamily, ...] = (
    FaceFamily(
        "gpen",
        "GPEN",
        "gpen_watch.restore.engines.gpen_family:GPEN_FAMILY",
        GPEN_FRAME,
        marks=("generator.input.input", "final_linear.0.weight"),
    ),
    FaceFamily(
        "gfpgan",
        "GFPGAN",
        "gpen_watch.restore.engines.gfpgan_family:GFPGAN_FAMILY",
        FFHQ_FRAME,
        # The clean architecture of v1.3 and v1.4 (v1's first layer is a sequence: conv_body_first.0).
        marks=("conv_body_first.weight", "stylegan_decoder.constant_input.weight"),
    ),
    FaceFamily(
        "codeformer",
        "CodeFormer",
        "gpen_watch.restore.engines.codeformer_family:CODEFORMER_FAMILY",
        FFHQ_FRAME,
        fidelity=True,
        marks=("position_emb", "idx_pred_layer.1.weight"),
    ),
)
# The family a checkpoint file named by its path (restore.model = "my-model.pth") is read as when
# its keys show none (or it cannot be read without torch): its loader then says what it holds.
FILE_FAMILY = FACE_FAMILIES[0]

# Registry name -> generator shape, for every GPEN checkpoint gpen-watch knows.
GPEN_CONFIGS = MappingProxyType({spec.name: spec.gpen for spec in MODELS if spec.gpen is not None})
# What restore.model may name (besides a checkpoint file): the checkpoints of every face family.
FACE_MODEL_NAMES = tuple(spec.name for spec in MODELS if spec.kind in {f.kind for f in FACE_FAMILIES})
# What restore.detector may be.
DETECTOR_NAMES = tuple(DETECTOR_CONFIG_NAMES)
# Registry name -> upscaler shape; what restore.upscale_model may name (besides a .pth file).
UPSCALER_CONFIGS = MappingProxyType({spec.name: spec.rrdb for spec in MODELS if spec.rrdb is not None})
UPSCALER_NAMES = tuple(UPSCALER_CONFIGS)
# restore.upscale -> the upscaler used when restore.upscale_model is unset: upstream GPEN's.
DEFAULT_UPSCALERS = MappingProxyType({2: "RealESRNet-x2", 4: "RealESRNet-x4"})


def face_family(model: str) -> FaceFamily:
    """The family restore.model = ``model`` belongs to: a registry name's, or a checkpoint file's
    (``file_family``)."""
    for spec in MODELS:
        if spec.name.lower() == model.lower():
            for family in FACE_FAMILIES:
                if family.kind == spec.kind:
                    return family
            raise ModelError(f"{spec.name} is a {spec.kind} model, not a face restoration model")
    return file_family(Path(model).expanduser())


def file_family(path: Path) -> FaceFamily:
    """The family of the checkpoint file ``path``, recognised by its keys (``FaceFamily.marks``,
    read without torch: ``checkpoint_keys``); ``FILE_FAMILY`` where they show none or cannot be
    read here, so that its loader says what the file is."""
    found = checkpoint_keys.read_state_keys(path)
    family = family_of_keys(found.keys) if found is not None else None
    return family or FILE_FAMILY


def family_of_keys(keys: Iterable[str]) -> FaceFamily | None:
    """The one family whose marks are all among ``keys``; None for none (or, were marks ever to
    overlap, more than one)."""
    held = set(keys)
    found = [family for family in FACE_FAMILIES if family.marks and held.issuperset(family.marks)]
    return found[0] if len(found) == 1 else None


def has_fidelity(model: str) -> bool:
    """Whether restore.model = ``model``'s networks take a fidelity weight (restore.fidelity)."""
    try:
        return face_family(model).fidelity
    except ModelError:
        return False


def fidelity_families() -> tuple[str, ...]:
    """The labels of the families restore.fidelity applies to: ("CodeFormer",)."""
    return tuple(f.label for f in FACE_FAMILIES if f.fidelity)


def model_label(model: str) -> str:
    """restore.model as the log and status name it: a registry name, or a file's name."""
    return model if model in FACE_MODEL_NAMES else PurePath(model).name


def choices_text(kind: Literal["face", "detector"]) -> str:
    """The names restore.model or restore.detector takes, each with how it differs, for help text:
    "GPEN-BFR-512 (512 px faces), GPEN-BFR-256 (...)"."""
    if kind == "face":
        named = [(name, get_spec(name)) for name in FACE_MODEL_NAMES]
    else:
        named = [(name, get_spec(name)) for name in DETECTOR_NAMES]
    return ", ".join(f"{name} ({spec.choice_note})" if spec.choice_note else name for name, spec in named)


def all_specs() -> tuple[ModelSpec, ...]:
    return MODELS


def model_names() -> tuple[str, ...]:
    return tuple(spec.name for spec in MODELS)


def get_spec(name: str) -> ModelSpec:
    """Look a model up by registry name (any case) or by its restore.detector config name."""
    name = DETECTOR_CONFIG_NAMES.get(name, name)
    for spec in MODELS:
        if spec.name.lower() == name.lower():
            return spec
    raise ModelError(f"unknown model {name!r}; known models: {', '.join(model_names())}")


def detector_spec(config_name: str) -> ModelSpec:
    """The spec for a restore.detector value such as "retinaface_resnet50"."""
    if config_name not in DETECTOR_CONFIG_NAMES:
        raise ModelError(f"unknown detector {config_name!r}; use one of {', '.join(DETECTOR_CONFIG_NAMES)}")
    return get_spec(DETECTOR_CONFIG_NAMES[config_name])


def parser_spec() -> ModelSpec:
    return get_spec(PARSER_NAME)


def identity_specs() -> tuple[ModelSpec, ModelSpec]:
    """The identity check's files: the descriptor network's, then the landmark predictor's."""
    return get_spec(IDENTITY_NAMES[0]), get_spec(IDENTITY_NAMES[1])


def upscaler_spec(factor: int, name: str = "") -> ModelSpec:
    """The upscaler restore.upscale = ``factor`` runs: ``name`` (restore.upscale_model), or by default
    upstream GPEN's RealESRNet of that factor."""
    if factor not in DEFAULT_UPSCALERS:
        raise ModelError(f"no upscaler for x{factor}; use one of {', '.join(map(str, DEFAULT_UPSCALERS))}")
    spec = get_spec(name or DEFAULT_UPSCALERS[factor])
    if spec.rrdb is None:
        raise ModelError(f"{spec.name} is a {spec.kind} model, not an upscaler")
    if spec.rrdb.scale != factor:
        raise ModelError(f"{spec.name} upscales x{spec.rrdb.scale}, but restore.upscale is {factor}")
    return spec


def spec_for_filename(filename: str) -> ModelSpec | None:
    """The spec a file on disk belongs to, judged by its name (None for custom files)."""
    for spec in MODELS:
        if filename in spec.filenames:
            return spec
    return None
