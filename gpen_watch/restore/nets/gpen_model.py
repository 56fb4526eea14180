"""The GPEN face-restoration generator (Yang et al., CVPR 2021) in plain PyTorch.

Like rosinality's stylegan2-pytorch ``model.py``, the generator reads top to bottom in the order a
face goes through it, and the checkpoints' key names follow its nesting; its layers are in
``gpen_blocks``.

GPEN = a conv encoder whose last feature becomes one latent, feeding a StyleGAN2 generator whose
noise inputs are replaced by the encoder's features, *concatenated* onto every styled conv's output.
Module and parameter names mirror upstream (yangxy/GPEN ``face_model/gpen_model.py``) so the official
GPEN-BFR-512 / GPEN-BFR-256 state dicts load unchanged; the code is an independent implementation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor, nn

from gpen_watch.catalog.gpen_config import GPENConfig
from gpen_watch.catalog.registry import GPEN_CONFIGS
from gpen_watch.modelstore.layout import compare_layout
from gpen_watch.restore.nets.gpen_blocks import (
    BLUR_TAPS,
    DEFAULT_MODULATION,
    MAPPING_LR_MUL,
    MODULATION_MODES,
    ConstantInput,
    ConvLayer,
    EqualLinear,
    ModulationMode,
    PixelNorm,
    StyledConv,
    ToRGB,
    iter_modulated_convs,
)

# The runner was written for GPEN first; its callers still import it from here.
from gpen_watch.restore.nets.runner import FaceRunner as GPENRunner
from gpen_watch.restore.nets.runner import prepare_for_inference, resolve_precision

# ---------------------------------------------------------------------------------------------------
# The generator


class StyleGenerator(nn.Module):
    """StyleGAN2 synthesis network with GPEN's concatenated features (upstream ``Generator``)."""

    def __init__(self, cfg: GPENConfig, taps: Sequence[float] = BLUR_TAPS) -> None:
        super().__init__()
        ch = cfg.channels()
        self.size = cfg.size
        self.style = nn.Sequential(
            PixelNorm(),
            *(
                EqualLinear(cfg.style_dim, cfg.style_dim, lr_mul=MAPPING_LR_MUL, activate=True)
                for _ in range(cfg.n_mlp)
            ),
        )
        self.input = ConstantInput(ch[4])
        self.conv1 = StyledConv(ch[4], ch[4], 3, cfg.style_dim, taps=taps)
        self.to_rgb1 = ToRGB(ch[4] * 2, cfg.style_dim, upsample=False, taps=taps)
        self.convs = nn.ModuleList()
        self.to_rgbs = nn.ModuleList()
        in_ch = ch[4]
        for res in (2**i for i in range(3, cfg.log_size + 1)):
            out_ch = ch[res]
            # Inputs are 2x wide because every styled conv's output carries its concatenated feature.
            self.convs.append(StyledConv(in_ch * 2, out_ch, 3, cfg.style_dim, upsample=True, taps=taps))
            self.convs.append(StyledConv(out_ch * 2, out_ch, 3, cfg.style_dim, taps=taps))
            self.to_rgbs.append(ToRGB(out_ch * 2, cfg.style_dim, taps=taps))
            in_ch = out_ch

    def forward(self, latent: Tensor, feats: Sequence[Tensor]) -> Tensor:
        # latent: (N, style_dim); feats[i]: (N, ch[2^(i+2)], 2^(i+2), 2^(i+2)), i.e. 4x4 first.
        # GPEN feeds one latent to every layer (no style mixing, truncation 1), so all layers share w.
        w = self.style(latent)  # (N, style_dim)
        out = self.conv1(self.input(latent.shape[0]), w, feats[0])  # (N, 2*ch4, 4, 4)
        skip: Tensor = self.to_rgb1(out, w)  # (N, 3, 4, 4)
        for i, to_rgb in enumerate(self.to_rgbs):
            # Each resolution's encoder feature is used by both of its styled convs.
            feat = feats[i + 1]
            out = self.convs[2 * i](out, w, feat)
            out = self.convs[2 * i + 1](out, w, feat)
            skip = to_rgb(out, w, skip)
        return skip  # (N, 3, S, S)


class GPEN(nn.Module):
    """Full GPEN generator (upstream ``FullGenerator``): face in [-1, 1] -> restored face in ~[-1, 1]."""

    def __init__(self, cfg: GPENConfig, modulation: ModulationMode = DEFAULT_MODULATION) -> None:
        super().__init__()
        self.config = cfg
        ch = cfg.channels()
        self.generator = StyleGenerator(cfg)
        # Stage i outputs resolution size / 2^i; the last one (4x4) becomes the latent.
        self.encoder_names = [f"ecd{i}" for i in range(cfg.log_size - 1)]
        self.ecd0 = nn.Sequential(ConvLayer(3, ch[cfg.size], 1))
        in_ch = ch[cfg.size]
        for i, name in enumerate(self.encoder_names[1:], start=1):
            out_ch = ch[cfg.size >> i]
            setattr(self, name, nn.Sequential(ConvLayer(in_ch, out_ch, 3, downsample=True)))
            in_ch = out_ch
        self.final_linear = nn.Sequential(EqualLinear(ch[4] * 4 * 4, cfg.style_dim, activate=True))
        self.set_modulation(modulation)

    @property
    def modulation(self) -> ModulationMode:
        return self.generator.conv1.conv.mode

    def set_modulation(self, mode: ModulationMode) -> None:
        """Switch every modulated conv between the "grouped" and "input_scaling" forms."""
        if mode not in MODULATION_MODES:
            raise ValueError(f"unknown modulation mode {mode!r}; expected one of {MODULATION_MODES}")
        for m in iter_modulated_convs(self):
            m.mode = mode

    def forward(self, x: Tensor) -> Tensor:
        # x: (N, 3, S, S) in [-1, 1] -> (N, 3, S, S)
        if x.shape[-2:] != (self.config.size, self.config.size):
            raise ValueError(
                f"GPEN-{self.config.size} expects {self.config.size}px faces, got {tuple(x.shape)}"
            )
        feats = []
        h = x
        for name in self.encoder_names:
            h = getattr(self, name)(h)
            feats.append(h)  # resolutions S, S/2, ..., 4
        latent = self.final_linear(h.flatten(1))  # (N, ch4*16) -> (N, style_dim)
        image: Tensor = self.generator(latent, feats[::-1])
        return image


# ---------------------------------------------------------------------------------------------------
# Construction and loading


def build_gpen(cfg: GPENConfig, modulation: ModulationMode = DEFAULT_MODULATION) -> GPEN:
    """A GPEN with random weights (use ``torch.device("meta")`` as a context to build it for free)."""
    return GPEN(cfg, modulation=modulation)


def infer_gpen_config(state_dict: Mapping[str, Tensor]) -> GPENConfig:
    """Recover the constructor arguments of a GPEN checkpoint from its keys and shapes.

    ``channel_multiplier`` only affects resolutions >= 64; below that it cannot be recovered and
    upstream's default (2) is returned.  Raises ValueError if the result does not reproduce every
    key and shape of ``state_dict``.
    """
    try:
        n_enc = sum(1 for k in state_dict if k.startswith("ecd") and k.endswith(".weight"))
        size = 2 ** (n_enc + 1)
        n_mlp = sum(1 for k in state_dict if k.startswith("generator.style.") and k.endswith(".weight"))
        style_dim = int(state_dict["final_linear.0.weight"].shape[0])
        ch4 = int(state_dict["generator.input.input"].shape[1])
        narrow = ch4 / 512
        channel_multiplier = 2
        if size >= 64:
            # ecd0 maps RGB to ch[size] = int(base * cm * narrow).
            base = {64: 256, 128: 128, 256: 64, 512: 32, 1024: 16, 2048: 8}[size]
            ch_size = int(state_dict["ecd0.0.0.weight"].shape[0])
            channel_multiplier = max(1, round(ch_size / (base * narrow)))
        cfg = GPENConfig(size, style_dim, n_mlp, channel_multiplier, narrow)
    except (KeyError, IndexError, ValueError) as e:
        raise ValueError(f"not a GPEN state dict: {e}") from e

    diff = compare_layout(gpen_state_dict_shapes(cfg), {k: tuple(v.shape) for k, v in state_dict.items()})
    if diff:
        raise ValueError(
            f"state dict does not match inferred {cfg}: missing {sorted(diff.missing)[:5]}, "
            f"unexpected {sorted(diff.unexpected)[:5]}, wrong shape {sorted(diff.wrong_shape)[:5]}"
        )
    return cfg


def gpen_state_dict_shapes(cfg: GPENConfig) -> dict[str, tuple[int, ...]]:
    """Key -> shape of a GPEN state dict for ``cfg``, computed on the meta device (no memory)."""
    with torch.device("meta"):
        model = build_gpen(cfg)
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


__all__: list[str] = [
    "DEFAULT_MODULATION",
    "GPEN",
    "GPEN_CONFIGS",
    "MODULATION_MODES",
    "GPENConfig",
    "GPENRunner",
    "ModulationMode",
    "build_gpen",
    "gpen_state_dict_shapes",
    "infer_gpen_config",
    "prepare_for_inference",
    "resolve_precision",
]
