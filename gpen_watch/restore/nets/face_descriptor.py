"""dlib's face-recognition ResNet (``dlib_face_recognition_resnet_model_v1.dat``) in plain PyTorch.

A 150 px colour chip of a face, aligned by its five landmarks (``restore.stages.identity``), becomes
128 numbers; chips of one person lie close together (dlib's metric loss: within 0.6 for the faces
it was trained on), of two people further apart. The network is the one dlib's
``dnn_face_recognition_ex.cpp`` defines: a 7x7 stride-2 convolution and a 3x3 max pool, then 14
residual blocks of two 3x3 convolutions (29 convolutions in all) over 32, 64, 128 and 256
channels, each halving block pooling its shortcut, an average over the whole map and a 128 x 256
projection with no bias.

Two of dlib's rules matter for matching it: a strided convolution or pool pads nothing, and a
residual sum of two maps of different sizes is as large as the larger, the smaller one counting as
zero beyond its edges (at 150 px the third halving adds a 3 x 3 map to a 4 x 4 one). Each
convolution's per-channel scale and shift that follows it in the file (dlib's ``affine`` layer, its
batch norm as trained) is folded into the convolution when the file is read.

``read_descriptor_net`` reads the file dlib wrote (``dlib_format``) layer by layer, checking each
against this architecture, so the module loads nothing it does not expect. Tests hold it to dlib's
own ``compute_face_descriptor`` on the same chips.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from gpen_watch.restore.nets.dlib_format import DlibStream

# The chip's side in pixels and the descriptor's length, fixed by the trained network.
CHIP_SIZE = 150
DESCRIPTOR_SIZE = 128
# (output channels, halves the map) of each residual block, from the input.
BLOCKS: tuple[tuple[int, bool], ...] = (
    *((32, False),) * 3,
    (64, True),
    *((64, False),) * 3,
    (128, True),
    *((128, False),) * 2,
    (256, True),
    *((256, False),) * 2,
    (256, True),
)
_STEM_CHANNELS = 32


def add_padded(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """dlib's residual sum: as large as the larger of the two in each dimension, each counting
    as zero beyond its own channels, rows and columns."""
    if a.shape == b.shape:
        return a + b
    c, h, w = (max(a.shape[i], b.shape[i]) for i in (1, 2, 3))

    def grow(t: torch.Tensor) -> torch.Tensor:
        return F.pad(t, (0, w - t.shape[3], 0, h - t.shape[2], 0, c - t.shape[1]))

    return grow(a) + grow(b)


class ResBlock(nn.Module):
    """Two 3x3 convolutions (the first at stride 2 and unpadded when ``down``), a ReLU between
    them; the shortcut (2x2-averaged when ``down``) is added and the sum goes through a ReLU."""

    def __init__(self, cin: int, cout: int, down: bool) -> None:
        super().__init__()
        self.down = down
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=2 if down else 1, padding=0 if down else 1)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # In place where the map is this block's own: no new map a ReLU or a sum.
        y = self.conv2(F.relu_(self.conv1(x)))
        skip = F.avg_pool2d(x, 2) if self.down else x
        return F.relu_(y.add_(skip) if y.shape == skip.shape else add_padded(y, skip))


class FaceDescriptorNet(nn.Module):
    """(N, 3, 150, 150) RGB chips, 0..255 floats -> (N, 128) descriptors (not normalised: their
    Euclidean distance is what dlib's training made meaningful)."""

    mean_rgb: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        # dlib subtracts its training set's mean colour and divides by 256.
        self.register_buffer("mean_rgb", torch.zeros(3))
        self.stem = nn.Conv2d(3, _STEM_CHANNELS, 7, stride=2)
        blocks = []
        cin = _STEM_CHANNELS
        for cout, down in BLOCKS:
            blocks.append(ResBlock(cin, cout, down))
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.project = nn.Linear(cin, DESCRIPTOR_SIZE, bias=False)

    def forward(self, chips: torch.Tensor) -> torch.Tensor:
        mean = self.mean_rgb.view(1, 3, 1, 1)
        # The ReLU after the pool, on a quarter of the values: max and ReLU commute exactly.
        x = F.relu_(F.max_pool2d(self.stem((chips - mean) / 256.0), 3, 2))
        x = self.blocks(x)
        out: torch.Tensor = self.project(x.mean(dim=(2, 3)))
        return out


# --- reading dlib's file --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Layer:
    """One layer as dlib's net type nests it: ``kind`` is dlib's name; ``channels``, ``kernel`` and
    ``stride`` for convolutions and pools."""

    kind: str  # con, affine, relu, max_pool, avg_pool, add_prev, fc, tag, skip
    channels: int = 0
    kernel: int = 0
    stride: int = 1


def _layers() -> list[_Layer]:
    """The network's layers from the input up, tags and skips included, as dlib nests them."""
    out = [_Layer("con", _STEM_CHANNELS, 7, 2), _Layer("affine"), _Layer("relu"), _Layer("max_pool", 0, 3, 2)]
    for cout, down in BLOCKS:
        out += [
            _Layer("tag"),
            _Layer("con", cout, 3, 2 if down else 1),
            _Layer("affine"),
            _Layer("relu"),
            _Layer("con", cout, 3, 1),
            _Layer("affine"),
        ]
        if down:
            out += [_Layer("tag"), _Layer("skip"), _Layer("avg_pool", 0, 2, 2)]
        out += [_Layer("add_prev"), _Layer("relu")]
    return [*out, _Layer("avg_pool", 0, 0, 1), _Layer("fc", DESCRIPTOR_SIZE)]


@dataclass
class _Conv:
    weight: np.ndarray  # (out, in, k, k)
    bias: np.ndarray  # (out,)


def read_descriptor_net(path: Path, advice: str = "") -> FaceDescriptorNet:
    """The network in ``path`` (dlib's ``dlib_face_recognition_resnet_model_v1.dat``), each
    convolution with its scale and shift folded in, in eval mode on the CPU. A file that is not
    this network raises ModelError naming what differs; ``advice`` is said after it."""
    s = DlibStream.open(path, advice)
    s.version("the loss layer", 1)
    if s.expect("the loss", "loss_metric_", "loss_metric_2") == "loss_metric_2":
        s.real(), s.real()  # margin and distance threshold: training settings
    layers = _layers()
    # dlib nests each layer around the ones below it: their headers come first, top down, then
    # each layer's details bottom up (the input layer's add_layer holds the first convolution).
    versions: list[int] = []
    for layer in reversed(layers[1:]):
        if layer.kind in ("tag", "skip"):
            s.version(f"a {layer.kind} layer", 1)
        else:
            versions.append(s.version("a layer", 1, 2))
    input_version = s.version("the input layer", 2, 3)
    s.expect("the input", "input_rgb_image_sized")
    mean = [s.real() for _ in range(3)]
    if (s.integer(), s.integer()) != (CHIP_SIZE, CHIP_SIZE):
        raise s.fail(f"an input size other than {CHIP_SIZE} x {CHIP_SIZE}")
    convs = [_read_con(s, layers[0])]
    _layer_state(s, input_version, input_layer=True)
    scales: list[tuple[np.ndarray, np.ndarray]] = []
    fc: np.ndarray | None = None
    body = [layer for layer in layers[1:] if layer.kind not in ("tag", "skip")]
    for layer, version in zip(body, reversed(versions)):
        if layer.kind == "con":
            convs.append(_read_con(s, layer))
        elif layer.kind == "affine":
            scales.append(_read_affine(s, convs[-1].weight.shape[0]))
        elif layer.kind == "fc":
            fc = _read_fc(s, layer.channels)
        else:
            _read_plain(s, layer)
        _layer_state(s, version, input_layer=False)
    if not s.at_end:
        raise s.fail("more data after the network")
    assert fc is not None and len(scales) == len(convs)
    return _build(mean, [_fold(c, g, b) for c, (g, b) in zip(convs, scales)], fc)


def _layer_state(s: DlibStream, version: int, input_layer: bool) -> None:
    """What dlib keeps beside each layer's details for training: three flags and its gradients'
    buffers (empty in a released file)."""
    for _ in range(3):
        s.flag()
    s.tensor(), s.tensor()
    if input_layer or version == 2:
        s.tensor()
    if input_layer and version == 3:
        s.integer()  # sample expansion factor


def _read_con(s: DlibStream, layer: _Layer) -> _Conv:
    version = s.expect("a convolution", "con_4", "con_5", "con_6")
    params = s.tensor().reshape(-1)
    filters = s.integer()
    rows, cols, stride_y, stride_x, pad_y, pad_x = (s.integer() for _ in range(6))
    weight_shape = s.tensor_shape()
    bias_shape = s.tensor_shape()
    for _ in range(4):
        s.real()  # learning-rate and weight-decay multipliers
    has_bias = s.flag() if version in ("con_5", "con_6") else True
    if version == "con_6":
        s.flag()  # a ReLU fused at training time; the next layer is the ReLU here
    pad = 0 if layer.stride != 1 else layer.kernel // 2
    want = (layer.channels, layer.kernel, layer.kernel, layer.stride, layer.stride, pad, pad)
    got = (filters, rows, cols, stride_y, stride_x, pad_y, pad_x)
    if got != want or not has_bias:
        raise s.fail(
            f"a convolution of {got} (filters, rows, columns, strides, padding) where {want} belongs"
        )
    n_weight = int(np.prod(weight_shape))
    if weight_shape[0] != filters or bias_shape[1] != filters or params.size != n_weight + filters:
        raise s.fail(f"a convolution's parameters of {params.size} values for filters {weight_shape}")
    return _Conv(params[:n_weight].reshape(weight_shape), params[n_weight:])


def _read_affine(s: DlibStream, channels: int) -> tuple[np.ndarray, np.ndarray]:
    version = s.expect("a scale and shift", "affine_", "affine_2")
    params = s.tensor().reshape(-1)
    gamma, beta = s.tensor_shape(), s.tensor_shape()
    s.integer()  # mode: per channel for a convolution's output
    if version == "affine_2" and s.flag():
        raise s.fail("a disabled scale and shift")
    if params.size != 2 * channels or gamma[1] != channels or beta[1] != channels:
        raise s.fail(f"a scale and shift of {params.size} values after {channels} filters")
    return params[:channels], params[channels:]


def _read_fc(s: DlibStream, outputs: int) -> np.ndarray:
    version = s.expect("the projection", "fc_2", "fc_3")
    n_out, n_in = s.integer(), s.integer()
    params = s.tensor()
    s.tensor_shape(), s.tensor_shape()
    bias_mode = s.integer()
    for _ in range(4):
        s.real()
    if version == "fc_3":
        s.flag()
    if n_out != outputs or n_in != BLOCKS[-1][0] or bias_mode != 1 or params.size != n_in * n_out:
        raise s.fail(f"a projection of {n_in} to {n_out} (bias mode {bias_mode})")
    return params.reshape(n_in, n_out)


def _read_plain(s: DlibStream, layer: _Layer) -> None:
    if layer.kind == "relu":
        if s.expect("a ReLU", "relu_", "relu_2") == "relu_2" and s.flag():
            raise s.fail("a disabled ReLU")
    elif layer.kind == "add_prev":
        s.expect("a residual sum", "add_prev_")
    else:
        s.expect("a pool", f"{layer.kind}_2")
        got = tuple(s.integer() for _ in range(6))
        want = (layer.kernel, layer.kernel, layer.stride, layer.stride, 0, 0)
        if got != want:
            raise s.fail(f"a pool of {got} where {want} belongs")


def _fold(conv: _Conv, gamma: np.ndarray, beta: np.ndarray) -> _Conv:
    return _Conv(conv.weight * gamma[:, None, None, None], conv.bias * gamma + beta)


def _build(mean: list[float], convs: list[_Conv], fc: np.ndarray) -> FaceDescriptorNet:
    net = FaceDescriptorNet()
    targets = [net.stem]
    for block in net.blocks:
        assert isinstance(block, ResBlock)
        targets += [block.conv1, block.conv2]
    assert len(targets) == len(convs)
    with torch.no_grad():
        net.mean_rgb.copy_(torch.tensor(mean, dtype=torch.float32))
        for module, conv in zip(targets, convs):
            module.weight.copy_(torch.from_numpy(np.ascontiguousarray(conv.weight)))
            assert module.bias is not None
            module.bias.copy_(torch.from_numpy(np.ascontiguousarray(conv.bias)))
        net.project.weight.copy_(torch.from_numpy(np.ascontiguousarray(fc.T)))
    return net.eval()
