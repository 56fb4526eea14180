"""ParseNet's load-time rewrites (``upconv``, ``reflect_conv``) compute what its layers do."""

from __future__ import annotations

import copy

import pytest
import torch
from test_fold import _with_random_statistics
from torch import nn

from gpen_watch.restore.nets.fold import as_channels_last, fold_batchnorm, prepare_conv_net
from gpen_watch.restore.nets.parsenet import ConvLayer, ParseNet, ResidualBlock, Scale
from gpen_watch.restore.nets.reflect_conv import RingFixedConv, reflect_pad_convs
from gpen_watch.restore.nets.upconv import (
    Interleave,
    PolyphaseUpBlock,
    phase_kernels,
    polyphase_upsample_blocks,
)


def _prepared(module: nn.Sequential) -> nn.Sequential:
    _with_random_statistics(module)
    fold_batchnorm(module)
    return module


def _block(scale: Scale, c_in: int = 6, c_out: int = 5) -> nn.Sequential:
    torch.manual_seed(1)
    return _prepared(nn.Sequential(ResidualBlock(c_in, c_out, scale)))


def _layer(scale: Scale, activate: bool) -> nn.Sequential:
    torch.manual_seed(2)
    return _prepared(nn.Sequential(ConvLayer(4, 7, scale, norm=True, activate=activate)))


def test_phase_kernels_of_a_nearest_upsample_are_sums_of_the_3x3_taps() -> None:
    w = torch.arange(9.0).view(1, 1, 3, 3)  # rows [0 1 2], [3 4 5], [6 7 8]
    k = phase_kernels(w)
    # Even row, even column: input rows -1 | 0 take kernel rows 0 | 1+2, columns likewise.
    assert k[0, 0].tolist() == [[0.0, 1 + 2], [3 + 6, 4 + 5 + 7 + 8]]
    # Odd row, odd column: input rows 0 | +1 take kernel rows 0+1 | 2.
    assert k[3, 0].tolist() == [[0 + 1 + 3 + 4, 2 + 5], [6 + 7, 8.0]]


@pytest.mark.parametrize("shape", [(2, 6, 9, 7), (1, 6, 1, 4), (1, 6, 16, 16)])
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("interleave", ["writes", "reshape"])
def test_polyphase_block_matches_the_upsampling_block(
    shape: tuple[int, int, int, int], channels_last: bool, interleave: Interleave
) -> None:
    ref = _block("up")
    fast = copy.deepcopy(ref)
    assert polyphase_upsample_blocks(fast, interleave) == 1
    assert isinstance(fast[0], PolyphaseUpBlock)
    x = torch.randn(*shape)
    if channels_last:
        x = as_channels_last(x)
    with torch.inference_mode():
        want, got = ref(x), fast(x)
    assert got.shape == want.shape == (shape[0], 5, 2 * shape[2], 2 * shape[3])
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("scale", ["same", "down"])
def test_blocks_that_do_not_upsample_are_left_alone(scale: Scale) -> None:
    block = _block(scale, 6, 6 if scale == "same" else 5)
    assert polyphase_upsample_blocks(block) == 0
    assert type(block[0]).__name__ == "ResidualBlock"


def test_a_block_whose_batchnorm_is_not_folded_is_left_alone() -> None:
    block = nn.Sequential(ResidualBlock(6, 5, "up")).eval()
    assert polyphase_upsample_blocks(block) == 0
    assert reflect_pad_convs(block) == 0  # every ConvLayer there still has its BatchNorm or scale


@pytest.mark.parametrize(("scale", "activate"), [("same", True), ("same", False), ("down", True)])
@pytest.mark.parametrize("side", [(97, 101), (100, 98), (40, 30)])  # odd, even, under the ring's floor
def test_ring_fixed_conv_matches_the_reflection_padded_layer(
    scale: Scale, activate: bool, side: tuple[int, int]
) -> None:
    ref = _layer(scale, activate)
    fast = copy.deepcopy(ref)
    assert reflect_pad_convs(fast) == 1
    assert isinstance(fast[0], RingFixedConv)
    x = as_channels_last(torch.randn(2, 4, *side))
    with torch.inference_mode():
        want, got = ref(x), fast(x)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_an_upsampling_layer_is_not_ring_fixed() -> None:
    assert reflect_pad_convs(_layer("up", False)) == 0


def _parsenet(size: int) -> nn.Module:
    torch.manual_seed(0)
    return _with_random_statistics(ParseNet(in_size=size, out_size=size))


@pytest.mark.slow
def test_rewritten_parsenet_gives_todays_logits_and_mask() -> None:
    """The bar for a load-time change: within 1e-4 of the plain graph in fp32."""
    net = _parsenet(256)
    plain = prepare_conv_net(copy.deepcopy(net), torch.device("cpu"), rewrite=False)
    fast = prepare_conv_net(copy.deepcopy(net), torch.device("cpu"))
    kinds = [type(m).__name__ for m in fast.modules()]
    assert kinds.count("PolyphaseUpBlock") == 3  # one per doubling, from 32 to 256 px
    assert kinds.count("RingFixedConv") >= 20
    x = as_channels_last(torch.rand(2, 3, 256, 256) * 2 - 1)
    with torch.inference_mode():
        (want, want_img), (got, got_img) = plain(x), fast(x)
    assert (got - want).abs().max().item() < 1e-4
    assert (got_img - want_img).abs().max().item() < 1e-4
    # Each logit moved by under 1e-4, so the class stays wherever it led by more than twice that;
    # a near tie may go either way on another CPU's kernels.
    top2 = want.topk(2, dim=1).values
    clear = top2[:, 0] - top2[:, 1] > 2e-4
    assert clear.float().mean().item() > 0.99
    assert torch.equal(got.argmax(1)[clear], want.argmax(1)[clear])


def test_int8_parser_is_built_from_the_plain_graph() -> None:
    from gpen_watch.restore.nets.quant import int8_backend
    from gpen_watch.restore.runtime.device import placement
    from gpen_watch.restore.stages.enhance import prepare_parser

    if int8_backend() is None:
        pytest.skip("this torch has no int8 engine")
    net = prepare_parser(_parsenet(128), placement("cpu", "fp32", False), "int8")
    kinds = {type(m).__name__ for m in net.modules()}
    assert "PolyphaseUpBlock" not in kinds
    assert "RingFixedConv" not in kinds


def test_fused_and_two_step_ring_fixed_convs_agree() -> None:
    from gpen_watch.restore.nets.fused_conv import fused_conv_works

    if not fused_conv_works():
        pytest.skip("this torch has no fused oneDNN convolution")
    layer = _layer("down", "LeakyReLU")
    assert reflect_pad_convs(layer) == 1
    fused = layer[0]
    assert isinstance(fused, RingFixedConv) and fused.fused
    two_step = RingFixedConv(fused.conv, fused.activation, fused=None)
    x = as_channels_last(torch.randn(1, 4, 99, 120))
    with torch.inference_mode():
        torch.testing.assert_close(fused(x), two_step(x), atol=1e-5, rtol=1e-5)


def test_the_engines_parser_skips_the_image_head_and_keeps_the_map() -> None:
    from gpen_watch.restore.runtime.device import placement
    from gpen_watch.restore.stages.enhance import prepare_parser

    net = _parsenet(128)
    full = prepare_conv_net(copy.deepcopy(net), torch.device("cpu"))
    engine = prepare_parser(copy.deepcopy(net), placement("cpu", "fp32", False), "fp32")
    x = as_channels_last(torch.rand(1, 3, 128, 128) * 2 - 1)
    with torch.inference_mode():
        (want, _), (got, image) = full(x), engine(x)
    assert image.shape == (1, 0, 128, 128)
    # Exact: the same layers on the same input in one process run the same kernels; only the
    # image head, which the map does not depend on, is left out.
    assert torch.equal(got, want)
