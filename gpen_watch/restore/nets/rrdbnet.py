"""RRDBNet, the ESRGAN / Real-ESRGAN super-resolution network, in plain PyTorch.

The background upscaler (``restore.upscale``). Module and parameter names follow BasicSR's
``rrdbnet_arch.py`` (which upstream GPEN's ``sr_model`` copies), so the official Real-ESRGAN and
GPEN RealESRNet checkpoints load unchanged; the code is an independent implementation.

A picture goes through it as: (x2 only) pixel-unshuffle, folding each 2x2 block into 12 channels ->
conv_first -> a trunk of RRDB blocks with one long skip -> two nearest-neighbour 2x upsamplings,
each followed by a conv -> conv_hr -> conv_last.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gpen_watch.catalog.rrdbnet_config import RRDBConfig
from gpen_watch.modelstore.layout import compare_layout

LRELU_SLOPE = 0.2
# ESRGAN scales every residual branch down before adding it, which keeps the deep trunk stable.
RESIDUAL_SCALE = 0.2


def _conv(in_ch: int, out_ch: int) -> nn.Conv2d:
    return nn.Conv2d(in_ch, out_ch, kernel_size=3, stride=1, padding=1)


class ResidualDenseBlock(nn.Module):
    """Five convs, each seeing the block's input and every earlier conv's output (dense)."""

    def __init__(self, num_feat: int, num_grow_ch: int) -> None:
        super().__init__()
        g = num_grow_ch
        self.conv1 = _conv(num_feat, g)
        self.conv2 = _conv(num_feat + g, g)
        self.conv3 = _conv(num_feat + 2 * g, g)
        self.conv4 = _conv(num_feat + 3 * g, g)
        self.conv5 = _conv(num_feat + 4 * g, num_feat)

    def forward(self, x: Tensor) -> Tensor:
        # x: (N, F, H, W) -> (N, F, H, W)
        feats = [x]
        for conv in (self.conv1, self.conv2, self.conv3, self.conv4):
            feats.append(F.leaky_relu(conv(torch.cat(feats, 1)), LRELU_SLOPE))
        out: Tensor = self.conv5(torch.cat(feats, 1))
        return out * RESIDUAL_SCALE + x


class RRDB(nn.Module):
    """Residual in residual: three dense blocks in a row, with a scaled skip around them."""

    def __init__(self, num_feat: int, num_grow_ch: int) -> None:
        super().__init__()
        self.rdb1 = ResidualDenseBlock(num_feat, num_grow_ch)
        self.rdb2 = ResidualDenseBlock(num_feat, num_grow_ch)
        self.rdb3 = ResidualDenseBlock(num_feat, num_grow_ch)

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = self.rdb3(self.rdb2(self.rdb1(x)))
        return out * RESIDUAL_SCALE + x


class RRDBNet(nn.Module):
    """(N, 3, H, W) RGB in [0, 1] -> (N, 3, H*scale, W*scale). At x2, H and W must be even."""

    def __init__(self, config: RRDBConfig) -> None:
        super().__init__()
        self.config = config
        f = config.num_feat
        self.conv_first = _conv(config.in_channels, f)
        self.body = nn.Sequential(*(RRDB(f, config.num_grow_ch) for _ in range(config.num_block)))
        self.conv_body = _conv(f, f)
        self.conv_up1 = _conv(f, f)
        self.conv_up2 = _conv(f, f)
        self.conv_hr = _conv(f, f)
        self.conv_last = _conv(f, 3)

    def forward(self, x: Tensor) -> Tensor:
        u = self.config.unshuffle
        if u > 1:
            # (N, 3, H, W) -> (N, 3*u*u, H/u, W/u), channels ordered (colour, row in block, column).
            x = F.pixel_unshuffle(x, u)
        feat = self.conv_first(x)
        feat = feat + self.conv_body(self.body(feat))
        for conv in (self.conv_up1, self.conv_up2):
            feat = F.leaky_relu(conv(F.interpolate(feat, scale_factor=2.0, mode="nearest")), LRELU_SLOPE)
        out: Tensor = self.conv_last(F.leaky_relu(self.conv_hr(feat), LRELU_SLOPE))
        return out


def build_rrdbnet(config: RRDBConfig) -> RRDBNet:
    return RRDBNet(config)


def rrdb_state_dict_shapes(config: RRDBConfig) -> dict[str, tuple[int, ...]]:
    """Key -> shape of an RRDBNet state dict for ``config``, computed on the meta device."""
    with torch.device("meta"):
        net = build_rrdbnet(config)
    return {k: tuple(v.shape) for k, v in net.state_dict().items()}


_BODY_KEY = re.compile(r"body\.(\d+)\.")


def infer_rrdb_config(state_dict: Mapping[str, Tensor]) -> RRDBConfig:
    """Recover the constructor arguments of an RRDBNet checkpoint from its keys and shapes.

    Raises ValueError naming what does not fit when the result does not reproduce every key and
    shape (a file of another architecture, or an x1 / x3 model, which gpen-watch does not run).
    """
    try:
        in_ch = int(state_dict["conv_first.weight"].shape[1])
        scale = {3: 4, 12: 2}.get(in_ch)
        if scale is None:
            raise ValueError(
                f"conv_first takes {in_ch} channels: only x2 (12) and x4 (3) models are supported"
            )
        blocks = {int(m.group(1)) for k in state_dict if (m := _BODY_KEY.match(k))}
        cfg = RRDBConfig(
            scale=scale,
            num_feat=int(state_dict["conv_first.weight"].shape[0]),
            num_block=max(blocks) + 1 if blocks else 0,
            num_grow_ch=int(state_dict["body.0.rdb1.conv1.weight"].shape[0]),
        )
    except (KeyError, IndexError) as exc:
        raise ValueError(f"not an RRDBNet state dict: no {exc}") from None
    diff = compare_layout(rrdb_state_dict_shapes(cfg), {k: tuple(v.shape) for k, v in state_dict.items()})
    if diff:
        raise ValueError(
            f"state dict does not match RRDBNet {cfg}: missing {sorted(diff.missing)[:3]}, "
            f"unexpected {sorted(diff.unexpected)[:3]}, wrong shape {sorted(diff.wrong_shape)[:3]}"
        )
    return cfg
