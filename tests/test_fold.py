"""BatchNorm folded into the convolutions at load time: the same function, fewer passes."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import TINY_GPEN
from torch import nn

from gpen_watch.restore.engines.gpen_family import runner
from gpen_watch.restore.nets.fold import fold_batchnorm
from gpen_watch.restore.nets.gpen_model import GPENConfig, build_gpen
from gpen_watch.restore.nets.parsenet import ParseNet
from gpen_watch.restore.nets.retinaface import RetinaFace, build_retinaface
from gpen_watch.restore.runtime.device import placement
from gpen_watch.restore.stages.enhance import FaceEnhancer


def _with_random_statistics(model: nn.Module) -> nn.Module:
    """Fresh BatchNorms are the identity in eval mode; give them statistics worth folding."""
    with torch.no_grad():
        for bn in model.modules():
            if isinstance(bn, nn.BatchNorm2d):
                assert bn.running_mean is not None
                assert bn.running_var is not None
                bn.running_mean.uniform_(-0.3, 0.3)
                bn.running_var.uniform_(0.5, 2.0)
                bn.weight.uniform_(0.5, 1.5)
                bn.bias.uniform_(-0.2, 0.2)
    return model.eval()


def _batchnorms(model: nn.Module) -> int:
    return sum(isinstance(m, nn.BatchNorm2d) for m in model.modules())


def _parsenet() -> nn.Module:
    torch.manual_seed(0)
    # 64 px: every kind of layer the 512 px network has, at a quarter of the cost of 128 px.
    return _with_random_statistics(ParseNet(in_size=64, out_size=64))


def _retinaface(arch: str) -> RetinaFace:
    torch.manual_seed(0)
    net = build_retinaface(arch)
    _with_random_statistics(net)
    return net


@pytest.mark.parametrize(
    ("build", "shape"),
    [
        (_parsenet, (2, 3, 64, 64)),
        pytest.param(lambda: _retinaface("resnet50"), (1, 3, 160, 128), marks=pytest.mark.slow),
        (lambda: _retinaface("mobile0.25"), (1, 3, 96, 160)),
    ],
    ids=["parsenet", "retinaface-r50", "retinaface-mobile"],
)
def test_folding_removes_every_batchnorm_and_keeps_the_output(build, shape) -> None:  # type: ignore[no-untyped-def]
    model = build()
    before = _batchnorms(model)
    reference = copy.deepcopy(model)
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(1))
    assert fold_batchnorm(model) == before > 0
    assert _batchnorms(model) == 0
    with torch.inference_mode():
        for got, want in zip(model(x), reference(x)):
            assert torch.allclose(got, want, rtol=0, atol=1e-4), float((got - want).abs().max())


def test_folding_refuses_a_model_in_training_mode() -> None:
    with pytest.raises(ValueError, match="eval mode"):
        fold_batchnorm(_parsenet().train())


def test_parser_is_folded_and_channels_last_when_loaded() -> None:
    gpen = build_gpen(GPENConfig(**TINY_GPEN))
    enhancer = FaceEnhancer(
        runner(gpen, placement("cpu", "fp32", False)), placement("cpu", "fp32", False), 1, parser=_parsenet()
    )
    assert enhancer.parser is not None
    assert _batchnorms(enhancer.parser) == 0
    conv = next(m for m in enhancer.parser.modules() if isinstance(m, nn.Conv2d) and m.kernel_size == (3, 3))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)


def test_prepared_detector_finds_what_the_plain_one_finds_on_the_engines_input() -> None:
    """The engine's detector input is a permuted (channels_last) view of the uint8 photo."""
    import numpy as np

    from gpen_watch.restore.nets.fold import prepare_detector

    plain = _retinaface("resnet50")
    ready = prepare_detector(copy.deepcopy(plain), torch.device("cpu"))
    assert _batchnorms(ready) == 0
    photo = np.random.default_rng(0).integers(0, 256, (1, 96, 128, 3), dtype=np.uint8)
    x = torch.from_numpy(photo).permute(0, 3, 1, 2).float() - torch.tensor([104.0, 117.0, 123.0]).view(
        1, 3, 1, 1
    )
    assert x.is_contiguous(memory_format=torch.channels_last)
    with torch.inference_mode():
        for got, want in zip(ready(x), plain(x)):
            scale = float(want.abs().max()) or 1.0
            assert float((got - want).abs().max()) <= 1e-4 * scale  # the bar for a load-time change
