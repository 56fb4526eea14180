"""A user's own checkpoint file given as restore.model is read as the family its keys show (GPEN,
GFPGAN v1.3/v1.4, CodeFormer; bare, under params_ema, params or g_ema, with DataParallel's
prefix), found without torch in the service's parent; a file of none of them is refused with a
sentence naming the file, what it holds and what restore.model takes."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from conftest import TINY_GPEN, heavy_modules_after

from gpen_watch.base.errors import ModelError
from gpen_watch.catalog import registry
from gpen_watch.catalog.checkpoint_keys import read_state_keys
from gpen_watch.restore.nets.codeformer_model import CodeFormer, build_codeformer
from gpen_watch.restore.nets.gfpgan_model import GFPGAN, GFPGANConfig, build_gfpgan
from gpen_watch.restore.nets.gpen_model import GPEN, GPENConfig, build_gpen
from gpen_watch.restore.runtime.device import placement
from gpen_watch.restore.runtime.face_model import family_impl, load_face_model

PLACE = placement("cpu", "fp32", False)


def _keys_only(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """``model``'s key names, each with a one-value tensor: all the family check reads."""
    return dict.fromkeys(model.state_dict(), torch.zeros(1))


def _released(make: Callable[[], torch.nn.Module]) -> torch.nn.Module:
    """``make()`` on the meta device: the layout without memory."""
    with torch.device("meta"):
        return make()


LAYOUTS = {
    "GPEN": lambda: build_gpen(GPENConfig(**TINY_GPEN)),
    "GFPGAN": lambda: _released(lambda: build_gfpgan(GFPGANConfig())),
    "CodeFormer": lambda: _released(build_codeformer),
}


@pytest.mark.parametrize("container", [None, "params_ema", "params", "g_ema"])
@pytest.mark.parametrize("label", list(LAYOUTS))
def test_a_file_is_read_as_the_family_its_keys_show(
    tmp_path: Path, label: str, container: str | None
) -> None:
    state = _keys_only(LAYOUTS[label]())
    if container == "g_ema":
        state = {f"module.{k}": v for k, v in state.items()}  # saved from DataParallel
    path = tmp_path / "mine.pth"
    torch.save(state if container is None else {container: state, "iter": 5}, path)
    family = registry.face_family(str(path))
    assert family.label == label
    assert registry.has_fidelity(str(path)) is (label == "CodeFormer")
    assert registry.model_label(str(path)) == "mine.pth"


def test_the_old_torch_format_is_read_too(tmp_path: Path) -> None:
    path = tmp_path / "old.pth"
    torch.save(
        {"params_ema": _keys_only(LAYOUTS["CodeFormer"]())}, path, _use_new_zipfile_serialization=False
    )
    assert registry.face_family(str(path)).label == "CodeFormer"


def test_the_parent_process_finds_the_family_without_torch(tmp_path: Path) -> None:
    path = tmp_path / "codeformer-mine.pth"
    torch.save({"params_ema": _keys_only(LAYOUTS["CodeFormer"]())}, path)
    code = (
        "from gpen_watch.catalog import registry\n"
        f"assert registry.face_family({str(path)!r}).label == 'CodeFormer'\n"
        f"assert registry.has_fidelity({str(path)!r})"
    )
    assert heavy_modules_after(code, ("torch", "numpy", "cv2")) == []


@pytest.mark.parametrize(
    ("label", "make", "network"),
    [("GFPGAN", lambda: build_gfpgan(GFPGANConfig()), GFPGAN), ("CodeFormer", build_codeformer, CodeFormer)],
)
def test_a_users_own_released_file_loads_as_its_family(
    tmp_path: Path, label: str, make: Callable[[], torch.nn.Module], network: type
) -> None:
    """The released shapes saved as the releases store them, under a name of the user's."""
    model = _released(make).to_empty(device="cpu")  # the values do not matter, only the layout
    path = tmp_path / f"my-{label.lower()}-finetune.pth"
    torch.save({"params_ema": model.state_dict()}, path)
    del model
    face = load_face_model(str(path), None, PLACE, download=False)
    assert isinstance(face.network, network), type(face.network)
    assert face.size == 512
    del face
    # As the ONNX engine has it to export.
    assert isinstance(family_impl(registry.face_family(str(path))).network(str(path), path), network)


def test_a_users_own_gpen_file_still_loads_as_gpen(tmp_path: Path) -> None:
    path = tmp_path / "mine.pth"
    torch.save(build_gpen(GPENConfig(**TINY_GPEN)).state_dict(), path)
    face = load_face_model(str(path), None, PLACE, download=False)
    assert isinstance(face.network, GPEN)
    assert face.size == TINY_GPEN["size"]


@pytest.mark.parametrize(
    ("keys", "looks"),
    [
        (["conv_first.weight", "body.0.rdb1.conv1.weight", "conv_last.weight"], "an RRDBNet (ESRGAN)"),
        (["conv_body_first.0.weight", "stylegan_decoder.constant_input.weight"], "GFPGAN v1, the first"),
        (["encoder.conv_in.weight", "decoder.conv_out.weight", "quantize.embedding.weight"], None),
    ],
)
def test_a_file_of_no_family_is_refused_with_what_it_holds(
    tmp_path: Path, keys: list[str], looks: str | None
) -> None:
    path = tmp_path / "downloaded.pth"
    torch.save({"params_ema": {k: torch.zeros(2, 2) for k in keys}}, path)
    assert registry.face_family(str(path)).label == "GPEN"  # the loader then says what it is
    with pytest.raises(ModelError) as caught:
        load_face_model(str(path), None, PLACE, download=False)
    text = str(caught.value)
    assert text.startswith(f"{path}: not a face restoration model gpen-watch can run: ")
    assert f"its {len(keys)} weights under 'params_ema' are {keys[0]}, {keys[1]}" in text
    assert (f"they look like {looks}" in text) if looks else "look like" not in text
    assert "GPEN, GFPGAN (v1.3, v1.4) or CodeFormer checkpoint file" in text
    assert "GFPGAN-v1.4" in text and "check that this is the file you meant" in text
    assert "Traceback" not in text


def test_a_pickle_that_would_run_code_is_not_run_and_not_read(tmp_path: Path) -> None:
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            import os

            return (os.system, (f"touch {marker}",))

    path = tmp_path / "hostile.pth"
    path.write_bytes(pickle.dumps({"params_ema": {"position_emb": Payload()}}))
    assert read_state_keys(path) is None
    assert registry.face_family(str(path)).label == "GPEN"
    with pytest.raises(ModelError, match="refused to load"):
        load_face_model(str(path), None, PLACE, download=False)
    assert not marker.exists()


def test_a_missing_file_is_left_to_the_loader_to_name(tmp_path: Path) -> None:
    missing = str(tmp_path / "nowhere.pth")
    assert registry.face_family(missing).label == "GPEN"
    assert registry.has_fidelity(missing) is False
    with pytest.raises(ModelError, match=r"nowhere\.pth"):
        load_face_model(missing, None, PLACE, download=False)


def test_restore_fidelity_is_taken_for_a_codeformer_file_and_refused_for_a_gfpgan_one(tmp_path: Path) -> None:
    from gpen_watch import config
    from gpen_watch.base.errors import ConfigError

    for label in ("CodeFormer", "GFPGAN"):
        torch.save({"params_ema": _keys_only(LAYOUTS[label]())}, tmp_path / f"{label}.pth")
    cfg = config.Config()
    cfg.restore.model, cfg.restore.fidelity = str(tmp_path / "CodeFormer.pth"), 0.7
    config.validate(cfg)
    cfg.restore.model = str(tmp_path / "GFPGAN.pth")
    with pytest.raises(ConfigError, match=r"restore.fidelity: is a weight of CodeFormer only"):
        config.validate(cfg)
