"""Real model architectures with random weights, saved where the model store looks for them.

Real weights cannot be downloaded everywhere (and are not needed: the compute is the same). Files
are written the way the released ones are stored and then loaded through the same store code path
users take, so loading costs count too.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gpen_watch.catalog.gpen_config import GPENConfig

# A GPEN small enough for the benchmark's own test: size 64, 1/16 of the channels.
TINY_GPEN = GPENConfig(size=64, style_dim=64, n_mlp=2, channel_multiplier=1, narrow=0.0625)


@dataclass(frozen=True)
class BenchModels:
    model_dir: Path
    gpen: str  # registry name ("GPEN-BFR-256") or a .pth path
    detector: str  # restore.detector value
    use_parse: bool
    size: int
    # Face models of other families saved beside it (--model GFPGAN-v1.4,CodeFormer), by name.
    others: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "model_dir": str(self.model_dir), "others": list(self.others)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchModels:
        return cls(**{**data, "model_dir": Path(data["model_dir"]), "others": tuple(data.get("others", ()))})


def write_models(
    folder: Path,
    size: int = 256,
    parse: bool = False,
    tiny: bool = False,
    real_detector: Path | None = None,
    others: tuple[str, ...] = (),
) -> BenchModels:
    """Save GPEN-BFR-<size> (or a tiny GPEN), RetinaFace-R50 (tiny: MobileNet) and optionally ParseNet.

    ``real_detector``: trained RetinaFace-MobileNet0.25 weights, installed as the store's MobileNet
    file instead of a random R50. ``others``: face models of any family by registry name, each
    saved as its release stores it."""
    import torch

    from gpen_watch.catalog import registry
    from gpen_watch.restore.nets.gpen_model import GPEN_CONFIGS, build_gpen

    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    for name in others:
        save_face_model(folder, name)
    if tiny:
        gpen_path = folder / "bench-tiny-gpen-64.pth"
        torch.save(build_gpen(TINY_GPEN).state_dict(), gpen_path)
        gpen, size = str(gpen_path), TINY_GPEN.size
    else:
        gpen = f"GPEN-BFR-{size}"
        torch.save(build_gpen(GPEN_CONFIGS[gpen]).state_dict(), folder / registry.get_spec(gpen).filename)
    detector = "retinaface_mobile0.25" if tiny or real_detector else "retinaface_resnet50"
    spec = registry.detector_spec(detector)
    if real_detector is not None:
        import shutil

        shutil.copyfile(real_detector, folder / spec.filename)
        return _with_parser(folder, gpen, detector, parse, size, others)
    from gpen_watch.restore.nets.retinaface import build_retinaface

    det = build_retinaface(spec.arch)
    # The released files carry DataParallel's "module." prefix; store them the same way.
    torch.save({f"module.{k}": v for k, v in det.state_dict().items()}, folder / spec.filename)
    return _with_parser(folder, gpen, detector, parse, size, others)


def save_face_model(folder: Path, name: str) -> Path:
    """Registry face model ``name``'s network with random weights, saved under its file name as
    its release stores it: GPEN's bare state dict, GFPGAN's and CodeFormer's under ``params_ema``."""
    import torch

    from gpen_watch.catalog import registry
    from gpen_watch.restore.engines.verify import build_model

    spec = registry.get_spec(name)
    state = build_model(spec).state_dict()
    path = folder / spec.filename
    torch.save(state if spec.kind == "gpen" else {"params_ema": state}, path)
    return path


def _with_parser(
    folder: Path, gpen: str, detector: str, parse: bool, size: int, others: tuple[str, ...] = ()
) -> BenchModels:
    if parse:
        import torch

        from gpen_watch.catalog import registry
        from gpen_watch.restore.nets.parsenet import ParseNet

        torch.save(
            ParseNet().state_dict(),
            folder / registry.parser_spec().filename,
        )
    return BenchModels(folder, gpen, detector, parse, size, tuple(others))
