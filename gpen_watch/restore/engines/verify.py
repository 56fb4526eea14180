"""Loading weights files into ready models, treating every file as untrusted input.

A ``.pth`` file is a pickle, and an unrestricted unpickle can run arbitrary code. Files are therefore
read only with ``torch.load(..., weights_only=True)``, which accepts tensors and plain containers and
refuses everything else. The state dict must then match the architecture exactly (same keys, same
shapes) before any of it is copied in, so a wrong or damaged file fails loudly, naming the file and the
first key that differs, instead of silently producing garbage faces.

Imports torch: use it only in workers and the ``models`` CLI.
"""

from __future__ import annotations

import pickle
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import torch
from torch import Tensor, nn

from gpen_watch.base.errors import ModelError
from gpen_watch.catalog.checkpoint_keys import CONTAINER_KEYS, WRAPPER_PREFIX
from gpen_watch.catalog.model_spec import ModelSpec
from gpen_watch.catalog.registry import (
    FACE_FAMILIES,
    UPSCALER_NAMES,
    all_specs,
    face_family,
    get_spec,
    identity_specs,
    model_names,
    parser_spec,
    spec_for_filename,
    upscaler_spec,
)
from gpen_watch.modelstore.layout import compare_layout
from gpen_watch.modelstore.store import ensure_model
from gpen_watch.platform import program

if TYPE_CHECKING:
    from gpen_watch.restore.runtime.face_model import FaceFamilyImpl
from gpen_watch.restore.nets.face_descriptor import FaceDescriptorNet, read_descriptor_net
from gpen_watch.restore.nets.parsenet import ParseNet
from gpen_watch.restore.nets.retinaface import RetinaFace, build_retinaface
from gpen_watch.restore.nets.rrdbnet import RRDBNet, build_rrdbnet, infer_rrdb_config
from gpen_watch.restore.nets.shape_predictor import ShapePredictor, read_shape_predictor

M = TypeVar("M", bound=nn.Module)

# The registry kinds whose checkpoints are face models, built and loaded by their family.
FACE_KINDS = frozenset(f.kind for f in FACE_FAMILIES)

# Training frameworks wrap the weights (``checkpoint_keys.CONTAINER_KEYS``, which the family of a
# file given by its path is read from too): basicsr keeps both "params" and the better
# "params_ema", and upstream GPEN's training checkpoints hold {"g", "d", "g_ema", ...}, where
# "g_ema" is the generator its released files are. ModelScope's GPEN files are plain state dicts
# (its pipeline loads them strict, unwrapped), so they need none of this.
_CONTAINER_KEYS = CONTAINER_KEYS
_WRAPPER_PREFIX = WRAPPER_PREFIX


# --- reading a file -----------------------------------------------------------------------------


def load_checkpoint(path: Path, name: str | None = None) -> dict[str, Tensor]:
    """Read a weights file into a flat ``{key: tensor}`` dict on the CPU.

    ``name`` (a registry name) only improves the advice in error messages.
    """
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"{path}: no such file")
    try:
        # Checked apart from torch.load, which reports unreadable and damaged files alike.
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise ModelError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    advice = _refetch_advice(path, name)
    try:
        with warnings.catch_warnings():
            # torch warns about pickle protocols it "might not support"; the load below either
            # succeeds or raises, and the warning would only confuse users.
            warnings.simplefilter("ignore")
            obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise ModelError(
            f"{path}: refused to load: not a plain weights file ({_unpickler_reason(exc)}). gpen-watch "
            "never unpickles Python objects from weights files, because that can run code. The file is "
            f"corrupt, not a model, or from an untrusted source; {advice}"
        ) from None
    except MemoryError:
        raise
    except Exception as exc:
        detail = f"{type(exc).__name__}: {exc}".strip().rstrip(":")
        raise ModelError(f"{path}: corrupt or truncated weights file ({detail}); {advice}") from exc
    state = _unwrap(obj, path)
    return _strip_prefix(state, path)


def _unwrap(obj: Any, path: Path) -> dict[str, Tensor]:
    if not isinstance(obj, Mapping):
        raise ModelError(f"{path}: not a weights file: holds a {type(obj).__name__}, not a state dict")
    for key in _CONTAINER_KEYS:
        inner = obj.get(key)
        if isinstance(inner, Mapping):
            obj = inner
            break
    state: dict[str, Tensor] = {}
    for key, value in obj.items():
        if not isinstance(key, str) or not isinstance(value, Tensor):
            raise ModelError(
                f"{path}: not a plain state dict: entry {key!r} is a {type(value).__name__}, not a tensor"
            )
        state[key] = value
    if not state:
        raise ModelError(f"{path}: holds no weights (empty state dict)")
    return state


def _strip_prefix(state: dict[str, Tensor], path: Path) -> dict[str, Tensor]:
    out: dict[str, Tensor] = {}
    for key, value in state.items():
        short = key[len(_WRAPPER_PREFIX) :] if key.startswith(_WRAPPER_PREFIX) else key
        if short in out:
            raise ModelError(f"{path}: key {short!r} appears both with and without a 'module.' prefix")
        out[short] = value
    return out


def _unpickler_reason(exc: Exception) -> str:
    """The one useful line of torch's long weights-only error (which ends by suggesting the unsafe load)."""
    text = str(exc)
    marker = "WeightsUnpickler error:"
    if marker in text:
        rest = text.split(marker, 1)[1]
        for line in rest.splitlines():
            line = line.strip()
            if line:
                return line.split(" Please use", 1)[0].rstrip(".")
    return "unsupported content"


def _refetch_advice(path: Path, name: str | None) -> str:
    spec = get_spec(name) if name else spec_for_filename(path.name)
    if spec is None:
        return "delete it and get the file again from where it came from."
    return f"delete it and run `{program.command('models fetch ' + spec.name)}`."


# --- matching a model ---------------------------------------------------------------------------


def check_state_dict(model: nn.Module, state_dict: Mapping[str, Tensor], path: Path) -> None:
    """Require exactly the model's keys with exactly its shapes; name the first difference."""
    expected = model.state_dict()
    what = type(model).__name__
    diff = compare_layout(
        {k: tuple(v.shape) for k, v in expected.items()}, {k: tuple(v.shape) for k, v in state_dict.items()}
    )
    if not diff:
        return
    missing, unexpected, wrong_shape = diff.missing, diff.unexpected, diff.wrong_shape
    counts = f"{len(missing)} missing, {len(unexpected)} unexpected, {len(wrong_shape)} of the wrong shape"
    if missing:
        first = f"missing key {missing[0]!r}"
    elif wrong_shape:
        key = wrong_shape[0]
        first = (
            f"key {key!r} has shape {tuple(state_dict[key].shape)} in the file "
            f"but {tuple(expected[key].shape)} in the model"
        )
    else:
        first = f"unexpected key {unexpected[0]!r}"
    raise ModelError(
        f"{path}: does not match the {what} architecture: {first} ({counts}). "
        "Is it the right file for this model, and complete?"
    )


def load_weights(model: M, path: Path, name: str | None = None) -> M:
    """Load ``path`` into ``model`` after checking it matches; returns the model in eval mode."""
    state = load_checkpoint(path, name)
    check_state_dict(model, state, path)
    model.load_state_dict(state, strict=True)
    return model.eval()


def adopt_state(
    build: Callable[[], M], state: dict[str, Tensor], path: Path, device: str | torch.device = "cpu"
) -> M:
    """The network ``build`` makes, holding the checkpoint's tensors: built on the meta device and
    given them (no random init, and no second copy of several hundred MB of weights in memory),
    after checking the keys and shapes match; in eval mode on ``device``."""
    with torch.device("meta"):
        net = build()
    check_state_dict(net, state, path)
    # assign=True would also adopt the file's dtype; inference precision is chosen elsewhere (autocast).
    state = {k: v.float() if v.is_floating_point() else v for k, v in state.items()}
    net.load_state_dict(state, strict=True, assign=True)
    if any(t.is_meta for t in (*net.parameters(), *net.buffers())):
        # A tensor the state dict does not carry would be left without storage.
        raise RuntimeError(f"{type(net).__name__} has parameters or buffers outside its state dict")
    return net.to(device).eval()


def model_file(
    model: str | Path, kind: str, label: str, model_dir: Path | None, download: bool
) -> tuple[Path, ModelSpec | None]:
    """The weights file restore.model = ``model`` names: for a registry name of ``kind``, the
    store's (fetched when ``download``), with its entry; else ``model`` as a path, which must be
    a file. ``label`` ("GPEN") words the message for a name that is neither."""
    names = [spec.name for spec in all_specs() if spec.kind == kind]
    if isinstance(model, str) and model.lower() in (n.lower() for n in model_names()):
        spec = get_spec(model)
        if spec.kind != kind:
            raise ModelError(f"{spec.name} is a {spec.kind} model, not a {label} model")
        return ensure_model(spec, model_dir, download=download), spec
    path = Path(model).expanduser()
    if not path.is_file():
        raise ModelError(not_a_file(model, "--model, restore.model", names, f"a {label} model name"))
    return path, None


# --- builders -----------------------------------------------------------------------------------


def build_model(spec: ModelSpec, device: str | torch.device = "cpu") -> nn.Module:
    """``spec``'s architecture with random weights (nothing is downloaded)."""
    if spec.kind in FACE_KINDS:
        return _face_family(spec).build(spec, device)
    if spec.kind == "detector":
        return build_retinaface(spec.arch).to(device)
    if spec.kind == "parser":
        return ParseNet(in_size=512, out_size=512).to(device)
    if spec.kind == "upscaler" and spec.rrdb is not None:
        return build_rrdbnet(spec.rrdb).to(device)
    raise ModelError(f"model {spec.name}: unknown kind {spec.kind!r}")


def _face_family(spec: ModelSpec) -> FaceFamilyImpl:
    from gpen_watch.restore.runtime.face_model import family_impl

    return family_impl(face_family(spec.name))


def load_model_file(spec: ModelSpec, path: Path, device: str | torch.device = "cpu") -> nn.Module:
    """Build ``spec``'s architecture and load ``path`` into it (checked), in eval mode."""
    if spec.kind in FACE_KINDS:
        return _face_family(spec).load_file(spec, path, device)
    if spec.kind == "upscaler" and spec.rrdb is not None:
        return _rrdb_from_file(path, spec.rrdb.scale, spec.name, device)
    return load_weights(build_model(spec, device), path, spec.name)


def verify_file(spec: ModelSpec, path: Path) -> None:
    """Raise ModelError unless ``path`` loads cleanly into ``spec``'s architecture."""
    if spec.kind == "identity":
        read_identity_file(spec, path)
        return
    load_model_file(spec, path, "cpu")


def read_identity_file(spec: ModelSpec, path: Path) -> FaceDescriptorNet | ShapePredictor:
    """One of the identity check's files (``registry.identity_specs``), read by its own reader (dlib's
    format, not torch.load) and checked against what it must hold; on the CPU."""
    advice = f"delete it and run `{program.command('models fetch ' + spec.name)}`"
    if spec.name == identity_specs()[0].name:
        return read_descriptor_net(path, advice)
    return read_shape_predictor(path, advice)


def load_detector(
    name: str,
    model_dir: Path | None = None,
    device: str | torch.device = "cpu",
    download: bool = True,
) -> RetinaFace:
    """RetinaFace (``retinaface``) with checked weights. ``name``: registry or restore.detector name."""
    spec = get_spec(name)
    if spec.kind != "detector":
        raise ModelError(f"{spec.name} is a {spec.kind} model, not a face detector")
    path = ensure_model(spec, model_dir, download=download)
    return load_weights(build_retinaface(spec.arch).to(device), path, spec.name)


def load_parser(
    model_dir: Path | None = None,
    device: str | torch.device = "cpu",
    download: bool = True,
) -> nn.Module:
    """ParseNet (``parsenet``: 19-class face parsing, 512x512) with checked weights."""
    spec = parser_spec()
    path = ensure_model(spec, model_dir, download=download)
    return load_model_file(spec, path, device)


def load_upscaler(
    factor: int,
    model: str = "",
    model_dir: Path | None = None,
    device: str | torch.device = "cpu",
    download: bool = True,
) -> RRDBNet:
    """The background upscaler for restore.upscale = ``factor``, in eval mode.

    ``model`` (restore.upscale_model): empty for the default of that factor, a registry name
    ("RealESRGAN-x4plus"), or a path to an RRDBNet ``.pth`` file of that factor.
    """
    if model and model not in UPSCALER_NAMES:
        path = Path(model).expanduser()
        if not path.is_file():
            raise ModelError(
                not_a_file(
                    model, "--upscale-model, restore.upscale_model", UPSCALER_NAMES, "an upscaler name"
                )
            )
        return _rrdb_from_file(path, factor, None, device)
    spec = upscaler_spec(factor, model)
    path = ensure_model(spec, model_dir, download=download)
    return _rrdb_from_file(path, factor, spec.name, device)


def _rrdb_from_file(path: Path, factor: int, name: str | None, device: str | torch.device) -> RRDBNet:
    """Build the RRDBNet the file's keys and shapes describe (on the meta device, adopting its
    tensors) and check it upscales ``factor`` times.

    The width is read from the file, not fixed by the registry: upstream GPEN's code builds its
    RealESRNet files with 32 features, the Real-ESRGAN ones have 64, and either loads exactly.
    """
    state = load_checkpoint(path, name)
    try:
        cfg = infer_rrdb_config(state)
    except ValueError as exc:
        raise ModelError(
            f"{path}: not an RRDBNet upscaler checkpoint ({exc}); {_refetch_advice(path, name)}"
        ) from None
    if cfg.scale != factor:
        raise ModelError(
            f"{path}: an x{cfg.scale} upscaler, but restore.upscale is {factor}; set restore.upscale = "
            f"{cfg.scale} or choose an x{factor} model (restore.upscale_model)"
        )
    with torch.device("meta"):
        net = build_rrdbnet(cfg)
    check_state_dict(net, state, path)
    state = {k: v.float() if v.is_floating_point() else v for k, v in state.items()}
    net.load_state_dict(state, strict=True, assign=True)
    return net.to(device).eval()


def not_a_file(model: object, setting: str, names: Sequence[str], kind: str) -> str:
    """Why ``model`` names nothing: the user's own file that is not at its path (no download or
    cache folder would help it), or a name that is no model."""
    text = str(model)
    if "/" in text or "\\" in text or text.lower().endswith((".pth", ".pt")):
        return (
            f"{model}: no such file ({setting}); your own weights are read from that exact path: "
            f"check it, or give {kind} ({', '.join(names)})"
        )
    return f"{model}: neither {kind} ({', '.join(names)}) nor an existing weights file ({setting})"
