"""ParseNet's cheaper options: int8 (restore.parse_precision) and a 256 px pass for faces pasted
back small (restore.parse_small_below). The default path must stay what it was."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from conftest import TINY_GPEN
from test_enhance import LabelMapParser
from torch import nn

from gpen_watch.base.errors import ConfigError
from gpen_watch.config import Config, load
from gpen_watch.restore.engines.gpen_family import runner
from gpen_watch.restore.nets.fold import as_channels_last, prepare_conv_net
from gpen_watch.restore.nets.gpen_model import GPENConfig, build_gpen
from gpen_watch.restore.nets.parsenet import ParseNet
from gpen_watch.restore.nets.quant import calibration_images, int8_backend, quantize_parser
from gpen_watch.restore.runtime.device import placement
from gpen_watch.restore.runtime.formats import CPU_FLAGS_ENV
from gpen_watch.restore.stages import align
from gpen_watch.restore.stages.enhance import FaceEnhancer

needs_int8 = pytest.mark.skipif(int8_backend() is None, reason="this torch has no int8 CPU engine")


def _parsenet() -> nn.Module:
    """The real ParseNet (as the model store builds it) with random weights and BatchNorm
    statistics worth folding."""
    torch.manual_seed(0)
    net = ParseNet().eval()
    with torch.no_grad():
        for bn in net.modules():
            if isinstance(bn, nn.BatchNorm2d):
                assert bn.running_mean is not None
                assert bn.running_var is not None
                bn.running_mean.uniform_(-0.3, 0.3)
                bn.running_var.uniform_(0.5, 2.0)
    return net


def _int8_convs(model: nn.Module) -> int:
    from torch.ao.nn import quantized as nnq

    return sum(isinstance(m, (nnq.Conv2d,)) or type(m).__name__ == "ConvReLU2d" for m in model.modules())


@pytest.fixture(scope="module")
def parsers() -> tuple[nn.Module, nn.Module]:
    net = _parsenet()
    fp32 = prepare_conv_net(copy.deepcopy(net), torch.device("cpu"))
    return fp32, quantize_parser(prepare_conv_net(copy.deepcopy(net), torch.device("cpu"), rewrite=False))


@pytest.mark.slow
@needs_int8
def test_int8_parser_runs_int8_convolutions_and_stays_near_fp32(parsers: tuple[nn.Module, nn.Module]) -> None:
    fp32, int8 = parsers
    assert _int8_convs(int8) >= 40  # ParseNet's convolutions, not a float copy of it
    x = as_channels_last(torch.rand(1, 3, 128, 128, generator=torch.Generator().manual_seed(5)) * 2 - 1)
    with torch.inference_mode():
        want, got = fp32(x)[0], int8(x)[0]
    assert got.dtype == torch.float32
    assert got.shape == want.shape == (1, 19, 128, 128)
    # Random weights give logits of ~0.16 spread; 8-bit rounding through ~50 layers stays well under it.
    assert float((got - want).abs().max()) < 0.25 * float(want.std() * 4)
    assert float((got.argmax(1) == want.argmax(1)).float().mean()) > 0.99


@pytest.mark.slow
@needs_int8
def test_int8_calibration_is_the_same_on_every_load(parsers: tuple[nn.Module, nn.Module]) -> None:
    assert torch.equal(calibration_images(), calibration_images())
    _, int8 = parsers
    again = quantize_parser(prepare_conv_net(_parsenet(), torch.device("cpu"), rewrite=False))
    x = as_channels_last(torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(6)) * 2 - 1)
    # Exact: calibrated on the same images by the same kernels in this process, then integer work.
    with torch.inference_mode():
        assert torch.equal(int8(x)[0], again(x)[0])


def _enhancer(parser: nn.Module, **kw: object) -> FaceEnhancer:
    torch.manual_seed(0)
    gpen = build_gpen(GPENConfig(**TINY_GPEN))
    return FaceEnhancer(
        runner(gpen, placement("cpu", "fp32", False)), placement("cpu", "fp32", False), 4, parser=parser, **kw
    )  # type: ignore[arg-type]


@pytest.mark.slow
@needs_int8
def test_enhancer_with_parse_precision_int8_parses_with_int8(monkeypatch: pytest.MonkeyPatch) -> None:
    # As on a CPU with VNNI: without it int8 is refused (tests/test_number_formats.py).
    monkeypatch.setenv(CPU_FLAGS_ENV, "avx512_vnni")
    crops = np.random.default_rng(3).integers(0, 256, (2, 64, 64, 3), dtype=np.uint8)
    auto = _enhancer(_parsenet())
    int8 = _enhancer(_parsenet(), parse_precision="int8")
    assert _int8_convs(auto.parser) == 0  # type: ignore[arg-type]
    assert _int8_convs(int8.parser) >= 40  # type: ignore[arg-type]
    restored_auto, masks_auto = auto.enhance(crops)
    restored_int8, masks_int8 = int8.enhance(crops)
    # The generator is untouched: the same one on the same batch, so exactly the same faces.
    assert np.array_equal(restored_auto, restored_int8)
    assert masks_int8 is not None
    assert masks_auto is not None
    assert masks_int8.shape == masks_auto.shape == (2, 64, 64)


class SideRecorder(nn.Module):
    """Wraps a parser and records the side of every input it is given."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.sides: list[int] = []

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.sides.extend([int(x.shape[-1])] * len(x))
        out: tuple[torch.Tensor, torch.Tensor] = self.inner(x)
        return out


def test_faces_pasted_back_small_are_parsed_at_256() -> None:
    crops = np.random.default_rng(4).integers(0, 256, (4, 64, 64, 3), dtype=np.uint8)
    paste_px = np.array([100.0, 300.0, 255.9, 256.0])
    enhancer = _enhancer(SideRecorder(LabelMapParser()), parse_small_below=256)
    recorder = enhancer.parser
    restored, masks = enhancer.enhance(crops, paste_px=paste_px)
    assert sorted(recorder.sides) == [256, 256, 512, 512]
    assert masks is not None
    assert masks.shape == (4, 64, 64)
    # The same label map at either side: each face keeps its own mask, in its own place.
    default = _enhancer(LabelMapParser())
    restored_512, masks_512 = default.enhance(crops, paste_px=paste_px)
    assert np.array_equal(restored, restored_512)  # the same generator batches: exact
    assert np.abs(masks - masks_512).mean() < 0.05


def test_without_parse_small_below_every_face_is_parsed_at_512() -> None:
    crops = np.random.default_rng(4).integers(0, 256, (3, 64, 64, 3), dtype=np.uint8)
    enhancer = _enhancer(SideRecorder(LabelMapParser()))
    enhancer.enhance(crops, paste_px=np.array([10.0, 20.0, 30.0]))
    assert enhancer.parser.sides == [512, 512, 512]  # type: ignore[union-attr]


def test_paste_sides_are_the_crops_side_in_the_photo() -> None:
    landmarks = align.face_template(64)[None] * 0.5 + 10  # the template at half size
    image = np.zeros((200, 200, 3), np.uint8)
    _, affines = align.align_faces(image, landmarks.astype(np.float32), 64)
    assert align.paste_sides(affines, 64) == pytest.approx([32.0], rel=1e-3)


def test_parse_settings_are_checked(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "config.toml"
    path.write_text('[restore]\nparse_precision = "int4"\n')
    with pytest.raises(ConfigError, match=r"restore\.parse_precision: must be one of auto, fp32, bf16, int8"):
        load(path)
    path.write_text("[restore]\nparse_small_below = -1\n")
    with pytest.raises(ConfigError, match=r"restore\.parse_small_below"):
        load(path)
    assert Config().restore.parse_precision == "auto"
    assert Config().restore.parse_small_below == 0


def test_parsenet_built_for_512_gives_a_256_map_from_a_256_input() -> None:
    """restore.parse_small_below relies on it: ParseNet (in_size 512) is fully
    convolutional, so a 256 px face gives a 256 px map of the same 19 classes."""
    net = prepare_conv_net(_parsenet(), torch.device("cpu"))
    with torch.inference_mode():
        logits, image = net(as_channels_last(torch.zeros(1, 3, 256, 256)))
    assert logits.shape == (1, 19, 256, 256)
    assert image.shape == (1, 3, 256, 256)
